"""Weights in and out of the peers' formats: HF transformers directories and keras-hub presets."""
