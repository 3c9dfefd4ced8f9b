"""ssldyn.data"""

# grassmann: half-moons views (Example 1) and MNIST / Fashion-MNIST loaders (Fig. 4)
from ssldyn.data.mnist import class_subset, load_mnist, mnist_two_class, preprocess, read_idx  # noqa: E402
from ssldyn.data.moons import SSLViews, half_moons, make_views  # noqa: E402
