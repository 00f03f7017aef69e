"""Fine-tuning tasks, one module each, all of the same shape (`base.Task`).

read examples → encode features → task model → loss → postprocess → official
metric → write predictions. `runner.run` drives any task: tokenizer, training
with the best dev checkpoint kept, evaluation, prediction files, `summary.json`.

- `glue`: GLUE-style TSV classification and regression (`TsvTask`).
- `squad`: SQuAD v1.1 / v2.0 span extraction (`SquadTask`).
- `race`: RACE multiple choice (`RaceTask`).
"""
