"""ssldyn.probes"""

# grassmann: collapse and subspace probes
from ssldyn.probes.collapse import effective_rank, singular_value_ratio  # noqa: E402
from ssldyn.probes.subspace import linear_svm_accuracy, output_gap, principal_angles, projection_norms  # noqa: E402

# variational: cluster structure, uniformity/alignment, invariance
from ssldyn.probes.cluster import (alignment, angular_spread, invariance_gap, silhouette_cosine,  # noqa: E402
                                   uniformity, uniformity_reference)

# nonlinearity: α-CL landscape diagnostics (λ_gap, c, ρ, L, μ, ω, LME / stability / Thm. 3 tests)
from ssldyn.probes.alpha_cl import (irregularity, lipschitz_estimate, lme_test, local_roughness,  # noqa: E402
                                    stability_test, theorem3_condition)

# downstream evaluation (linear probe, k-NN, label silhouette) and filter measurements (nonlinearity App. E.3)
from ssldyn.probes.downstream import knn_accuracy, label_silhouette, linear_probe_accuracy  # noqa: E402
from ssldyn.probes.filters import laplacian_energy, pairwise_cosine, total_variation  # noqa: E402
