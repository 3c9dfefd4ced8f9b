"""Experiments of the `grassmann` paper (one module per figure/result; each registers itself)."""

# experiments are reached through the registry (ssldyn.get_experiment), not as names of this package
__all__: list[str] = []
