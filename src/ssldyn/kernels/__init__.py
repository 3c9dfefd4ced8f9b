"""ssldyn.kernels"""

# variational: empirical NTK (eq. 12), closed forms of Prop. 4.3-4.4, cluster flow of Thm. 4.5
from ssldyn.kernels.closed_form import (
    RELU_INFINITE_WIDTH_BETA,
    averaging_net_kernel,
    block_structure,
    cluster_coefficients,
    cluster_limit_kernel,
    predicted_cluster_flow,
    relu_infinite_width_kernel,
)
from ssldyn.kernels.ntk import empirical_ntk, model_fn

__all__ = [
    "RELU_INFINITE_WIDTH_BETA",
    "averaging_net_kernel",
    "block_structure",
    "cluster_coefficients",
    "cluster_limit_kernel",
    "predicted_cluster_flow",
    "relu_infinite_width_kernel",
    "empirical_ntk",
    "model_fn",
]
