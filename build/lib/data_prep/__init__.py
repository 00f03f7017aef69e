"""Apache Beam jobs that build ALBERT pretraining data (SentencePiece, SOP, n-gram masking)."""
