"""Training health's verdicts (albert_tf.pretraining.health), from metric sequences: no training here."""

import math

import pytest

from albert_tf.pretraining.health import (
    DataFacts,
    Divergence,
    HealthMonitor,
    HealthSettingError,
    HealthSettings,
    binary_entropy,
    data_lines,
    schedule_lines,
    window_label,
)

LN2 = math.log(2)
SETTINGS = HealthSettings(learning_window_steps=100, median_steps=20, min_history=10, max_rollbacks=2)


def metadata(task="sop", instances=1000, label_1=500, masked=150, tokens=1000):
    counts = {"instances": instances, "sop_label_1": label_1, "masked_tokens": masked, "non_special_tokens": tokens}
    return {"task": task, "num_instances": instances, "counts": counts}


def metrics(mlm_loss=6.0, mlm_accuracy=0.1, sentence_loss=LN2, sentence_accuracy=0.5):
    return {
        "loss": mlm_loss + sentence_loss,
        "masked_lm_loss": mlm_loss,
        "masked_lm_accuracy": mlm_accuracy,
        "sentence_order_loss": sentence_loss,
        "sentence_order_accuracy": sentence_accuracy,
    }


def run_windows(monitor, windows, every=10):
    """Feeds `windows` (metric dicts) at steps every, 2·every, ...; returns {step: lines} and the divergences."""
    said, divergences = {}, []
    for index, values in enumerate(windows, start=1):
        lines, divergence = monitor.window(index * every, every, values)
        if lines:
            said[index * every] = lines
        if divergence:
            divergences.append(divergence)
    return said, divergences


def test_data_line_gives_the_label_and_masked_shares():
    facts = DataFacts.from_metadata("data/sop", metadata(label_1=498, masked=163))
    assert data_lines(facts, "sop") == [
        "health: data data/sop: SOP, label 1 in 49.8% of 1,000 instances; 16.3% of tokens masked"
    ]
    assert facts.chance_loss == pytest.approx(binary_entropy(0.498)) and binary_entropy(0.5) == pytest.approx(LN2)


@pytest.mark.parametrize(("data_task", "run_task"), [("nsp", "sop"), ("sop", "nsp")])
def test_a_run_meant_for_one_sentence_task_reading_the_other_is_warned(data_task, run_task):
    lines = data_lines(DataFacts.from_metadata("d", metadata(task=data_task)), run_task)
    assert len(lines) == 2
    assert lines[1].startswith(f"health: warning: this run trains {run_task.upper()} (--sentence_task={run_task})")
    assert f"holds {data_task.upper()} data" in lines[1] and f"--sentence_task={data_task}" in lines[1]


def test_skewed_labels_no_masks_and_old_metadata_are_said():
    lines = data_lines(DataFacts.from_metadata("d", metadata(label_1=900, masked=0)), "sop")
    assert "chance accuracy is 90.0%, not 50%" in lines[1]
    assert "no token of the data is masked" in lines[2]
    old = DataFacts.from_metadata("d", {"num_instances": 7})  # written before counts and task existed
    assert data_lines(old, "sop") == [
        "health: data d: unknown task, label share unknown of 7 instances; masked share unknown"
    ]
    assert old.chance_loss == pytest.approx(LN2)


def test_a_flat_masked_lm_loss_is_not_learning_and_a_falling_one_is():
    flat = HealthMonitor(SETTINGS, "warn")
    said, _ = run_windows(flat, [metrics(mlm_loss=8.0 - 0.001 * i) for i in range(12)])
    assert list(said) == [100]  # once, at learning_window_steps
    assert said[100][0].startswith("health: the run is not learning: masked_lm_loss 8.0000 at step 10 → 7.9910")
    assert "learning rate" in said[100][0]

    learning = HealthMonitor(SETTINGS, "warn")
    said, _ = run_windows(learning, [metrics(mlm_loss=8.0 - 0.2 * i) for i in range(12)])
    assert not any("not learning" in line for lines in said.values() for line in lines)


def test_sentence_order_at_chance_while_mlm_improves_is_a_plateau_said_at_doubling_lengths_until_it_ends():
    monitor = HealthMonitor(SETTINGS, "warn", DataFacts.from_metadata("d", metadata()))
    windows = [metrics(mlm_loss=8.0 - 0.1 * i, sentence_loss=LN2 + 0.001) for i in range(45)]
    windows.append(metrics(mlm_loss=3.0, sentence_loss=0.4, sentence_accuracy=0.8))
    said, divergences = run_windows(monitor, windows)
    assert not divergences
    plateau = {step: lines[0] for step, lines in said.items() if "not learnt yet" in lines[0]}
    assert list(plateau) == [100, 200, 400]  # 100, 200 and 400 steps after step 0
    assert plateau[200].startswith("health: sentence order not learnt yet (plateau, 200 steps so far): ")
    assert "Expected early" in plateau[200]
    assert said[460] == [
        "health: sentence order learnt: sentence_order_accuracy 0.800 (chance 0.500) at step 460, after the "
        "plateau from step 0"
    ]


def test_a_resumed_run_is_judged_from_where_it_resumed():
    def resumed(mlm_step):
        monitor, said = HealthMonitor(SETTINGS, "warn"), {}
        for index in range(30):
            lines, _ = monitor.window(5010 + 10 * index, 10, metrics(mlm_loss=2.0 - mlm_step * index))
            said.update({5010 + 10 * index: lines} if lines else {})
        return said

    assert resumed(0.001) == {}  # late in a run MLM may move slowly: no "not learning" after a resume
    assert resumed(0.01)[5100][0].startswith(
        "health: sentence order not learnt yet (plateau, 100 steps so far, counted from step 5000): "
    )


def test_a_plateau_is_not_called_while_mlm_is_flat_too():
    monitor = HealthMonitor(SETTINGS, "warn")
    said, _ = run_windows(monitor, [metrics(mlm_loss=8.0) for _ in range(30)])
    lines = [line for lines in said.values() for line in lines]
    assert len(lines) == 1 and "not learning" in lines[0]


def test_a_loss_spike_is_flagged_once_per_episode_against_the_running_median():
    monitor = HealthMonitor(SETTINGS, "warn")
    losses = [5.0 + 0.3 * (-1) ** i for i in range(30)] + [12.0, 13.0, 5.0] + [5.0] * 10 + [11.5]
    divergences = [monitor.step_loss(step, loss) for step, loss in enumerate(losses, start=1)]
    flagged = [d for d in divergences if d]
    assert [(d.kind, d.step, d.since_step) for d in flagged] == [("loss spike", 31, 30), ("loss spike", 44, 43)]
    assert flagged[0].message == "loss spike at step 31: 12.0000, 2.4× the median 5.0000 of the 20 steps before"


def test_no_spike_verdict_on_a_short_history_or_noisy_but_steady_losses():
    monitor = HealthMonitor(SETTINGS, "warn")
    assert all(monitor.step_loss(step, loss) is None for step, loss in enumerate([9.0, 1.0] * 4 + [30.0], 1))
    steady = HealthMonitor(SETTINGS, "warn")
    assert all(steady.step_loss(step, 5.0 * (1.5 if step % 3 else 0.8)) is None for step in range(1, 200))


def test_accuracy_collapse_of_mlm_or_of_a_learnt_sentence_order_is_a_divergence():
    mlm = HealthMonitor(SETTINGS, "warn")
    _, divergences = run_windows(mlm, [metrics(mlm_accuracy=a) for a in (0.1, 0.3, 0.4, 0.25, 0.15)])
    assert [(d.kind, d.step, d.since_step) for d in divergences] == [("accuracy collapse", 50, 40)]
    assert "masked_lm_accuracy 0.150 over the last 10 steps, down from a best of 0.400" in divergences[0].message

    sentence = HealthMonitor(SETTINGS, "warn")
    learnt = ((0.5, LN2), (0.9, 0.3), (0.95, 0.2), (0.6, LN2))  # a sentence order left its plateau, then lost it
    windows = [metrics(sentence_accuracy=a, sentence_loss=loss, mlm_accuracy=0.3) for a, loss in learnt]
    _, divergences = run_windows(sentence, windows)
    assert len(divergences) == 1 and "sentence_order_accuracy 0.600" in divergences[0].message

    noisy = HealthMonitor(SETTINGS, "warn")  # gains too small to call a collapse
    _, divergences = run_windows(
        noisy, [metrics(mlm_accuracy=a, sentence_accuracy=s) for a, s in ((0.04, 0.55), (0.0, 0.45))]
    )
    assert not divergences


def test_a_sentence_order_still_at_chance_is_never_a_collapse_however_its_windows_wander():
    # Issue 41: seven collapse warnings in one run on a sentence accuracy that never left chance.
    monitor = HealthMonitor(SETTINGS, "warn")
    wander = (0.5, 0.62, 0.55, 0.48, 0.65, 0.5, 0.44, 0.63, 0.47)
    windows = [
        metrics(mlm_loss=6.0 - 0.2 * i, mlm_accuracy=0.1 + 0.01 * i, sentence_accuracy=a) for i, a in enumerate(wander)
    ]
    said, divergences = run_windows(monitor, windows)
    assert not divergences
    assert not [line for lines in said.values() for line in lines if "collapse" in line]


def test_a_drop_within_the_windows_sampling_noise_is_not_a_collapse():
    windows = [
        metrics(mlm_accuracy=0.3, sentence_accuracy=a, sentence_loss=loss)
        for a, loss in ((0.5, LN2), (0.75, 0.5), (0.6, 0.6))
    ]

    def divergences(count):
        monitor = HealthMonitor(SETTINGS, "warn")
        found = []
        for index, values in enumerate(windows, start=1):
            counts = {"masked_lm_accuracy": 10 * count, "sentence_order_accuracy": count}
            found.append(monitor.window(10 * index, 10, values, counts)[1])
        return [d for d in found if d]

    assert divergences(32) == []  # 0.75 → 0.6 over 32 sentences a window: 3σ of the difference is 0.32
    (collapse,) = divergences(10_000)  # the same drop over 10,000: far beyond the noise
    assert "sentence_order_accuracy 0.600" in collapse.message


def test_stopping_names_the_checkpoint_from_before_the_divergence_not_the_suspect_newest():
    from albert_tf.pretraining.divergence import respond_to_divergence
    from albert_tf.pretraining.run_state import CheckpointPolicy
    from albert_tf.pretraining.settings import PretrainingError

    class KeptCheckpoints:
        manager = type("Manager", (), {"checkpoints": ["run/ckpt-10", "run/ckpt-20", "run/ckpt-30"]})
        newest_before = CheckpointPolicy.newest_before

        def latest(self):
            return "run/ckpt-30"

    spike = Divergence("loss spike", 32, since_step=31, message="loss spike at step 32")
    collapse = Divergence("accuracy collapse", 40, since_step=30, message="accuracy collapse at step 40")
    with pytest.raises(PretrainingError, match=r"Last checkpoint: run/ckpt-30; resume from it"):
        respond_to_divergence(None, KeptCheckpoints(), HealthMonitor(SETTINGS, "stop"), spike, print)
    # The window 30-40 collapsed: ckpt-30 holds weights on the way there.
    with pytest.raises(PretrainingError, match=r"Last checkpoint: run/ckpt-20; resume from it"):
        respond_to_divergence(None, KeptCheckpoints(), HealthMonitor(SETTINGS, "stop"), collapse, print)
    spent = HealthMonitor(SETTINGS, "rollback")
    spent.rollbacks = SETTINGS.max_rollbacks
    with pytest.raises(PretrainingError, match=r"after 2 rollbacks .*Last checkpoint: run/ckpt-20; resume"):
        respond_to_divergence(None, KeptCheckpoints(), spent, collapse, print)


def test_rollbacks_are_bounded_then_the_run_stops():
    monitor = HealthMonitor(SETTINGS, "rollback")
    spike = monitor.step_loss  # any divergence will do
    for step in range(1, 12):
        spike(step, 1.0)
    divergence = spike(12, 10.0)
    assert [monitor.response(divergence) for _ in range(3)] == ["rollback", "rollback", "stop"]
    assert "stopped after 2 rollbacks (the most --on_divergence=rollback makes)" in monitor.stop_message(
        divergence, "run/checkpoints/ckpt-10"
    )
    assert HealthMonitor(SETTINGS, "stop").response(divergence) == "stop"
    assert HealthMonitor(SETTINGS, "warn").response(divergence) == "warn"
    with pytest.raises(HealthSettingError, match="--on_divergence must be one of warn, stop, rollback, not 'ignore'"):
        HealthMonitor(SETTINGS, "ignore")
    with pytest.raises(HealthSettingError, match="--sentence_task must be one of sop, nsp, not 'SOP'"):
        data_lines(DataFacts.from_metadata("d", metadata()), "SOP")


def test_a_collapse_is_flagged_once_per_episode_and_a_rollback_starts_a_new_one():
    windows = [metrics(mlm_accuracy=a) for a in (0.1, 0.4, 0.1, 0.1, 0.4, 0.1)]
    _, divergences = run_windows(HealthMonitor(SETTINGS, "warn"), windows)
    assert [d.step for d in divergences] == [30, 60]

    monitor = HealthMonitor(SETTINGS, "rollback")
    for step in range(1, 12):
        monitor.step_loss(step, 1.0)
    first = monitor.step_loss(12, 10.0)
    assert monitor.response(first) == "rollback"
    assert monitor.step_loss(11, 10.0).step == 11  # the same spike again after the rollback is flagged again
    assert max(monitor.recent_losses) == 10.0 and list(monitor.recent_losses).count(10.0) == 1


def test_window_labels():
    assert window_label(50) == "last 50 steps" and window_label(1) == "last step"


def test_a_warmup_longer_than_the_run_and_an_eval_on_the_training_data_are_said():
    warm, evaluated = schedule_lines(1500, 3125, do_eval=True, eval_file_given=False)
    assert warm == (
        "health: warning: --num_warmup_steps 3125 is longer than --num_train_steps 1500: the learning rate "
        "never reaches --learning_rate (it ends at 48% of it)"
    )
    assert evaluated.startswith("health: warning: --do_eval without --eval_file evaluates on the training shards")
    assert schedule_lines(1500, 1500, do_eval=True, eval_file_given=True) == []
    assert schedule_lines(1500, 100, do_eval=False, eval_file_given=False) == []
