"""tf.data readers: pretraining TFRecords (and, later, the fine-tuning tasks)."""
