"""ssldyn.probes

Every probe takes :data:`ArrayLike` inputs (a tensor, detached with its device and dtype kept, or anything
``np.asarray`` reads) and never keeps a graph.
"""

from ssldyn.probes._common import ArrayLike

# grassmann: collapse and subspace probes
# nonlinearity: α-CL landscape diagnostics (λ_gap, c, ρ, L, μ, ω, LME / stability / Thm. 3 tests)
from ssldyn.probes.alpha_cl import (
    irregularity,
    lipschitz_estimate,
    lme_test,
    local_roughness,
    stability_test,
    theorem3_condition,
)

# variational: cluster structure, uniformity/alignment, invariance
from ssldyn.probes.cluster import (
    alignment,
    angular_spread,
    invariance_gap,
    silhouette_cosine,
    uniformity,
    uniformity_reference,
)
from ssldyn.probes.collapse import effective_rank, singular_value_ratio

# downstream evaluation (linear probe, k-NN, label silhouette) and filter measurements (nonlinearity App. E.3)
from ssldyn.probes.downstream import knn_accuracy, label_silhouette, linear_probe_accuracy
from ssldyn.probes.filters import laplacian_energy, pairwise_cosine, total_variation
from ssldyn.probes.subspace import linear_svm_accuracy, output_gap, principal_angles, projection_norms

__all__ = [
    "ArrayLike",
    "irregularity",
    "lipschitz_estimate",
    "lme_test",
    "local_roughness",
    "stability_test",
    "theorem3_condition",
    "alignment",
    "angular_spread",
    "invariance_gap",
    "silhouette_cosine",
    "uniformity",
    "uniformity_reference",
    "effective_rank",
    "singular_value_ratio",
    "knn_accuracy",
    "label_silhouette",
    "linear_probe_accuracy",
    "laplacian_energy",
    "pairwise_cosine",
    "total_variation",
    "linear_svm_accuracy",
    "output_gap",
    "principal_angles",
    "projection_norms",
]

# online monitors of a representation (issue 18): RankMe, scikit-learn linear / k-NN probes
from ssldyn.probes.monitors import KNNProbe, LinearProbe
from ssldyn.probes.rank import rankme

__all__ += ["KNNProbe", "LinearProbe", "rankme"]

# batched cluster probes of whole trajectories, power-law (log-log) fits and Spearman's ρ
from ssldyn.probes.cluster import per_cluster_mean, silhouette_samples_cosine, uniformity_batch  # noqa: E402
from ssldyn.probes.slopes import loglog_fit, loglog_slope, spearman  # noqa: E402

__all__ += [
    "silhouette_samples_cosine",
    "uniformity_batch",
    "per_cluster_mean",
    "loglog_fit",
    "loglog_slope",
    "spearman",
]

# subspace measurements shared by the grassmann experiments: a direction known up to its sign, signed PCA
from ssldyn.probes.subspace import distance_up_to_sign, pca_components  # noqa: E402

__all__ += ["distance_up_to_sign", "pca_components"]
