"""Experiments of the `variational` paper (one module per figure/result; each registers itself)."""
