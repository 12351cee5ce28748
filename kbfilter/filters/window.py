"""A windowed regressor: the sequence-model baseline of Xu et al. (2022) §6.3 (their LSTM's analogue)."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from .._validation import check_int, check_observation, check_positive, check_sequences
from ..features import check_layer_sizes, check_network_memory, exact_pca
from ..threads import limited_blas
from .base import Filter, no_control

__all__ = ["WindowRegressor"]


class WindowRegressor(Filter, BaseEstimator):
    """An ``MLPRegressor`` from the features of the last ``window`` frames to the current state.

    It learns no dynamics and no likelihood; it is what a practitioner would try first with a
    sequence of images and their states. Frames before the start are the first frame repeated.

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
        xs, zs, self.obs_shape_ = check_sequences(states, observations)
        X, Z = np.vstack(xs), np.vstack(zs)
        self.n_features_in_ = X.shape[1]
        # the default PCA is seeded (a randomized SVD on wide images draws random numbers)
        default = exact_pca(30, Z, self.random_state)
        self.features_ = clone(self.features if self.features is not None else default).fit(Z, X)
        mapped = [self.features_.transform(z) for z in zs]
        check_network_memory(self.window * mapped[0].shape[1], self.hidden_layer_sizes, X.shape[1], X.shape[0])
        inputs = np.vstack([self._windows(F) for F in mapped])
        self.scale_ = StandardScaler(with_mean=False).fit(inputs).scale_  # a constant column keeps scale 1
        # the network learns standardised states: its initial weights and L2 penalty assume
        # targets of order one, and states in metres or far from the origin are not
        self.target_scaler_ = StandardScaler().fit(X)
        targets = self.target_scaler_.transform(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            # a one-dimensional state as scikit-learn wants a single target: a vector (a column warns)
            self.mlp_ = MLPRegressor(hidden_layer_sizes=tuple(self.hidden_layer_sizes), alpha=self.alpha,
                                     max_iter=self.max_iter, random_state=self.random_state).fit(
                inputs / self.scale_, targets if X.shape[1] > 1 else targets[:, 0])
        self.dim_x_ = X.shape[1]
        residual = X - self._regressed(inputs)
        self.residual_cov_ = np.atleast_2d(np.cov(residual.T))
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
        if self.features is not None and not (callable(getattr(self.features, "fit", None))
                                              and callable(getattr(self.features, "transform", None))):
            raise ValueError(f"features: expected None or a transformer with fit and transform, got "
                             f"{type(self.features).__name__}")
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
        check_is_fitted(self, "mlp_")
        self._frames = None
        self._set_estimate("prior", self.target_scaler_.mean_.copy(), self.residual_cov_.copy())
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
        z = check_observation(z, self.obs_shape_)[None, :]
        row = self.features_.transform(z)[0]
        # the last window of frames, the first frame repeated before there were enough (as _windows
        # pads): one shape from the first frame on, which filterpy's Saver can stack
        if self._frames is None:
            self._frames = np.repeat(row[None], self.window, axis=0)
        else:
            self._frames = np.vstack([self._frames[1:], row])
        window = self._frames.reshape(1, -1)
        self._set_estimate("post", self._regressed(window)[0], self.residual_cov_.copy())

    def _regressed(self, windows):
        """The network's states for rows of windowed features, as (n, dim_x) (it answers a single
        target with a vector)."""
        predicted = self.mlp_.predict(windows / self.scale_).reshape(len(windows), self.dim_x_)
        return self.target_scaler_.inverse_transform(predicted)
