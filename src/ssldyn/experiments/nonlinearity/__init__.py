"""Experiments of the `nonlinearity` paper (one module per figure/result; each registers itself)."""
