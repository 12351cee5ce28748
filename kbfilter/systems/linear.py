"""Linear-Gaussian state-space model: the case where the Kalman filter is exact."""

from functools import cached_property

import numpy as np
from scipy.linalg import solve_discrete_lyapunov

from .._validation import check_matrix, check_positive
from ..persistence import persistent
from .base import System, check_control, controlled_run

__all__ = ["LinearGaussian", "ControlledLinearGaussian"]


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
        self.F = check_matrix(F, "F", allow_1d=False)
        self.dim_x = self.F.shape[0]
        self.H = check_matrix(H, "H", n_features=self.dim_x, allow_1d=False)
        self.dim_z = self.H.shape[0]
        self.obs_shape = (self.dim_z,)
        self.Q = check_matrix(Q, "Q", n_features=self.dim_x, allow_1d=False)
        self.R = check_matrix(R, "R", n_features=self.dim_z, allow_1d=False)
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
        return rng.multivariate_normal(np.zeros(self.dim_x), self.stationary_cov)

    def initial_belief(self, z0):
        """Stationary prior conditioned on ``z_0`` (exact Gaussian update).

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
        P = self.stationary_cov
        S = self.H @ P @ self.H.T + self.R
        K = np.linalg.solve(S, self.H @ P).T
        return K @ np.asarray(z0, dtype=np.float64), P - K @ self.H @ P


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
        self.control_scale = check_positive(control_scale, "control_scale")

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
            Not used; accepted for the interface.

        Returns
        -------
        states : ndarray of shape (T, dim_x)
            The hidden states.
        controls : ndarray of shape (T, dim_u)
            ``controls[t]`` moved the state from ``states[t - 1]`` to ``states[t]`` (the control
            ``predict(u)`` takes before ``update(observations[t])``).
        observations : ndarray of shape (T, dim_z)
            The observations.
        """
        return controlled_run(self, T, rng, burn_in, self._random_control)

    def _random_control(self, x, rng):
        return rng.uniform(-self.control_scale, self.control_scale, size=self.dim_u)
