"""nn.Modules of the papers; all accept an ensemble size E (leading parameter axis)."""

from ssldyn.models.ensemble import EnsembleLinear, broadcast_members
from ssldyn.models.seeding import member_generators

__all__ = ["EnsembleLinear", "broadcast_members", "member_generators"]

# grassmann: u(x) = W2ᵀφ(W1x) in four regimes, deep linear nets (Sec. 3-4, Fig. 6)
from ssldyn.models.two_layer import DeepLinearNet, TwoLayerNet

__all__ += ["TwoLayerNet", "DeepLinearNet"]

# variational: averaging net of eq. (18)-(19), plain MLP (App. B), centred ("shifted") wrapper
from ssldyn.models.averaging import AveragingNet, averaging_matrix  # noqa: E402
from ssldyn.models.mlp import MLP  # noqa: E402
from ssldyn.models.shifted import ShiftedModel  # noqa: E402

__all__ += ["AveragingNet", "averaging_matrix", "MLP", "ShiftedModel"]

# image encoders with a projection head for SimCLR (variational Fig. 1, Remark 4.3)
from ssldyn.models.encoders import ConvEncoder, MLPEncoder, SimCLRNet, build_simclr_net  # noqa: E402

__all__ += ["ConvEncoder", "MLPEncoder", "SimCLRNet", "build_simclr_net"]
