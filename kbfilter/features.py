"""Observation features for images (Xu et al. (2022) §3.3): the maps a kernel Bayes filter can put
between raw observations and its observation kernel.

Any scikit-learn transformer works as ``KernelBayesFilter(features=...)`` (e.g. ``PCA(50)``);
images are flattened before it sees them. This module adds a Gaussian blur of the images,
random Fourier features with a median-heuristic bandwidth and *learned* features: the last
hidden layer of an ``MLPRegressor`` trained from (PCA-reduced) images to the states or to random
Fourier features of the states. All are fitted with ``fit(Z, X)``: observations and the
matching states.
"""


import numpy as np
from scipy.ndimage import gaussian_filter
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import RBFSampler
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._validation import (check_choice, check_int, check_matrix, check_memory, check_positive, check_same_length,
                          check_saved_matrix, check_saved_vector, check_training_magnitude)
from ._warnings import ignored
from .kernels import median_distance
from .persistence import persistent, saved_before_fit, with_saved_layout

__all__ = ["GaussianBlur", "RandomFourierFeatures", "LearnedFeatures"]


@persistent("image_shape_")
class GaussianBlur(TransformerMixin, BaseEstimator):
    """Images convolved with a Gaussian of ``sigma`` pixels (then optionally subsampled), flattened.

    On raw pixels two images of an object are far apart as soon as the object has moved by its
    own size, and the pixel noise adds the same amount to every distance; the image kernel then
    only tells "overlapping" from "not". Blurring spreads the object over ``sigma`` pixels and
    averages the noise away, so the distance between two images grows smoothly with the
    displacement and an observation kernel on them interpolates between training images.
    Linear and translation-equivariant: nothing is learned, so it cannot overfit.

    Parameters
    ----------
    sigma : float
        Standard deviation of the blur in pixels (rows and columns; channels are not mixed).
    stride : int
        Keep every ``stride``-th row and column after the blur (2 quarters the kernel's cost and
        loses little once ``sigma >= 2``).
    image_shape : tuple of int or None
        Shape of one image, ``(rows, columns)`` or ``(rows, columns, channels)``. None: set by
        :class:`~kbfilter.KernelBayesFilter` from its observations' shape at ``fit``.
    mode : str
        How the image is extended beyond its border (``scipy.ndimage.gaussian_filter``);
        ``"constant"`` pads with zeros.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.zeros((2, 8 * 8)); Z[:, 27] = 1.0
    >>> GaussianBlur(sigma=1.0, stride=2, image_shape=(8, 8)).fit(Z).transform(Z).shape
    (2, 16)
    """

    def __init__(self, sigma=3.0, stride=1, image_shape=None, mode="constant"):
        self.sigma = sigma
        self.stride = stride
        self.image_shape = image_shape
        self.mode = mode

    def fit(self, Z, X=None):
        """Check the images' shape (nothing is learned).

        Parameters
        ----------
        Z : array-like of shape (n, n_pixels) or (n, dim_z)
            Training observations, flattened.
        X : ignored
            Accepted for the transformer interface.

        Returns
        -------
        self : GaussianBlur
            The fitted transformer.
        """
        Z = check_matrix(Z, "Z", min_samples=1)
        self.n_features_in_ = Z.shape[1]
        if self.image_shape is None:
            raise ValueError("image_shape: expected the shape of one image, e.g. (64, 64); "
                             "KernelBayesFilter sets it from its observations")
        shape = self._checked(self.image_shape, "image_shape")
        if int(np.prod(shape)) != Z.shape[1]:
            raise ValueError(f"Z: expected {int(np.prod(shape))} values per row (image_shape {shape}), got {Z.shape[1]}")
        self.image_shape_ = np.array(shape)
        return self

    def _checked(self, image_shape, name):
        """The image shape as a tuple, with the settings checked against it (at fit, and at load:
        a file is untrusted)."""
        try:
            shape = tuple(int(n) for n in image_shape)
        except (TypeError, ValueError):
            shape = ()
        if len(shape) not in (2, 3) or min(shape) < 1 or any(n != v for n, v in zip(shape, image_shape)):
            raise ValueError(f"{name}: expected (rows, columns) or (rows, columns, channels), got {image_shape!r}")
        # a blur wider than the image is flat over it; the bound keeps the filter's taps in memory
        check_positive(self.sigma, "sigma", maximum=10.0 * max(shape[:2]))
        check_int(self.stride, "stride")
        check_choice(self.mode, "mode", ("constant", "nearest", "reflect", "mirror", "wrap"))
        return shape

    def _after_load(self):
        if hasattr(self, "image_shape_"):
            shape = self._checked(self.image_shape_, "image_shape_")
            self.image_shape_, self.n_features_in_ = np.array(shape), int(np.prod(shape))

    def transform(self, Z):
        """The features of each observation.

        Parameters
        ----------
        Z : array-like of shape (n, d)
            Observations, flattened.

        Returns
        -------
        ndarray of shape (n, n_features_out)
            The blurred images, subsampled by ``stride`` and flattened.
        """
        check_is_fitted(self, "image_shape_")
        shape = tuple(int(n) for n in self.image_shape_)
        Z = check_matrix(Z, "Z", n_features=int(np.prod(shape)))
        images = Z.reshape(len(Z), *shape)
        sigma = (0.0, self.sigma, self.sigma) + (0.0,) * (len(shape) - 2)
        blurred = gaussian_filter(images, sigma=sigma, mode=self.mode, truncate=3.0)
        return blurred[:, ::self.stride, ::self.stride].reshape(len(Z), -1)


@persistent("bandwidth_", "sampler_", holds={"sampler_": "RBFSampler"})
class RandomFourierFeatures(TransformerMixin, BaseEstimator):
    """Random Fourier features of a Gaussian kernel with bandwidth ``scale * median``.

    ``phi(z)^T phi(z') ~ exp(-||z - z'||^2 / (2 s^2))`` (scikit-learn's ``RBFSampler``).

    Parameters
    ----------
    n_components : int, default=500
        The number of features.
    scale : float, default=1.0
        Multiplies the median pairwise distance of the training observations: ``s``.
    random_state : int or None, default=0
        Seeds the frequencies.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.random.default_rng(0).normal(size=(100, 5))
    >>> RandomFourierFeatures(n_components=64).fit(Z).transform(Z).shape
    (100, 64)
    """

    def __init__(self, n_components=500, scale=1.0, random_state=0):
        self.n_components = n_components
        self.scale = scale
        self.random_state = random_state

    def fit(self, Z, X=None):
        """Resolve the bandwidth on ``Z`` and draw the frequencies.

        Parameters
        ----------
        Z : array-like of shape (n, n_pixels) or (n, dim_z)
            Training observations, flattened.
        X : ignored
            Accepted for the transformer interface.

        Returns
        -------
        self : RandomFourierFeatures
            The fitted transformer.
        """
        Z = check_matrix(Z, "Z", min_samples=2)
        self.n_features_in_ = Z.shape[1]
        s = check_positive(self.scale, "scale") * median_distance(Z, random_state=0)
        if not s > 0:
            raise ValueError("Z: the median pairwise distance is 0 (constant observations)")
        self.bandwidth_ = s
        r = check_int(self.n_components, "n_components")
        n, d = Z.shape
        # the frequencies (drawn, then scaled: twice d x r at the peak) and the features of the observations
        check_memory(8.0 * r * (2 * d + 1 + n), "n_components", f"{r:,} random features of {n:,} observations")
        self.sampler_ = RBFSampler(gamma=1.0 / (2 * s * s), n_components=r, random_state=self.random_state).fit(Z)
        return self

    def _after_load(self):
        # a saved file is untrusted; load has already had the sampler map a row of zeros to a finite
        # row, which is all transform does
        if saved_before_fit(self, "sampler_"):
            return
        check_training_magnitude(check_positive(self.bandwidth_, "bandwidth_"), "bandwidth_")
        self.n_features_in_ = self.sampler_.random_weights_.shape[0]  # derived, as fit sets it

    def transform(self, Z):
        """The features of each observation.

        Parameters
        ----------
        Z : array-like of shape (n, d)
            Observations, flattened.

        Returns
        -------
        ndarray of shape (n, n_features_out)
            ``n_components`` random Fourier features.
        """
        check_is_fitted(self, "sampler_")
        return self.sampler_.transform(check_matrix(Z, "Z", n_features=self.n_features_in_))


_ACTIVATIONS = {
    "relu": lambda a: np.maximum(a, 0.0),
    "tanh": np.tanh,
    "logistic": lambda a: 1.0 / (1.0 + np.exp(-a)),
    "identity": lambda a: a,
}


def network_layers(h, weights, biases, activation):
    """The activations of a network's layers ``weights``, ``biases`` (an ``MLPRegressor``'s
    ``coefs_`` and ``intercepts_``, or some of them) for the rows of ``h``, as scikit-learn
    computes them.

    Parameters
    ----------
    h : ndarray of shape (n, n_inputs)
        The inputs of the first of the layers.
    weights, biases : list of ndarray
        Each layer's matrix and bias.
    activation : {"relu", "tanh", "logistic", "identity"}
        Applied after every layer.

    Returns
    -------
    ndarray of shape (n, n_outputs)
        The last layer's activations.
    """
    act = _ACTIVATIONS[activation]
    for W, b in zip(weights, biases):
        h = act(h @ W + b)
    return h


def check_network(weights, biases, n_inputs, n_outputs=None, names=("weights_", "biases_")):
    """A network's layers read from a file (untrusted): lists of float64 matrices and biases within
    the training bound, chained from ``n_inputs`` columns (to ``n_outputs`` when given), one bias a
    unit, as ``fit`` keeps them from an ``MLPRegressor``.

    Parameters
    ----------
    weights, biases : list of ndarray
        The saved layers.
    n_inputs : int
        The columns the first layer takes.
    n_outputs : int, optional
        The units the last layer must have.
    names : (str, str)
        The fields' names, for the messages.
    """
    weights_name, biases_name = names
    if not (isinstance(weights, list) and isinstance(biases, list) and weights and len(weights) == len(biases)):
        raise ValueError(f"{weights_name}, {biases_name}: expected two non-empty lists, one matrix and one bias a "
                         f"layer")
    width = n_inputs
    for i, (W, b) in enumerate(zip(weights, biases)):
        W = check_saved_matrix(W, f"{weights_name}[{i}]", allow_1d=False)
        if W.shape[0] != width:
            raise ValueError(f"{weights_name}[{i}]: expected {width} rows (the units before it), got {W.shape[0]}")
        check_saved_vector(b, f"{biases_name}[{i}]", length=W.shape[1])
        width = W.shape[1]
    if n_outputs is not None and width != n_outputs:
        raise ValueError(f"{weights_name}: the last layer has {width} units, expected {n_outputs}")


def check_positive_scales(scale, name, length=None):
    """Saved scales a network's inputs are divided by (untrusted): a positive float64 vector."""
    check_saved_vector(scale, name, length=length)
    if not np.all(scale > 0):
        raise ValueError(f"{name}: expected positive scales")
    return scale


def check_layer_sizes(layers):
    """``hidden_layer_sizes`` as a tuple: a non-empty tuple or list of positive layer widths."""
    if not isinstance(layers, (tuple, list)) or not layers:
        raise ValueError(f"hidden_layer_sizes: expected a non-empty tuple of layer widths, got {layers!r}")
    return tuple(check_int(width, "hidden_layer_sizes") for width in layers)


def check_network_memory(n_inputs, layers, n_outputs, n_samples):
    """Refuse, before it is trained, an ``MLPRegressor`` of hidden ``layers`` whose arrays would not fit in
    the machine's memory: its weights four times (with their gradients and Adam's two moments) and
    the activations of ``n_samples`` rows in every layer."""
    widths = (n_inputs, *layers, n_outputs)
    weights = sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:]))
    check_memory(8.0 * (4 * weights + n_samples * sum(layers)), "hidden_layer_sizes",
                 f"a network with hidden layers {tuple(layers)} on {n_inputs:,} inputs, trained on {n_samples:,} rows")


def exact_pca(n_components, data, random_state):
    """scikit-learn's ``PCA`` of ``n_components`` for ``data``, kept off its covariance solver.

    On narrow data its ``"auto"`` choice is ``"covariance_eigh"``, which forms ``X^T X`` before it
    subtracts the mean and so loses the digits of observations far from the origin (a range in
    metres from a distant site: 0.06 of a component's values off for data offset by 5e6). Narrow
    data get the full SVD of the centred data instead (cheap at a thousand columns or fewer); wide
    data, ``"auto"`` (a randomized or full SVD of the centred data).

    Parameters
    ----------
    n_components : int
        The components wanted; at most the data's smaller dimension is asked for.
    data : ndarray of shape (n, d)
        The data the PCA will be fitted on.
    random_state : int
        Seeds the randomized SVD.

    Returns
    -------
    sklearn.decomposition.PCA
        Unfitted.
    """
    n, d = data.shape
    return PCA(min(n_components, n, d), svd_solver="full" if d <= 1000 else "auto", random_state=random_state)


@persistent("pca_", "input_scale_", "weights_", "biases_", "n_iter_", holds={"pca_": "PCA"})
class LearnedFeatures(TransformerMixin, BaseEstimator):
    """Learned observation features (Xu et al. (2022) §3.3): an MLP's last hidden layer.

    ``PCA(n_pca)`` reduces the images; an ``MLPRegressor`` learns to predict the state (``target=
    "states"``) or random Fourier features of the state (``target="rff"``, so the network must
    separate states that the state kernel separates) from them; the activations of its last
    hidden layer are the features. Use a linear or a Gaussian observation kernel on them.

    Parameters
    ----------
    n_pca : int or None
        PCA components before the network (None: raw flattened inputs).
    hidden_layer_sizes : tuple of int
        A narrow last layer (a bottleneck, 32 by default) keeps the features about the state:
        nearest neighbours in a wide last layer are dominated by directions the readout ignores.
    target : {"states", "rff"}
        What the network learns to predict.
    n_target_features : int
        Number of random Fourier features of the state when ``target="rff"``.
    activation : {"relu", "tanh", "logistic", "identity"}
        The hidden layers' activation.
    alpha : float
        The network's L2 penalty.
    max_iter : int
        The network's iteration budget.
    random_state : int
        Seeds the PCA, the network and the target features.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(200, 2)); Z = np.hstack([X, X ** 2]) + 0.01 * rng.normal(size=(200, 4))
    >>> LearnedFeatures(n_pca=None, hidden_layer_sizes=(16,), max_iter=50).fit(Z, X).transform(Z).shape
    (200, 16)
    """

    def __init__(self, n_pca=50, hidden_layer_sizes=(256, 32), target="states", n_target_features=64,
                 activation="relu", alpha=1e-4, max_iter=400, random_state=0):
        self.n_pca = n_pca
        self.hidden_layer_sizes = hidden_layer_sizes
        self.target = target
        self.n_target_features = n_target_features
        self.activation = activation
        self.alpha = alpha
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, Z, X):
        """Train the network from observations to (features of) the states.

        Parameters
        ----------
        Z : array-like of shape (n, n_pixels) or (n, dim_z)
            Training observations, flattened.
        X : array-like of shape (n, dim_x)
            The state at each observation.

        Returns
        -------
        self : LearnedFeatures
            The fitted transformer.
        """
        Z = check_matrix(Z, "Z", min_samples=2)
        X = check_matrix(X, "X", min_samples=2)
        check_same_length("Z", Z, "X", X)
        self.n_features_in_ = Z.shape[1]
        check_choice(self.target, "target", ("states", "rff"))
        check_choice(self.activation, "activation", tuple(_ACTIVATIONS))
        layers = check_layer_sizes(self.hidden_layer_sizes)
        n_inputs = Z.shape[1] if self.n_pca is None else min(check_int(self.n_pca, "n_pca"), *Z.shape)
        n_outputs = X.shape[1] if self.target == "states" else check_int(self.n_target_features, "n_target_features")
        check_network_memory(n_inputs, layers, n_outputs, Z.shape[0])
        self.pca_ = None
        inputs = Z
        if self.n_pca is not None:
            self.pca_ = exact_pca(check_int(self.n_pca, "n_pca"), Z, self.random_state)
            inputs = self.pca_.fit_transform(Z)
            with_saved_layout(self.pca_)
        # scikit-learn's scaler leaves a constant input's scale at 1, whatever the data's units
        scaler = StandardScaler().fit(inputs)
        centre, self.input_scale_ = scaler.mean_, scaler.scale_
        if self.target == "rff":
            targets = RandomFourierFeatures(self.n_target_features, random_state=self.random_state).fit(X).transform(X)
        else:
            # the network learns standardised states: its initial weights and L2 penalty assume
            # targets of order one, and states in metres or far from the origin are not
            targets = StandardScaler().fit_transform(X)
        mlp = MLPRegressor(hidden_layer_sizes=layers, activation=self.activation,
                           alpha=self.alpha, max_iter=self.max_iter, random_state=self.random_state,
                           )
        with ignored(ConvergenceWarning):
            mlp.fit((inputs - centre) / self.input_scale_, targets[:, 0] if targets.shape[1] == 1 else targets)
        # keep the hidden layers only: arrays, so the features can be saved without pickle
        self.weights_ = [w.copy() for w in mlp.coefs_[:-1]]
        self.biases_ = [b.copy() for b in mlp.intercepts_[:-1]]
        # the network learned centred inputs (raw observations far from zero would saturate it);
        # transform divides by the scale only, so the centring moves into the first layer's bias
        self.biases_[0] -= (centre / self.input_scale_) @ self.weights_[0]
        self.n_iter_ = int(mlp.n_iter_)  # epochs the network trained for (at most max_iter)
        return self

    def _after_load(self):
        # a saved file is untrusted: the layers must chain from the inputs the PCA and the scale give
        if saved_before_fit(self, "weights_"):
            return
        check_choice(self.activation, "activation", tuple(_ACTIVATIONS))
        n_inputs = len(check_positive_scales(self.input_scale_, "input_scale_"))
        if self.pca_ is not None and self.pca_.components_.shape[0] != n_inputs:
            raise ValueError(f"pca_: makes {self.pca_.components_.shape[0]} components, where input_scale_ has "
                             f"{n_inputs}")
        check_network(self.weights_, self.biases_, n_inputs)
        self.n_features_in_ = n_inputs if self.pca_ is None else self.pca_.components_.shape[1]  # as fit sets it
        if not np.all(np.isfinite(self.transform(np.zeros((1, self.n_features_in_))))):
            raise ValueError("the loaded feature map does not map an observation to finite features")
        if hasattr(self, "n_iter_"):  # (a file saved before it was recorded has none)
            check_int(self.n_iter_, "n_iter_")

    def transform(self, Z):
        """The features of each observation.

        Parameters
        ----------
        Z : array-like of shape (n, d)
            Observations, flattened.

        Returns
        -------
        ndarray of shape (n, n_features_out)
            The activations of the network's last hidden layer.
        """
        check_is_fitted(self, "weights_")
        h = check_matrix(Z, "Z", n_features=self.n_features_in_)
        if self.pca_ is not None:
            h = self.pca_.transform(h)
        h = h / self.input_scale_
        return network_layers(h, self.weights_, self.biases_, self.activation)
