"""Shared declarations of the ``variational`` experiments."""

from __future__ import annotations

from pathlib import Path

from ssldyn.contract import Experiment


class VariationalExperiment(Experiment):
    """What the ``variational`` experiments declare alike: the paper, and one torch thread.

    The runs are made of many small tensor ops, which one torch thread runs fastest (``threads = 1``);
    an experiment whose work is different says so (Fig. 3's closed forms keep the process setting).
    """

    paper = "variational"
    captions_file = Path(__file__).with_name("captions.md")  # the figures' captions, one section each
    threads = 1
