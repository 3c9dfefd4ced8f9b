"""Training loops and flows: weight-space, function-space, manifold, ODE, power iteration.

All of them report into a :class:`Trajectory`.
"""

from ssldyn.dynamics.trajectory import Trajectory

__all__ = ["Trajectory"]
