"""Experiments, one subpackage per paper. Every module here is imported by
:func:`ssldyn.lab.registry.load_all`, so a new module registers its experiments by itself."""

# experiments are reached through the registry (ssldyn.get_experiment), not as names of this package
__all__: list[str] = []
