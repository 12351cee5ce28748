"""Tracking models for recorded tracks: constant velocity seen through noisy position fixes.

The state is ``(east, north, east velocity, north velocity)`` in metres and metres a second, one step
every ``step`` seconds, as :mod:`kbfilter.datasets` returns recorded tracks. The motion model is
the one a tracking engineer writes first: constant velocity with piecewise-constant white
acceleration (Bar-Shalom, Li and Kirubarajan 2001, the discrete white-noise acceleration model),
``x_{t+1} = F x_t + G a_t`` with ``a_t ~ N(0, sigma_a^2 I)``; the sensor gives the position with
independent Gaussian errors. Over recorded tracks the sensor is simulated (:meth:`PositionFixes.observe`),
with stretches of missing fixes (``None``) where the experiment wants them.
"""

import numpy as np

from .._validation import check_int, check_matrix, check_positive, check_rng, check_vector
from .base import System

__all__ = ["ConstantVelocity", "PositionFixes", "dropouts"]


class PositionFixes:
    """A position sensor: ``z = (east, north) + N(0, noise^2 I)``, each fix independent.

    Parameters
    ----------
    noise : float
        The standard deviation of each coordinate's error, metres.

    Examples
    --------
    >>> fixes = PositionFixes(noise=5.0)
    >>> fixes.observe([[0.0, 0.0, 1.0, 1.0]], rng=0).shape
    (1, 2)
    """

    dim_z = 2
    obs_shape = (2,)

    def __init__(self, noise=5.0):
        self.noise = check_positive(noise, "noise")
        self.observation_cov = self.noise**2 * np.eye(2)

    def observe_mean(self, X):
        """The positions of states ``X`` (n, 4).

        Parameters
        ----------
        X : array-like of shape (n, 4)
            States.

        Returns
        -------
        ndarray of shape (n, 2)
            East and north.
        """
        return np.atleast_2d(np.asarray(X, dtype=np.float64))[:, :2]

    def observe(self, X, rng=None):
        """Noisy fixes of the states ``X``.

        Parameters
        ----------
        X : array-like of shape (n, 4)
            True states (a recorded track).
        rng : int, Generator or None
            The random numbers.

        Returns
        -------
        ndarray of shape (n, 2)
            The fixes.
        """
        X = check_matrix(X, "X", n_features=4)
        return self.observe_mean(X) + self.noise * check_rng(rng).standard_normal((len(X), 2))

    def observation_loglik(self, z, X):
        """``log p(z | x)`` for each row of ``X``: the Gaussian density of the fix, normalised (a
        filter's likelihood of an observation is then a density).

        Parameters
        ----------
        z : array-like of shape (2,)
            One fix.
        X : array-like of shape (n, 4)
            States.

        Returns
        -------
        ndarray of shape (n,)
            The log-likelihoods.
        """
        diff = np.asarray(z, dtype=np.float64) - self.observe_mean(X)
        return -0.5 * np.einsum("nd,nd->n", diff, diff) / self.noise**2 - np.log(2 * np.pi * self.noise**2)


class ConstantVelocity(System):
    """Constant velocity with white acceleration, seen through :class:`PositionFixes`.

    Parameters
    ----------
    step : float
        Seconds between steps.
    accel : float
        ``sigma_a``, the standard deviation of each acceleration component, m/s^2 (see
        :meth:`fitted` for the rule that chooses it on training tracks).
    sensor : PositionFixes, optional
        The sensor; ``PositionFixes(5.0)`` by default.
    speed : float
        The standard deviation of each velocity component in the first belief (which takes its
        position from the first fix and assumes no velocity), m/s.

    Examples
    --------
    >>> cv = ConstantVelocity(step=10.0, accel=0.5)
    >>> cv.transition_mean([[0.0, 0.0, 10.0, -5.0]])
    array([[100., -50.,  10.,  -5.]])
    """

    dim_x, dim_z, obs_shape = 4, 2, (2,)

    def __init__(self, step=10.0, accel=1.0, sensor=None, speed=100.0):
        self.step = check_positive(step, "step")
        self.accel = check_positive(accel, "accel")
        self.sensor = PositionFixes() if sensor is None else sensor
        if not callable(getattr(self.sensor, "observation_loglik", None)):
            raise ValueError(f"sensor: expected a sensor with observe_mean and observation_loglik, got "
                             f"{type(sensor).__name__}")
        self.speed = check_positive(speed, "speed")
        dt = self.step
        self.F = np.array([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float64)
        G = np.array([[dt * dt / 2, 0], [0, dt * dt / 2], [dt, 0], [0, dt]])
        self.process_cov = self.accel**2 * G @ G.T
        self.observation_cov = self.sensor.observation_cov

    @classmethod
    def fitted(cls, tracks, step, sensor=None, speed=100.0):
        """The model with ``accel`` chosen on training tracks: the root mean square of the recorded
        velocity changes a step, divided by the step (both axes pooled).

        Parameters
        ----------
        tracks : list of ndarray of shape (n_i, 4)
            Training tracks (never the test tracks).
        step : float
            Seconds between their rows.
        sensor : PositionFixes, optional
            The sensor.
        speed : float
            As for the constructor.

        Returns
        -------
        ConstantVelocity
            The model.
        """
        step = check_positive(step, "step")
        changes = np.concatenate([np.diff(check_matrix(t, "tracks", n_features=4)[:, 2:], axis=0) for t in tracks])
        return cls(step, float(np.sqrt(np.mean(changes**2))) / step, sensor, speed)

    def transition_mean(self, X):
        return np.atleast_2d(X) @ self.F.T

    def transition_jacobian(self, x):
        return self.F

    def observe_mean(self, X):
        return self.sensor.observe_mean(X)

    def observation_jacobian(self, x):
        return np.hstack([np.eye(2), np.zeros((2, 2))])

    def observation_loglik(self, z, X):
        return self.sensor.observation_loglik(z, X)

    def initial_state(self, rng):
        # where a simulated run starts: the origin, at a speed drawn from the first belief
        return np.r_[0.0, 0.0, self.speed * rng.standard_normal(2)]

    def initial_belief(self, z0):
        z0 = check_vector(z0, "zs[0]", length=2)
        return np.r_[z0, 0.0, 0.0], np.diag([*np.diag(self.observation_cov), self.speed**2, self.speed**2])


def dropouts(observations, rng=None, rate=0.05, length=(1, 20)):
    """Observations with stretches missing: each step after the first starts a dropout with
    probability ``rate``.

    Parameters
    ----------
    observations : array-like of shape (T, d)
        The observations.
    rng : int, Generator or None
        The random numbers.
    rate : float, default=0.05
        The chance that a dropout starts at a step (outside a dropout).
    length : (int, int), default=(1, 20)
        The shortest and longest dropout, in steps; each length is drawn uniformly between them.

    Returns
    -------
    observations : list
        The observations, ``None`` where missing (``batch_filter`` and ``update`` take ``None``).
    missing : ndarray of bool, shape (T,)
        Where they are missing.

    Examples
    --------
    >>> zs, missing = dropouts(np.zeros((50, 2)), rng=0, rate=0.1, length=(3, 3))
    >>> int(missing.sum()) % 3 == 0 or bool(missing[-1])
    True
    """
    obs = check_matrix(observations, "observations")
    rng = check_rng(rng)
    rate = check_positive(rate, "rate")
    low, high = (check_int(v, "length") for v in length)
    if high < low:
        raise ValueError(f"length: expected (shortest, longest), got {length!r}")
    missing = np.zeros(len(obs), dtype=bool)
    t = 1  # the first observation is kept: a filter starts from it
    while t < len(obs):
        if rng.uniform() < rate:
            n = int(rng.integers(low, high + 1))
            missing[t:t + n] = True
            t += n + 1  # a dropout is followed by at least one fix
        else:
            t += 1
    return [None if m else z for z, m in zip(obs, missing)], missing
