"""Pretraining (MLM + SOP) on TensorFlow or JAX: settings, loop, checkpoint policy, the whole job.

- `settings.py`: `PretrainSettings` (the original's flags) and `PretrainingError`.
- `objective.py`: the one pretraining loss (keras.ops, sums over a batch) and its metrics.
- `loop.py`: `PretrainingLoop`: model, optimizer, checkpointed input, the loop (one for both backends).
- `tf_step.py` / `jax_step.py`: the train and eval steps of each backend (`jax_step` imports no
  TensorFlow: the GPU benchmark runs it where there is none).
- `run_state.py`: `CheckpointPolicy`: resume, warm start, save, best/, final/.
- `job.py`: `pretrain()`: data → checks → loop → final model (no export: the CLI's job).
- `health.py`: what a run's numbers mean (data shares, not learning, SOP plateau, spike/collapse);
  `divergence.py`: the loop's side of it (health lines to log/TensorBoard, `--on_divergence`).
"""
