"""Training loops and flows: weight-space, function-space, manifold, ODE, power iteration.

All of them report into a :class:`Trajectory`.
"""

from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = ["FlowResult", "Trajectory"]

# α-CL one-layer dynamics (nonlinearity Sec. 3)
from ssldyn.dynamics.alpha_cl import gated_covariance, make_A_fn, power_iteration, sphere_flow  # noqa: E402

__all__ += ["gated_covariance", "make_A_fn", "power_iteration", "sphere_flow"]

# grassmann: Stiefel-manifold training (Sec. 4.2) and the q-ODE (Thm. 2)
from ssldyn.dynamics.manifold import ManifoldGD, random_stiefel, retract, stiefel_tangent  # noqa: E402
from ssldyn.dynamics.q_ode import eigh_ascending, predict, q_from_weights, q_ode_rhs, solve_reference  # noqa: E402

__all__ += [
    "ManifoldGD",
    "random_stiefel",
    "retract",
    "stiefel_tangent",
    "eigh_ascending",
    "predict",
    "q_from_weights",
    "q_ode_rhs",
    "solve_reference",
]

# variational: function-space flow (Prop. 4.1), vanilla GD (eq. 14), weight-space GD on embeddings
from ssldyn.dynamics.function_space import (  # noqa: E402
    NetworkKernel,
    function_space_flow,
    pointwise_gradient,
    project_sphere,
    vanilla_gradient_descent,
)
from ssldyn.dynamics.weight_space import train_weight_space  # noqa: E402

__all__ += [
    "NetworkKernel",
    "function_space_flow",
    "pointwise_gradient",
    "project_sphere",
    "vanilla_gradient_descent",
    "train_weight_space",
]

# SimCLR training of image encoders (variational Fig. 1)
from ssldyn.dynamics.simclr import embed, train_simclr  # noqa: E402

__all__ += ["embed", "train_simclr"]

# SSL training of any backbone with online probes (issue 18); the model monitors are in ssldyn.dynamics.monitors
from ssldyn.dynamics.ssl import train_ssl  # noqa: E402

__all__ += ["train_ssl"]
