"""Linear-Gaussian state-space model: the case where the Kalman filter is exact."""

import numpy as np
from scipy.linalg import solve_discrete_lyapunov

from .._validation import check_matrix
from ..persistence import persistent
from .base import System

__all__ = ["LinearGaussian"]


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
        self.stationary_cov = solve_discrete_lyapunov(self.F, self.Q)

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
