"""Noisy rotation and noisy oscillation (Fukumizu (2014) "Numerical examples"; Xu et al. (2022) eq. 5).

With ``theta_t = atan2(v_t, u_t)``::

    x_{t+1} = (1 + b sin(M theta_t)) (cos(theta_t + omega), sin(theta_t + omega)) + N(0, s_x^2 I)
    z_t     = x_t + N(0, s_z^2 I)
"""

import numpy as np

from .._validation import MAX_TRAINING_MAGNITUDE, check_model_scale, check_real, check_rng, check_vector
from ..persistence import persistent
from .base import System

__all__ = ["Oscillation", "Rotation"]


@persistent("omega", "b", "M", "process_noise", "observation_noise")
class Oscillation(System):
    """Noisy oscillation on the plane; ``b = 0`` gives the noisy rotation.

    Parameters
    ----------
    omega : float
        Angular step per time step.
    b : float
        Amplitude of the radial oscillation ``1 + b sin(M theta)``.
    M : int
        Its frequency: the oscillations a turn (a whole number, so that the radius is a
        function of the point on the circle).
    process_noise : float
        Standard deviation ``s_x`` of the process noise (per coordinate).
    observation_noise : float
        Standard deviation ``s_z`` of the observation noise (per coordinate).

    Examples
    --------
    >>> states, obs = Oscillation().simulate(5, rng=0)
    >>> states.shape, obs.shape
    ((5, 2), (5, 2))
    """

    dim_x = 2
    dim_z = 2
    obs_shape = (2,)

    def __init__(self, omega=0.4, b=0.4, M=8, process_noise=0.2, observation_noise=0.2):
        self.omega = check_real(omega, "omega", maximum=MAX_TRAINING_MAGNITUDE)
        self.b = check_real(b, "b", maximum=MAX_TRAINING_MAGNITUDE)
        self.M = check_real(M, "M", maximum=MAX_TRAINING_MAGNITUDE)
        # sin(M theta) is a function of the point on the circle only for a whole M: another M
        # makes the radius jump where theta wraps from pi to -pi
        if self.M != round(self.M):
            raise ValueError(f"M: expected a whole number of oscillations a turn, got {self.M:g}")
        self.process_noise = check_model_scale(process_noise, "process_noise")
        self.observation_noise = check_model_scale(observation_noise, "observation_noise")

    def __repr__(self):
        return (f"{type(self).__name__}(omega={self.omega}, b={self.b}, M={self.M:g}, "
                f"process_noise={self.process_noise}, observation_noise={self.observation_noise})")

    @property
    def process_cov(self):
        """``Q``, the covariance of the process noise."""
        return self.process_noise**2 * np.eye(2)

    @property
    def observation_cov(self):
        """``R``, the covariance of the observation noise."""
        return self.observation_noise**2 * np.eye(2)

    def transition_mean(self, X):
        X = np.atleast_2d(X)
        theta = np.arctan2(X[:, 1], X[:, 0])
        radius = 1.0 + self.b * np.sin(self.M * theta)
        return radius[:, None] * np.column_stack([np.cos(theta + self.omega), np.sin(theta + self.omega)])

    def transition_jacobian(self, x):
        u, v = np.asarray(x, dtype=np.float64)
        r2 = max(u * u + v * v, 1e-12)
        theta = np.arctan2(v, u)
        c, s = np.cos(theta + self.omega), np.sin(theta + self.omega)
        radius = 1.0 + self.b * np.sin(self.M * theta)
        dradius = self.b * self.M * np.cos(self.M * theta)
        dg = np.array([dradius * c - radius * s, dradius * s + radius * c])  # d f / d theta
        dtheta = np.array([-v / r2, u / r2])  # d theta / d (u, v)
        return np.outer(dg, dtheta)

    def observe_mean(self, X):
        return np.atleast_2d(np.asarray(X, dtype=np.float64)).copy()

    def observation_jacobian(self, x):
        return np.eye(2)

    def initial_state(self, rng):
        theta = check_rng(rng, "rng").uniform(0, 2 * np.pi)
        return np.array([np.cos(theta), np.sin(theta)])

    def initial_belief(self, z0):
        return check_vector(z0, "zs[0]", length=2).copy(), self.observation_cov


@persistent("omega", "b", "M", "process_noise", "observation_noise")
class Rotation(Oscillation):
    """Noisy rotation: :class:`Oscillation` with ``omega = 0.3`` and ``b = 0``.

    Parameters
    ----------
    omega, b, M, process_noise, observation_noise
        As in :class:`Oscillation`.

    Examples
    --------
    >>> Rotation()
    Rotation(omega=0.3, b=0.0, M=8, process_noise=0.2, observation_noise=0.2)
    """

    def __init__(self, omega=0.3, b=0.0, M=8, process_noise=0.2, observation_noise=0.2):
        super().__init__(omega, b, M, process_noise, observation_noise)
