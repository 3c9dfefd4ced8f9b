"""nn.Modules of the papers; all accept an ensemble size E (leading parameter axis)."""

from ssldyn.models.ensemble import EnsembleLinear, broadcast_members

__all__ = ["EnsembleLinear", "broadcast_members"]

# grassmann: u(x) = W2ᵀφ(W1x) in four regimes, deep linear nets (Sec. 3-4, Fig. 6)
from ssldyn.models.two_layer import DeepLinearNet, TwoLayerNet  # noqa: E402

__all__ += ["TwoLayerNet", "DeepLinearNet"]
