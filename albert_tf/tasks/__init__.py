"""Fine-tuning data: GLUE, SQuAD and RACE readers, features and metrics."""
