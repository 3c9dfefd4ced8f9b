"""Training loops and flows: weight-space, function-space, manifold, ODE, power iteration.

All of them report into a :class:`Trajectory`.
"""

from ssldyn.dynamics.trajectory import Trajectory

__all__ = ["Trajectory"]

# α-CL one-layer dynamics (nonlinearity Sec. 3)
from ssldyn.dynamics.alpha_cl import gated_covariance, make_A_fn, power_iteration, sphere_flow  # noqa: E402

__all__ += ["gated_covariance", "make_A_fn", "power_iteration", "sphere_flow"]
