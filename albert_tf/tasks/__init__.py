"""Fine-tuning tasks, one module each, all of the same shape (`albert_tf.finetuning.base.Task`).

read examples → encode features → task model → loss → postprocess → official
metric → write predictions. The engine (`albert_tf.finetuning.runner.run`) drives any task:
tokenizer, training with the best dev checkpoint kept, evaluation, prediction files, `summary.json`.

- `glue`: GLUE-style TSV classification and regression (`TsvTask`); `file_task`: your own TSV/CSV/JSON lines.
- `squad`: SQuAD v1.1 / v2.0 span extraction (`SquadTask`).
- `race`: RACE multiple choice (`RaceTask`).
- `early_exit`: any of them with a classifier per layer (PABEE).
"""
