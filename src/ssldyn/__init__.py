"""ssldyn: learning dynamics of self-supervised representation learning.

Subpackages follow the pipeline of DESIGN.md::

    data -> models -> objectives -> dynamics -> probes -> lab (claims, figures, report)

``kernels`` holds empirical/closed-form neural tangent kernels and ``viz`` the figures.
"""

__version__ = "0.1.0"
