"""The run store as pandas tables: ``ssldyn.results.load(out)`` (the lab's public face for analysis).

The implementation lives in :mod:`ssldyn.lab.results` (it reads the lab's store and claims, so
it sits inside the lab and the lab never imports upward); this module is its stable import path.
"""

from ssldyn.lab.results import Results, RunRecord, key_columns, load

__all__ = ["load", "key_columns", "Results", "RunRecord"]
