"""Experiments of the `grassmann` paper (one module per figure/result; each registers itself)."""
