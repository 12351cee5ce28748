"""Linear-Gaussian state-space model: the case where the Kalman filter is exact."""

from functools import cached_property

import numpy as np
from scipy.linalg import solve_discrete_lyapunov
from sklearn.linear_model import LinearRegression

from .._validation import MAX_TRAINING_MAGNITUDE, check_covariance, check_matrix, check_model_scale, check_rng, \
    check_sequences, check_square, check_training_magnitude, check_vector, check_within_magnitude
from ..linalg import psd_solve
from ..persistence import persistent
from .base import System, check_control, controlled_run, gaussian_loglik, one_observation

__all__ = ["LinearGaussian", "ControlledLinearGaussian", "LinearGaussianSensor"]


def _conditioned(P, H, R, innovation):
    """The Kalman update of a belief with covariance ``P`` by an observation ``H x + N(0, R)``
    that differs from its prediction by ``innovation``: the mean's shift and the new covariance (exact
    with a singular ``H P H^T + R`` too, through its pseudo-inverse)."""
    K = psd_solve(H @ P @ H.T + R, H @ P)[0].T
    return K @ innovation, P - K @ H @ P


@persistent("F", "H", "Q", "R")
class LinearGaussian(System):
    """``x_{t+1} = F x_t + N(0, Q)``, ``z_t = H x_t + N(0, R)``, started from the stationary law.

    Parameters
    ----------
    F : array-like of shape (dim_x, dim_x)
        The transition matrix, stable (spectral radius below 1).
    H : array-like of shape (dim_z, dim_x)
        The observation matrix.
    Q : array-like of shape (dim_x, dim_x)
        The process noise covariance.
    R : array-like of shape (dim_z, dim_z)
        The observation noise covariance.

    Examples
    --------
    >>> import numpy as np
    >>> system = LinearGaussian(F=[[0.9]], H=[[1.0]], Q=[[0.1]], R=[[0.2]])
    >>> states, obs = system.simulate(4, rng=0)
    >>> states.shape
    (4, 1)
    """

    def __init__(self, F, H, Q, R):
        self.F = check_square(check_matrix(F, "F", allow_1d=False), "F", "transition matrix")
        self.dim_x = self.F.shape[0]
        self.H = check_matrix(H, "H", n_features=self.dim_x, allow_1d=False)
        self.dim_z = self.H.shape[0]
        self.obs_shape = (self.dim_z,)
        self.Q = check_covariance(Q, "Q", self.dim_x)
        self.R = check_covariance(R, "R", self.dim_z)
        if np.max(np.abs(np.linalg.eigvals(self.F))) >= 1:
            raise ValueError("F: expected a stable transition (spectral radius < 1)")

    @cached_property
    def stationary_cov(self):
        """The stationary law's covariance (solved on first use: an O(dim_x^3) Lyapunov equation that
        building, loading or filtering with the system does not need)."""
        return solve_discrete_lyapunov(self.F, self._driving_cov())

    def _driving_cov(self):
        return self.Q

    @property
    def process_cov(self):
        """``Q``, the covariance of the process noise."""
        return self.Q

    @property
    def observation_cov(self):
        """``R``, the covariance of the observation noise."""
        return self.R

    def transition_mean(self, X):
        return np.atleast_2d(X) @ self.F.T

    def transition_jacobian(self, x):
        return self.F

    def observe_mean(self, X):
        return np.atleast_2d(X) @ self.H.T

    def observation_jacobian(self, x):
        return self.H

    def initial_state(self, rng):
        return check_rng(rng, "rng").multivariate_normal(np.zeros(self.dim_x), self.stationary_cov)

    def initial_belief(self, z0):
        """Stationary prior conditioned on ``z_0`` (exact Gaussian update; a singular covariance of
        ``z_0``, from a component both certain and observed without noise, goes through its
        pseudo-inverse).

        Parameters
        ----------
        z0 : array-like of shape (dim_z,)
            The first observation.

        Returns
        -------
        mean : ndarray of shape (dim_x,)
            The conditional mean.
        cov : ndarray of shape (dim_x, dim_x)
            The conditional covariance.
        """
        return _conditioned(self.stationary_cov, self.H, self.R, np.asarray(z0, dtype=np.float64))


@persistent("F", "B", "H", "Q", "R", "control_scale")
class ControlledLinearGaussian(LinearGaussian):
    """``x_t = F x_{t-1} + B u_t + N(0, Q)``, ``z_t = H x_t + N(0, R)``: a known control input.

    The linear-Gaussian case of a controlled system: the Kalman filter with ``B`` is exact, so
    the learned filters' use of controls can be checked against it. :meth:`simulate` drives it
    with independent controls, uniform on ``[-control_scale, control_scale]`` in each
    coordinate, and starts from the stationary law under them.

    Parameters
    ----------
    F : array-like of shape (dim_x, dim_x)
        The transition matrix, stable (spectral radius below 1).
    B : array-like of shape (dim_x, dim_u)
        The control matrix.
    H : array-like of shape (dim_z, dim_x)
        The observation matrix.
    Q : array-like of shape (dim_x, dim_x)
        The process noise covariance.
    R : array-like of shape (dim_z, dim_z)
        The observation noise covariance.
    control_scale : float, default=1.0
        The half-width of the simulated controls' uniform law.

    Examples
    --------
    >>> system = ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])
    >>> states, controls, obs = system.simulate(5, rng=0)
    >>> states.shape, controls.shape, obs.shape
    ((5, 1), (5, 1), (5, 1))
    """

    def __init__(self, F, B, H, Q, R, control_scale=1.0):
        super().__init__(F, H, Q, R)
        self.B = check_matrix(B, "B", allow_1d=False)
        if self.B.shape[0] != self.dim_x:
            raise ValueError(f"B: expected {self.dim_x} rows (one per state coordinate), got shape {self.B.shape}")
        self.dim_u = self.B.shape[1]
        self.control_scale = check_model_scale(control_scale, "control_scale")
        with np.errstate(over="ignore"):
            if not np.all(np.isfinite(self._driving_cov())):
                raise ValueError(f"control_scale: the controls' covariance control_scale^2 / 3 B B^T overflows with "
                                 f"control_scale={self.control_scale!r} and B up to {np.abs(self.B).max():.3g}")

    def _driving_cov(self):
        return self.Q + self.control_scale ** 2 / 3 * self.B @ self.B.T  # a uniform law's variance is (2c)^2 / 12

    def transition_mean(self, X, u=None):
        """``F x + B u`` for each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x) or (dim_x,)
            States.
        u : array-like of shape (dim_u,) or (n, dim_u)
            The control; required.

        Returns
        -------
        ndarray of shape (n, dim_x)
            The mean of the next state.
        """
        X = np.atleast_2d(X)
        return X @ self.F.T + check_control(u, X.shape[0], self.dim_u, "ControlledLinearGaussian") @ self.B.T

    def simulate(self, T, rng=None, burn_in=0, return_latent=False):
        """A run driven by random controls.

        Parameters
        ----------
        T : int
            The number of steps.
        rng : int, numpy.random.Generator or None
            Seed or generator.
        burn_in : int, default=0
            Steps driven and discarded first (the start is already drawn from the stationary law).
        return_latent : bool, default=False
            Refused when true: there are no latent variables, and this run's three arrays hold the
            controls second.

        Returns
        -------
        states : ndarray of shape (T, dim_x)
            The hidden states.
        controls : ndarray of shape (T, dim_u)
            ``controls[t]`` moved the state from ``states[t - 1]`` to ``states[t]`` (the control
            ``predict(u)`` takes before ``update(observations[t])``).
        observations : ndarray of shape (T, dim_z)
            The observations (last: a learned filter takes them as ``fit(states, observations,
            controls=controls)``).
        """
        return controlled_run(self, T, self._random_control, rng, burn_in, return_latent)

    def _random_control(self, x, rng):
        return rng.uniform(-self.control_scale, self.control_scale, size=self.dim_u)


@persistent("H", "offset", "R", "prior_mean", "prior_cov")
class LinearGaussianSensor:
    """A sensor ``z = H x + offset + N(0, R)``, with a Gaussian belief ``N(prior_mean, prior_cov)``
    about the state before any observation; :meth:`fitted` learns it from state-observation pairs.

    It is what :class:`~kbfilter.LearnedMotionFilter` weighs its particles by when it is given no
    sensor: a linear map carries over to states the log never held, as the learned motion does.

    Parameters
    ----------
    H : array-like of shape (dim_z, dim_x)
        The observation matrix.
    offset : array-like of shape (dim_z,)
        The observation of the zero state.
    R : array-like of shape (dim_z, dim_z)
        The covariance of the observation noise, positive definite.
    prior_mean : array-like of shape (dim_x,)
        The mean of the state before any observation.
    prior_cov : array-like of shape (dim_x, dim_x)
        Its covariance.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> states = rng.normal(size=(500, 2))
    >>> fixes = states[:, :1] + 0.1 * rng.normal(size=(500, 1))     # the first coordinate, 0.1 errors
    >>> sensor = LinearGaussianSensor.fitted(states, fixes)
    >>> round(float(sensor.H[0, 0]), 2), round(float(np.sqrt(sensor.R[0, 0])), 2)
    (1.0, 0.1)
    """

    def __init__(self, H, offset, R, prior_mean, prior_cov):
        # learned from training pairs, or read from a file (untrusted): values fit could have
        # produced, whose squares do not overflow (a variance is a square: its root is bounded). H is
        # held contiguous, as load gives it back: BLAS may round a product otherwise by layout, and
        # scikit-learn's fitted coefficients are a strided view
        self.H = np.ascontiguousarray(check_within_magnitude(check_matrix(H, "H", allow_1d=False), "H"))
        self.dim_z, dim_x = self.H.shape
        self.obs_shape = (self.dim_z,)
        self.offset = check_within_magnitude(check_vector(offset, "offset", length=self.dim_z), "offset")
        self.R = check_covariance(R, "R", self.dim_z, definite=True)
        self.prior_mean = check_within_magnitude(check_vector(prior_mean, "prior_mean", length=dim_x), "prior_mean")
        self.prior_cov = check_covariance(prior_cov, "prior_cov", dim_x)
        for name in ("R", "prior_cov"):
            deviation = float(np.sqrt(np.max(np.diag(getattr(self, name)))))
            check_training_magnitude(deviation, f"{name} (its standard deviations)")

    @classmethod
    def fitted(cls, states, observations):
        """The sensor learned by least squares: ``H`` and ``offset`` regress the observations on
        the states, ``R`` is the covariance of the residuals (divided by the degrees of freedom
        left), and the first belief has the training states' mean and variances (independent:
        see the comment in the code).

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            Training states.
        observations : array-like of shape (T, dim_z), or a list of such arrays
            Their observations, vectors, row for row.

        Returns
        -------
        LinearGaussianSensor
            The sensor.
        """
        xs, zs, obs_shape = check_sequences(states, observations)
        if len(obs_shape) != 1:
            raise ValueError(f"observations: a linear sensor is learned from vectors, got observations of shape "
                             f"{obs_shape}; give the filter a sensor model for them")
        X, Z = np.vstack(xs), np.vstack(zs)
        unknowns = X.shape[1] + 1
        if len(X) <= unknowns:
            raise ValueError(f"states: expected more training pairs than the state's dimension plus one "
                             f"({unknowns}), got {len(X)}")
        # the residuals span at most len(X) - unknowns directions: a noise covariance of more
        # dimensions than that is singular whatever the data
        if Z.shape[1] > len(X) - unknowns:
            raise ValueError(f"observations: learning the noise covariance of {Z.shape[1]}-dimensional observations "
                             f"needs at least {Z.shape[1] + unknowns} training pairs (the observation's dimension plus "
                             f"the state's plus one), got {len(X)}; give a longer log or a sensor model")
        # scikit-learn centres the states before the solve: states far from the origin (map
        # coordinates in metres) would ruin its conditioning beside a column of ones
        fit = LinearRegression().fit(X, Z)
        residuals = Z - fit.predict(X)
        R = residuals.T @ residuals / (len(X) - unknowns)
        smallest = np.linalg.eigvalsh(R)[0]
        if smallest <= 1e-12 * max(float(np.max(Z.var(axis=0))), np.finfo(float).tiny):
            raise ValueError("observations: they are an exact linear function of the states along some direction "
                             "(the residuals of the linear fit have no spread there), so no noise can be learned; "
                             "give the filter a sensor model")
        # the mirror of the training bound: a noise whose variance is below its inverse square would
        # have its precision, and the likelihoods, overflow
        if smallest < MAX_TRAINING_MAGNITUDE ** -2:
            raise ValueError(f"observations: the residuals of the linear fit spread by only {np.sqrt(smallest):.3g} "
                             f"along some direction; a learned noise must spread by at least "
                             f"{1 / MAX_TRAINING_MAGNITUDE:g} (as training values lie within "
                             f"+-{MAX_TRAINING_MAGNITUDE:g}, so that neither squares nor their inverses overflow): "
                             f"express the observations in other units")
        # the first belief keeps the states' variances but not their correlations: across a log
        # of tracks a position's correlation with a velocity says where the tracks happened to
        # go, and would send a track elsewhere off at a speed it never had
        return cls(H=fit.coef_, offset=fit.intercept_, R=0.5 * (R + R.T), prior_mean=X.mean(axis=0),
                   prior_cov=np.diag(X.var(axis=0, ddof=1)))

    @property
    def observation_cov(self):
        """``R``, the covariance of the observation noise."""
        return self.R

    def observe_mean(self, X):
        """``H x + offset`` for each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n, dim_z)
            Their observations without noise.
        """
        return np.atleast_2d(X) @ self.H.T + self.offset

    def observation_jacobian(self, x):
        """``H``, at any state.

        Parameters
        ----------
        x : array-like of shape (dim_x,)
            The state (unused: the map is linear).

        Returns
        -------
        ndarray of shape (dim_z, dim_x)
            ``H``.
        """
        return self.H

    def observation_loglik(self, z, X):
        """``log N(z; H x + offset, R)`` for each row of ``X``.

        Parameters
        ----------
        z : array-like of shape (dim_z,)
            One observation.
        X : array-like of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n,)
            The log-densities.
        """
        return gaussian_loglik(one_observation(self, z) - self.observe_mean(X), self.R)

    def observe(self, X, rng=None):
        """Noisy observations of states ``X``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x)
            States.
        rng : int, Generator or None
            The random numbers.

        Returns
        -------
        ndarray of shape (n, dim_z)
            ``H x + offset`` plus a draw of ``N(0, R)`` for each row.
        """
        mean = self.observe_mean(X)
        return mean + check_rng(rng, "rng").multivariate_normal(np.zeros(self.dim_z), self.R, size=len(mean))

    def initial_belief(self, z0):
        """The first belief conditioned on ``z0`` (the Kalman update of ``N(prior_mean, prior_cov)``).

        Parameters
        ----------
        z0 : array-like of shape (dim_z,)
            The first observation.

        Returns
        -------
        mean : ndarray of shape (dim_x,)
            The conditional mean.
        cov : ndarray of shape (dim_x, dim_x)
            The conditional covariance.
        """
        z0 = check_vector(z0, "z0", length=self.dim_z)
        shift, cov = _conditioned(self.prior_cov, self.H, self.R, z0 - self.observe_mean(self.prior_mean)[0])
        return self.prior_mean + shift, 0.5 * (cov + cov.T)
