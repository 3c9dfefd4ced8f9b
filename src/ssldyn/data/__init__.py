"""ssldyn.data"""

# grassmann: half-moons views (Example 1) and MNIST / Fashion-MNIST loaders (Fig. 4)
# variational: clustered data of eq. (16), the 2-D/3-D sets of Fig. 5-6
from ssldyn.data.clustered import ClusteredData, clustered_data, clusters_3d, four_clusters_2d

# real images (variational Fig. 1, nonlinearity App. E.3); augmentations: ssldyn.data.augment (imports kornia)
from ssldyn.data.images import ImageDataset, image_quadrants, load_images

# nonlinearity: latent categorical/summation models, approximately orthogonal U, circle points, Assumption 2 model
from ssldyn.data.latent import (
    TwoRFModel,
    approx_orthogonal_basis,
    circle_points,
    latent_categorical,
    latent_summation,
    latent_summation_support,
    random_orthonormal_basis,
)
from ssldyn.data.mnist import class_subset, load_mnist, mnist_two_class, preprocess, read_idx
from ssldyn.data.moons import SSLViews, half_moons, make_views

# variational: evenly spread points on S¹ / S² and the regular polytopes (Remark 3.1, Thm. 3.2)
from ssldyn.data.sphere import POLYTOPES, circle_angles_even, circle_points_even, fibonacci_sphere, regular_polytope

__all__ = [
    "ClusteredData",
    "clustered_data",
    "clusters_3d",
    "four_clusters_2d",
    "ImageDataset",
    "image_quadrants",
    "load_images",
    "TwoRFModel",
    "approx_orthogonal_basis",
    "circle_points",
    "latent_categorical",
    "latent_summation",
    "latent_summation_support",
    "random_orthonormal_basis",
    "class_subset",
    "load_mnist",
    "mnist_two_class",
    "preprocess",
    "read_idx",
    "SSLViews",
    "half_moons",
    "make_views",
    "POLYTOPES",
    "circle_angles_even",
    "circle_points_even",
    "fibonacci_sphere",
    "regular_polytope",
]
