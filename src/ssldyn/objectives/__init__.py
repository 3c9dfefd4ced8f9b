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

from .alpha_cl import (
    AlphaCLEnergy,
    QuadraticContrastiveLoss,
    alpha_cl_energy,
    alpha_gaussian,
    alpha_infonce,
    alpha_uniform,
    contrastive_covariance,
    quadratic_contrastive_loss,
)
from .generalized import GeneralizedContrastiveLoss, generalized_contrastive_loss
from .grassmann import (
    NonContrastiveLoss,
    SimpleContrastiveLoss,
    TraceLoss,
    contrast_matrix,
    non_contrastive,
    non_contrastive_matrix,
    scaled_trace_loss,
    simple_contrastive,
    trace_loss,
)
from .info_nce import InfoNCE, info_nce
from .latent_measure import (
    LatentMeasureNTXent,
    cluster_measure_nt_xent,
    cluster_sizes,
    latent_measure_nt_xent,
)
from .peers import (
    BYOLLoss,
    NegativeCosine,
    SpectralContrastiveLoss,
    VICRegLoss,
    VICRegTerms,
    byol_loss,
    negative_cosine,
    spectral_contrastive_loss,
    vicreg_loss,
    vicreg_terms,
)
from .variational_calculus import (
    Stationarity,
    augmented_first_variation,
    augmented_loss,
    first_variation,
    measure_loss,
    second_variation,
    sphere_stationarity,
    stationarity_probe,
    symmetry_condition_gap,
)

__all__ = [
    # info_nce
    "info_nce",
    "InfoNCE",
    # generalized
    "generalized_contrastive_loss",
    "GeneralizedContrastiveLoss",
    # latent measure
    "latent_measure_nt_xent",
    "cluster_measure_nt_xent",
    "cluster_sizes",
    "LatentMeasureNTXent",
    # alpha-CL
    "contrastive_covariance",
    "alpha_cl_energy",
    "alpha_uniform",
    "alpha_infonce",
    "alpha_gaussian",
    "quadratic_contrastive_loss",
    "AlphaCLEnergy",
    "QuadraticContrastiveLoss",
    # grassmann
    "simple_contrastive",
    "non_contrastive",
    "contrast_matrix",
    "non_contrastive_matrix",
    "trace_loss",
    "scaled_trace_loss",
    "SimpleContrastiveLoss",
    "NonContrastiveLoss",
    "TraceLoss",
    # peers
    "vicreg_terms",
    "vicreg_loss",
    "VICRegTerms",
    "byol_loss",
    "negative_cosine",
    "spectral_contrastive_loss",
    "VICRegLoss",
    "BYOLLoss",
    "NegativeCosine",
    "SpectralContrastiveLoss",
    # variational calculus (variational Sec. 3, App. A)
    "measure_loss",
    "first_variation",
    "second_variation",
    "Stationarity",
    "sphere_stationarity",
    "symmetry_condition_gap",
    "stationarity_probe",
    "augmented_loss",
    "augmented_first_variation",
]
