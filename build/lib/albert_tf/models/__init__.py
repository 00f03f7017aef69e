"""ALBERT models built functionally from the layers."""
