"""The settings a run's checkpoints are bound to, recorded beside them and checked on resume.

The input iterator is saved batched: resumed with another `--train_batch_size`
(or `--grad_accum_steps`, which sets the micro-batch), its first batch has the
old shape and TensorFlow stops with "Incompatible shapes" deep in the step.
The backend (`Compute.name`) is bound too: a JAX run's checkpoints hold tf.Variable
copies of its state (`compute.jax_state`), not the TensorFlow model's objects. So is
the data's row layout (instances a row, `data_prep.packing`): the iterator's
batches have its features; and its objective (`metadata.json`, ALBERT's or PL-BERT's): the
checkpoints hold that objective's model.
"""

import os

from albert_tf.json_records import read_json, write_json
from albert_tf.pretraining.settings import PretrainingError

RUN_RECORD = "run_settings.json"
BOUND_FLAGS = ("train_batch_size", "grad_accum_steps")


def _record(checkpoint_dir: str):
    recorded = os.path.join(checkpoint_dir, RUN_RECORD)
    if not os.path.exists(recorded):
        return None
    return read_json(recorded)


def check_same_backend(settings, checkpoint_dir: str, backend: str) -> None:
    """Raises `PretrainingError` when the run's checkpoints were written on another backend than `backend`."""
    _check_backend(settings, _record(checkpoint_dir), backend)


def _check_backend(settings, before, now: str) -> None:
    backend = (before or {}).get("backend", "tensorflow")  # records from before JAX runs existed
    if before is not None and backend != now:
        raise PretrainingError(
            f"{settings.output_dir} was trained on Keras' {backend} backend (now {now}): its "
            f"checkpoints hold that backend's state; resume with --backend {backend}, or use a new --output_dir"
        )


def check_same_objective(settings, checkpoint_dir: str, objective: str) -> None:
    """Raises `PretrainingError` when the run's checkpoints were trained on data of another objective."""
    before = _record(checkpoint_dir)
    trained = (before or {}).get("objective", "albert")  # records from before PL-BERT runs existed
    if before is not None and trained != objective:
        raise PretrainingError(
            f"{settings.output_dir} was trained on {trained} data, this data is {objective} data (its metadata.json "
            "objective): its checkpoints hold the other model; resume on the same data, or use a new --output_dir"
        )


def check_same_batch(settings, checkpoint_dir: str, max_instances_per_row: int, backend: str) -> None:
    """Raises `PretrainingError` naming the backend (`Compute.name`), the row layout, or each flag that differs
    from the record."""
    before = _record(checkpoint_dir)
    _check_backend(settings, before, backend)
    if before is None:
        return
    packed_before = before.get("max_instances_per_row", 1)
    if packed_before != max_instances_per_row:
        raise PretrainingError(
            f"{settings.output_dir} was trained on data of up to {packed_before} instances a row, this data holds "
            f"up to {max_instances_per_row} (create_pretraining_data --max_instances_per_row): its checkpoints hold "
            "the input iterator of that data; resume on the same data, or use a new --output_dir"
        )
    changed = [
        f"--{n} {before[n]} (now {getattr(settings, n)})"
        for n in BOUND_FLAGS
        if before.get(n, getattr(settings, n)) != getattr(settings, n)
    ]
    if changed:
        raise PretrainingError(
            f"{settings.output_dir} was trained with {', '.join(changed)}: its checkpoints hold the input "
            "iterator at that batch size; resume with the same flags, or use a new --output_dir"
        )


def record_batch(
    settings, checkpoint_dir: str, max_instances_per_row: int, backend: str, objective: str = "albert"
) -> None:
    """Written after each successful start (checked equal when there were checkpoints to resume)."""
    record = {n: getattr(settings, n) for n in BOUND_FLAGS}
    record.update(backend=backend, max_instances_per_row=max_instances_per_row, objective=objective)
    write_json(os.path.join(checkpoint_dir, RUN_RECORD), record)
