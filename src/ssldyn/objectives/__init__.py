"""ssldyn.objectives

Losses and energies of the three papers as pure functions on tensors, plus thin
``nn.Module`` wrappers. Inputs are ``(N, d)`` or ``(..., N, d)`` with leading ensemble
axes; a loss returns a scalar, or one value per ensemble member.

- :mod:`.info_nce` — SimCLR NT-Xent / InfoNCE (``variational`` eq. 1, ``nonlinearity`` eq. 1)
- :mod:`.generalized` — generalized contrastive cost (``variational`` eq. 4-5)
- :mod:`.latent_measure` — NT-Xent of a latent measure (``variational`` Prop. 2.1)
- :mod:`.alpha_cl` — α-CL contrastive covariance, energy, pairwise importances (``nonlinearity`` Sec. 2)
- :mod:`.grassmann` — simple (non-)contrastive and trace losses (``grassmann`` eq. 1, 2, 7, 8, Prop. 3)
- :mod:`.peers` — VICReg, BYOL / SimSiam, spectral contrastive loss
- :mod:`.variational_calculus` — first/second variation of eq. (4), stationarity on S^{d−1} (``variational`` Sec. 3, App. A)
"""

# Every public name of a submodule is public here: each submodule's ``__all__`` is the one list.
from . import alpha_cl as _alpha_cl
from . import generalized as _generalized
from . import grassmann as _grassmann
from . import info_nce as _info_nce
from . import latent_measure as _latent_measure
from . import peers as _peers
from . import variational_calculus as _variational_calculus
from .alpha_cl import *
from .generalized import *
from .grassmann import *
from .info_nce import *
from .latent_measure import *
from .peers import *
from .variational_calculus import *

__all__: list[str] = []
__all__ += _info_nce.__all__
__all__ += _generalized.__all__
__all__ += _latent_measure.__all__
__all__ += _alpha_cl.__all__
__all__ += _grassmann.__all__
__all__ += _peers.__all__
__all__ += _variational_calculus.__all__
