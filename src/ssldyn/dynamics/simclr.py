"""SimCLR training of image encoders (``variational`` eq. (1), Fig. 1; Chen et al. 2020).

:func:`train_simclr` is a thin alias of :func:`ssldyn.dynamics.ssl.train_ssl` with the NT-Xent
objective (:class:`ssldyn.objectives.InfoNCE`, ``negatives="both"``: the 2B embeddings of the two
views are all anchors, ``variational`` eq. (1)–(2) with cosine similarity); see
:func:`ssldyn.dynamics.ssl.train_simclr` for its arguments.
"""

from ssldyn.dynamics.ssl import train_simclr

__all__ = ["train_simclr"]
