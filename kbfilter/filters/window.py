"""A windowed regressor: the sequence-model baseline of Xu et al. (2022) §6.3 (their LSTM's analogue)."""

from collections import Counter

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from .._validation import (check_covariance, check_int, check_positive, check_saved_matrix, check_saved_vector,
                           check_sequences, check_transformer)
from .._warnings import ignored
from ..features import (check_layer_sizes, check_network, check_network_memory, check_positive_scales, exact_pca,
                        network_layers)
from ..persistence import Persistent, persistent, saved_before_fit, with_saved_layout
from ..threads import limited_blas
from .base import (OUTSIDE_MARGIN, TUNING_RECORD, CountedFallbacks, Filter, SharedModel, TrainingBox,
                   check_loaded_estimates, check_tuning_record, no_control, probe_loaded, tuning_record_holds)
from .observation import ObservationSpace

__all__ = ["WindowRegressor", "WindowNetwork"]


def _regressed(windows, input_scale, weights, biases, target_mean, target_scale):
    # scikit-learn's MLPRegressor.predict (ReLU hidden layers, a linear output), in the states' units
    hidden = network_layers(windows / input_scale, weights[:-1], biases[:-1], "relu")
    return (hidden @ weights[-1] + biases[-1]) * target_scale + target_mean


@persistent("space", "input_scale", "weights", "biases", "target_mean", "target_scale", "residual_cov",
            "state_range", holds={"space": "ObservationSpace"})
class WindowNetwork(SharedModel):
    """What a :class:`WindowRegressor` fits, read-only once built and shared by the regressor's
    copies (filterpy's ``Saver`` deep-copies a filter every step).

    Parameters
    ----------
    space : ObservationSpace
        The frames' feature map.
    input_scale : ndarray of shape (n_inputs,)
        What each input of the network (a window of features) is divided by.
    weights, biases : list of ndarray
        The network's layers, input to output (an ``MLPRegressor``'s ``coefs_`` and ``intercepts_``).
    target_mean, target_scale : ndarray of shape (dim_x,)
        The network answers standardised states: these bring them back to the states' units.
    residual_cov : ndarray of shape (dim_x, dim_x)
        The covariance of the training states about the network's answers.
    state_range : ndarray of shape (2, dim_x) or None, default=None
        The training states' smallest and largest values, whose widened box
        (:class:`~kbfilter.filters.base.TrainingBox`) an answer is checked against; None (a file
        saved before it was kept) checks none.
    """

    def __init__(self, space, input_scale, weights, biases, target_mean, target_scale, residual_cov,
                 state_range=None):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        if not isinstance(space, ObservationSpace):
            raise ValueError(f"space: expected an ObservationSpace, got {type(space).__name__}")
        self.input_scale = check_positive_scales(input_scale, "input_scale")
        self.target_scale = check_positive_scales(target_scale, "target_scale")
        dim_x = len(self.target_scale)
        self.target_mean = check_saved_vector(target_mean, "target_mean", length=dim_x)
        check_network(weights, biases, len(self.input_scale), dim_x, names=("weights", "biases"))
        check_covariance(check_saved_matrix(residual_cov, "residual_cov", allow_1d=False), "residual_cov", dim_x)
        self.space, self.weights, self.biases, self.residual_cov = space, weights, biases, residual_cov
        self.state_range, self.box = None, None
        if state_range is not None:
            self.state_range = check_saved_matrix(state_range, "state_range", n_features=dim_x, allow_1d=False)
            if self.state_range.shape[0] != 2 or np.any(self.state_range[0] > self.state_range[1]):
                raise ValueError(f"state_range: expected the smallest and the largest training state values, two rows "
                                 f"of {dim_x}, the first not above the second")
            self.box = TrainingBox(self.state_range)

    def regressed(self, windows):
        """The network's states for rows of windowed features.

        Parameters
        ----------
        windows : ndarray of shape (n, n_inputs)
            Each row the features of ``window`` frames, oldest first.

        Returns
        -------
        ndarray of shape (n, dim_x)
            The regressed states.
        """
        return _regressed(windows, self.input_scale, self.weights, self.biases, self.target_mean, self.target_scale)


@persistent("model_", "n_features_in_", "n_iter_", "frames", "x", "P", "x_prior", "P_prior", "x_post", "P_post",
            *TUNING_RECORD, holds={"model_": "WindowNetwork", "features": "TransformerMixin",
                                   **tuning_record_holds("TransformerMixin")})
class WindowRegressor(Persistent, CountedFallbacks, Filter, BaseEstimator):
    """An ``MLPRegressor`` from the features of the last ``window`` frames to the current state.

    It learns no dynamics and no likelihood; it is what a practitioner would try first with a
    sequence of images and their states. Frames before the start are the first frame repeated.
    It saves and loads without pickle (:meth:`save`, :meth:`load`) with the frames of its window,
    so a loaded regressor continues its run bit for bit, and with its tuning record when
    :func:`~kbfilter.tune_filter` returned it (given a ``param_grid``: it has no default one).

    Parameters
    ----------
    window : int, default=10
        The number of most recent frames the regressor sees.
    features : transformer, optional
        Fitted as ``features.fit(Z, X)`` on the flattened training observations; by default a
        ``PCA`` with 30 components (fewer if the observations have fewer), seeded by ``random_state``.
    hidden_layer_sizes : tuple of int, default=(128, 64)
        The hidden layers of the ``MLPRegressor``.
    alpha : float, default=1e-3
        Its L2 penalty.
    max_iter : int, default=500
        Its iteration budget (a ``ConvergenceWarning`` at the budget is silenced).
    random_state : int, default=0
        Seeds the network's initialisation and the default ``PCA``.

    Attributes
    ----------
    model_ : WindowNetwork
        The feature map and the trained network (its layers kept as arrays, so that the regressor
        saves without pickle), with the covariance of the training states about its answers: the
        reported ``P``.
    n_iter_ : int
        The epochs the network trained for (at most ``max_iter``).
    frames : ndarray of shape (window, n_features) or None
        The features of the most recent frames, oldest first (None before the first frame of a
        sequence).
    diagnostics : Counter
        ``"outside_training"``: the estimates since the last reset that left the training states'
        bounding box by more than 10 % of their range on some coordinate (the network
        extrapolating from frames unlike its training ones), each run's first warned about.

    Examples
    --------
    >>> import kbfilter as kb
    >>> from sklearn.decomposition import PCA
    >>> states, obs = kb.systems.Oscillation().simulate(300, rng=0)
    >>> reg = WindowRegressor(window=3, features=PCA(2), max_iter=50).fit(states, obs)
    >>> reg.batch_filter(obs[:5])[0].shape
    (5, 2)
    """

    def __init__(self, window=10, features=None, hidden_layer_sizes=(128, 64), alpha=1e-3, max_iter=500,
                 random_state=0):
        self.window = window
        self.features = features
        self.hidden_layer_sizes = hidden_layer_sizes
        self.alpha = alpha
        self.max_iter = max_iter
        self.random_state = random_state

    def _windows(self, F):
        k = self.window
        padded = np.vstack([np.repeat(F[:1], k - 1, axis=0), F])
        return np.hstack([padded[i:i + len(F)] for i in range(k)])

    @limited_blas
    def fit(self, states, observations):
        """Learn the regressor from windows of training frames.

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            The training states.
        observations : array-like of shape (T, dim_z) or (T, rows, columns[, channels]), or a list
            The observation at each training state.

        Returns
        -------
        self : WindowRegressor
            The fitted regressor, with an empty frame history.
        """
        self.check_params()
        xs, zs, obs_shape = check_sequences(states, observations)
        X, Z = np.vstack(xs), np.vstack(zs)
        self.n_features_in_ = X.shape[1]
        # the default PCA is seeded (a randomized SVD on wide images draws random numbers)
        default = exact_pca(30, Z, self.random_state)
        features = clone(self.features if self.features is not None else default).fit(Z, X)
        space = ObservationSpace(obs_shape, with_saved_layout(features))
        mapped = [space.mapped(z) for z in zs]
        check_network_memory(self.window * mapped[0].shape[1], self.hidden_layer_sizes, X.shape[1], X.shape[0])
        inputs = np.vstack([self._windows(F) for F in mapped])
        input_scale = StandardScaler(with_mean=False).fit(inputs).scale_  # a constant column keeps scale 1
        # the network learns standardised states: its initial weights and L2 penalty assume
        # targets of order one, and states in metres or far from the origin are not
        target = StandardScaler().fit(X)
        targets = target.transform(X)
        with ignored(ConvergenceWarning):
            # a one-dimensional state as scikit-learn wants a single target: a vector (a column warns)
            mlp = MLPRegressor(hidden_layer_sizes=tuple(self.hidden_layer_sizes), alpha=self.alpha,
                               max_iter=self.max_iter, random_state=self.random_state).fit(
                inputs / input_scale, targets if X.shape[1] > 1 else targets[:, 0])
        self.n_iter_ = int(mlp.n_iter_)
        # the layers, and the states' mean and scale that bring the network's answers back to their units
        network = ([w.copy() for w in mlp.coefs_], [b.copy() for b in mlp.intercepts_], target.mean_, target.scale_)
        residual = X - _regressed(inputs, input_scale, *network)
        self.model_ = WindowNetwork(space, input_scale, *network, np.atleast_2d(np.cov(residual.T)),
                                    np.vstack([X.min(axis=0), X.max(axis=0)]))
        return self.reset()

    def check_params(self):
        """Check the hyperparameters, as :meth:`fit` does before it reads any data.

        Returns
        -------
        self : WindowRegressor
            The regressor, unchanged.

        Raises
        ------
        ValueError
            Naming the first parameter that is not what the regressor accepts.
        """
        check_int(self.window, "window")
        check_transformer(self.features, "features")
        check_layer_sizes(self.hidden_layer_sizes)
        check_positive(self.alpha, "alpha", allow_zero=True)
        check_int(self.max_iter, "max_iter")
        if not (self.random_state is None or isinstance(self.random_state, np.random.RandomState)):
            check_int(self.random_state, "random_state", minimum=0, maximum=2**32 - 1)  # what scikit-learn seeds take
        return self

    def reset(self):
        """Forget the frame history; the estimate restarts at the mean training state (what is known
        before any frame), with the regression's residual covariance.

        Returns
        -------
        self : WindowRegressor
            The regressor, ready for a new sequence.
        """
        check_is_fitted(self, "model_")
        self.frames = None
        self._events = Counter()
        self._set_estimate("prior", self.model_.target_mean.copy(), self.model_.residual_cov.copy())
        self._set_estimate("post", self.x, self.P)
        return self

    def predict(self, u=None):
        """Carry the estimate over: the regressor has no dynamics.

        Parameters
        ----------
        u : None
            No control is taken (:meth:`batch_filter` checks a run's controls before it starts).
        """
        no_control(u)
        self.x_prior, self.P_prior = self.x.copy(), self.P.copy()

    def _control_dimension(self):
        return 0

    def update(self, z):
        """Add a frame to the window and regress the state from it.

        Parameters
        ----------
        z : array-like of shape (dim_z,) or obs_shape, or None
            The observation; ``None`` (missing) keeps the prediction.
        """
        if z is None:
            self._keep_prediction()
            return
        row = self.model_.space.map(z)[0]
        # the last window of frames, the first frame repeated before there were enough (as _windows
        # pads): one shape from the first frame on, which filterpy's Saver can stack
        if self.frames is None:
            self.frames = np.repeat(row[None], self.window, axis=0)
        else:
            self.frames = np.vstack([self.frames[1:], row])
        window = self.frames.reshape(1, -1)
        self._set_estimate("post", self.model_.regressed(window)[0], self.model_.residual_cov.copy())
        if self.model_.box is not None and self.model_.box.outside(self.x):
            # the network's answer is a function of frames it may never have seen the like of
            self._record("outside_training", f"the estimate left the training states' bounding box by more than "
                                             f"{OUTSIDE_MARGIN:.0%} of their range (the network extrapolates from "
                                             f"frames unlike its training ones)")

    @property
    def features_(self):
        """The fitted feature map."""
        return self.model_.space.features

    @property
    def obs_shape_(self):
        """Shape of one training observation."""
        return self.model_.space.obs_shape

    def _after_load(self):
        # a saved file is untrusted: the network must take windows of the features the map makes,
        # answer states of the saved dimension, and run one update
        super()._after_load()
        if saved_before_fit(self, "model_"):
            return
        self.check_params()
        check_int(self.n_iter_, "n_iter_")
        check_tuning_record(self)  # tune_filter tunes it with a grid given (it has no default one)
        dim_x = len(self.model_.target_mean)
        if self.n_features_in_ != dim_x:
            raise ValueError(f"n_features_in_: expected the network's state dimension ({dim_x}), got "
                             f"{self.n_features_in_!r}")
        width = self.model_.space.map(np.zeros(self.obs_shape_)).shape[1]
        if len(self.model_.input_scale) != self.window * width:
            raise ValueError(f"model_: the network takes {len(self.model_.input_scale)} inputs, where a window of "
                             f"{self.window} frames of {width} features makes {self.window * width}")
        if self.frames is not None and check_saved_matrix(self.frames, "frames", allow_1d=False).shape != (
                self.window, width):
            raise ValueError(f"frames: expected the features of the last {self.window} frames, shape "
                             f"({self.window}, {width}), got {self.frames.shape}")
        check_loaded_estimates(self, dim_x)
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one update by an observation of zeros, from the saved frames (see probe_loaded)
        filt.update(np.zeros(filt.obs_shape_))
        return filt.x, filt.P
