"""Pretraining (MLM + SOP) on tf.distribute: settings, loop, checkpoint policy, the whole job.

- `settings.py`: `TrainSettings` (the original's flags) and `TrainingError`.
- `strategy.py`: the tf.distribute strategy of `--strategy`.
- `objective.py`: the one pretraining loss (keras.ops, sums over a batch) and its metrics.
- `loop.py`: `PretrainingLoop`: model, optimizer, train and eval steps, the loop.
- `run_state.py`: `CheckpointPolicy`: resume, warm start, save, best/, final/.
- `job.py`: `pretrain()`: data → checks → loop → final model (no export: the CLI's job).
- `health.py`: what a run's numbers mean (data shares, not learning, SOP plateau, spike/collapse);
  `divergence.py`: the loop's side of it (health lines to log/TensorBoard, `--on_divergence`).
"""
