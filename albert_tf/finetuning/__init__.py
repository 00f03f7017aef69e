"""The fine-tuning engine, apart from the tasks it drives (as Model Garden keeps `official/core` apart from its tasks).

- `base`: the `Task` interface every task implements (read → encode → model → loss → postprocess →
  metric → write), `Encoded`, `Baseline`, `option`.
- `settings`: `FineTuneSettings`, what every run is told, and its step schedule.
- `runner`: `run(task, settings)`: the model resolved once, training with the best dev model kept,
  evaluation, prediction files, `summary.json` (`--dry_run`: the plan).
- `training`: the loop (`fit` between evaluations), `checkpoints`, `best_model`, `history`.
- `start`: the model a run starts from; `datasets`: batches; `tflite_model`: a .tflite file as a model.
- `losses`, `metrics`: what the tasks score and train with.

The tasks themselves live in `albert_tf.tasks`.
"""
