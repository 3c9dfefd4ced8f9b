"""Training loops and flows: weight-space, function-space, manifold, ODE, power iteration — on one engine.

The one dynamics contract (docs/architecture.md, "The engine contract")
------------------------------------------------------------------------
Every trainer and flow — :func:`train_weight_space`, :func:`train_ssl` (and :func:`train_simclr`,
``train_ssl`` with InfoNCE), :func:`function_space_flow` / :func:`vanilla_gradient_descent` (also
with a :class:`NetworkKernel`), :func:`~ssldyn.dynamics.manifold.train_gd` (Stiefel / plain GD),
the q-ODE :func:`~ssldyn.dynamics.q_ode.euler` and the recorded solutions of
:func:`~ssldyn.dynamics.q_ode.solve_adaptive` / :func:`~ssldyn.dynamics.q_ode.solve_reference`,
the α-CL :func:`sphere_flow` and :func:`power_iteration`,
:func:`~ssldyn.dynamics.two_layer_alpha_cl.thm5_flow` and the token-ensemble trainer — is a step
function ``step(state, t) -> (state, loss)`` run by :func:`run` (:mod:`ssldyn.dynamics.engine`),
which alone owns the schedule, the update (``optimizer.step()``), the final evaluation under
``no_grad`` with preserved buffers, the guard, probe logging, snapshots, the trajectory and the
callbacks. So two dynamics can be put side by side:

* **Arguments.** ``flow(state, loss_or_energy, ..., *, steps, probes, every, track, guard,
  **options)``: the state comes first (a model, embeddings ``z0``, weights ``w0``, ``q0``,
  parameters), then the loss/energy (``loss_fn``, ``A_fn``, ``lam``), then keyword-only
  arguments. Randomness, dtype and device are keyword-only (``generator=``, ``dtype=``,
  ``device=``). The ODE solvers that evaluate the solution at given times take ``t=`` instead of
  ``steps``/``every``.
* **Result.** :class:`FlowResult` ``(state, trajectory)``: ``result.state`` (the trained module,
  the final ``z``/``w``/``q``/parameters) and ``result.trajectory`` (:class:`Trajectory`: a long
  table ``step, member, probe, value`` kept column-wise on the device until read, array
  snapshots, and ``trajectory.meta`` for method-specific results such as power iteration's
  ``converged`` flags). The record at step ``k`` describes the state after ``k`` updates,
  ``k = 0 .. steps``; a trainer's ``loss`` there is the loss it optimises, evaluated at that state
  (for augmented or minibatch trainers on the batch and views of update ``k + 1``; at
  ``k = steps`` one more batch is drawn without an update).
* **Probes.** ``probes: Mapping[str, Callable[[observable], float | Tensor]]``; a probe receives
  the flow's observable and returns a float (logged as member 0) or one value per member
  ``(E,)`` (a dict is an error: one probe per key). Observables: the embeddings ``z`` for the
  weight-space, function-space and SSL trainers (``(n, d)``, or ``(E, n, d)`` for ``E > 1``
  members), ``q`` for the q-ODE, ``w`` for the α-CL flows, ``W`` for ``thm5_flow``, the list of
  parameters for ``train_gd`` and the network for the token trainer. :func:`per_member` turns a
  probe of one member ``(n, d) -> float`` into one of an ensemble (a one-member ``(n, d)``: member
  0). ``every``: an int ``k`` gives
  ``0, k, 2k, …`` and the last step; an iterable gives those steps; None the first and the last
  (:func:`step_schedule`).
* **track.** ``Callable[[Iterable[int]], Iterable[int]]`` wrapping the step iterator (progress bars).
* **guard.** :class:`~ssldyn.dynamics.guards.LossGuard`: eager on the CPU, deferred on an
  accelerator (no host sync at a step; checked at the logged steps and every ``check_every``
  updates); a non-finite loss raises
  :class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step, the member and its last
  finite value; ``policy="freeze"`` freezes a diverging member and lets the others train.
  ``guard=None`` uses a default guard, ``guard=False`` none. Input data with NaN/inf and bad
  arguments (``steps < 0``, ``lr <= 0``, …) are one ``ValueError`` before any step.
* **callbacks.** ``on_step(step, state, loss)``, ``on_log(step, state, row)``,
  ``on_end(state, trajectory)`` (:mod:`ssldyn.dynamics.callbacks`: live TensorBoard logging).
* **Augmentations** are ``augment(x, generator) -> x_view`` (:mod:`ssldyn.data.augment`) or
  one-argument torchvision-style transforms (:mod:`ssldyn.dynamics.views`).
* **embed.** :func:`embed` is the one way to get eval-mode embeddings of a model in batches.
"""

from ssldyn.dynamics.common import embed, minibatches, per_member, step_schedule
from ssldyn.dynamics.engine import Callback, run
from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = [
    "run",
    "Callback",
    "FlowResult",
    "Trajectory",
    "LossGuard",
    "NonFiniteLossError",
    "check_finite",
    "embed",
    "minibatches",
    "per_member",
    "step_schedule",
]

# α-CL one-layer dynamics (nonlinearity Sec. 3) and the two-layer flow of Thm. 5 (Sec. 4)
from ssldyn.dynamics.alpha_cl import gated_covariance, make_A_fn, power_iteration, sphere_flow
from ssldyn.dynamics.two_layer_alpha_cl import thm5_flow

__all__ += ["gated_covariance", "make_A_fn", "power_iteration", "sphere_flow", "thm5_flow"]

# grassmann: Stiefel-manifold training (Sec. 4.2) and the q-ODE (Thm. 2)
from ssldyn.dynamics.manifold import ManifoldGD, PlainGD, random_stiefel, retract, stiefel_tangent, train_gd  # noqa: E402
from ssldyn.dynamics.q_ode import (  # noqa: E402
    eigh_ascending,
    euler,
    q_from_weights,
    q_ode_predict,
    q_ode_rhs,
    solve_adaptive,
    solve_reference,
)

__all__ += [
    "ManifoldGD",
    "PlainGD",
    "random_stiefel",
    "retract",
    "stiefel_tangent",
    "train_gd",
    "eigh_ascending",
    "euler",
    "q_from_weights",
    "q_ode_predict",
    "q_ode_rhs",
    "solve_adaptive",
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

# SSL training of any backbone with online probes and hooks; SimCLR (variational Fig. 1) is train_ssl with
# InfoNCE; the model monitors are in ssldyn.dynamics.monitors, the TensorBoard callback in dynamics.callbacks
from ssldyn.dynamics.ssl import train_simclr, train_ssl  # noqa: E402

__all__ += ["train_simclr", "train_ssl"]
