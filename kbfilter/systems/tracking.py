"""Tracking models for recorded tracks: constant velocity and coordinated turns, seen through
position fixes or a range-bearing radar.

The state is ``(east, north, east velocity, north velocity)`` in metres and metres a second, one step
every ``step`` seconds, as :mod:`kbfilter.datasets` returns recorded tracks (the coordinated-turn
model adds the turn rate, radians a second). The motion models are the ones a tracking engineer
writes first (Bar-Shalom, Li and Kirubarajan 2001): constant velocity with piecewise-constant white
acceleration, ``x_{t+1} = F x_t + G a_t`` with ``a_t ~ N(0, sigma_a^2 I)``, and the coordinated turn,
which rotates the velocity by ``omega * step`` a step. The sensors give the position with independent
Gaussian errors, or the range and bearing from a radar site. Over recorded tracks the sensor is
simulated (``observe``), with stretches of missing observations (``None``) where the experiment
wants them.
"""

from collections.abc import Iterable

import numpy as np

from .._validation import check_bool, check_int, check_matrix, check_model_scale, check_positive, \
    check_rng, check_vector
from ..persistence import persistent
from .base import System, one_observation
from .robot import wrapped_angle

__all__ = ["ConstantVelocity", "CoordinatedTurn", "PositionFixes", "RangeBearing", "dropouts"]


def _positions(X):
    """States checked to hold a position in their first two columns."""
    return _position_columns(check_matrix(X, "X"), all_columns=True)


def _position_columns(X, all_columns=False):
    """The east and north columns of states ``X`` (their first two; every column when
    ``all_columns``), which must have them: a shape check only, as a filter calls this on its
    particles at every step."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.ndim != 2 or X.shape[1] < 2:
        raise ValueError(f"X: expected states with east and north in their first two columns, got shape {X.shape}")
    return X if all_columns else X[:, :2]


@persistent("noise")
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
        self.noise = check_model_scale(noise, "noise")
        self.observation_cov = self.noise**2 * np.eye(2)

    def observe_mean(self, X):
        """The positions of states ``X`` (n, 4).

        Parameters
        ----------
        X : array-like of shape (n, >= 2)
            States.

        Returns
        -------
        ndarray of shape (n, 2)
            East and north.
        """
        return _position_columns(X)

    def observe(self, X, rng=None):
        """Noisy fixes of the states ``X``.

        Parameters
        ----------
        X : array-like of shape (n, >= 2)
            True states (a recorded track).
        rng : int, Generator or None
            The random numbers.

        Returns
        -------
        ndarray of shape (n, 2)
            The fixes.
        """
        X = _positions(X)
        return self.observe_mean(X) + self.noise * check_rng(rng, "rng").standard_normal((len(X), 2))

    def observation_loglik(self, z, X):
        """``log p(z | x)`` for each row of ``X``: the Gaussian density of the fix, normalised (a
        filter's likelihood of an observation is then a density).

        Parameters
        ----------
        z : array-like of shape (2,)
            One fix.
        X : array-like of shape (n, >= 2)
            States.

        Returns
        -------
        ndarray of shape (n,)
            The log-likelihoods.
        """
        diff = one_observation(self, z) - self.observe_mean(X)
        return -0.5 * np.einsum("nd,nd->n", diff, diff) / self.noise**2 - np.log(2 * np.pi * self.noise**2)

    def position_jacobian(self, position):
        """``dh / d(east, north)`` at a position: the identity.

        Parameters
        ----------
        position : array-like of shape (2,)
            East and north.

        Returns
        -------
        ndarray of shape (2, 2)
            The Jacobian.
        """
        return np.eye(2)

    def position_belief(self, z0):
        """The position a first fix says: the fix, with the sensor's covariance.

        Parameters
        ----------
        z0 : array-like of shape (2,)
            The first fix.

        Returns
        -------
        mean : ndarray of shape (2,)
            East and north.
        cov : ndarray of shape (2, 2)
            Their covariance.
        """
        return check_vector(z0, "zs[0]", length=2).copy(), self.observation_cov.copy()

    def residual(self, a, b):
        """``a - b`` for two observations (see :meth:`~kbfilter.systems.System.observation_residual`).

        Parameters
        ----------
        a, b : ndarray of shape (2,)
            Observations.

        Returns
        -------
        ndarray of shape (2,)
            Their difference.
        """
        return np.subtract(a, b)


@persistent("site", "range_noise", "bearing_noise")
class RangeBearing:
    """A radar at a stated site: ``z = (range, bearing) + N(0, diag(range_noise^2, bearing_noise^2))``.

    The bearing is measured clockwise from north (``atan2(east - site_east, north - site_north)``),
    in radians in ``(-pi, pi]``; differences of bearings are taken modulo ``2 pi``, so a target
    passing south of the site (bearing near ``+-pi``) is not torn apart. The range is in metres.

    Parameters
    ----------
    site : (float, float), default=(0.0, 0.0)
        The radar's east and north, metres.
    range_noise : float, default=50.0
        The standard deviation of the range, metres.
    bearing_noise : float, default=0.01
        The standard deviation of the bearing, radians (0.01 rad is 0.57 degrees), at most
        ``pi / 4``: beyond it a Gaussian error no longer describes a bearing that wraps at
        ``+-pi``.

    Examples
    --------
    >>> radar = RangeBearing(site=(0.0, 0.0), range_noise=10.0, bearing_noise=0.01)
    >>> radar.observe_mean([[0.0, 100.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])   # due north, due east
    array([[100.        ,   0.        ],
           [100.        ,   1.57079633]])
    """

    dim_z = 2
    obs_shape = (2,)

    def __init__(self, site=(0.0, 0.0), range_noise=50.0, bearing_noise=0.01):
        self.site = check_vector(site, "site", length=2)
        self.range_noise = check_model_scale(range_noise, "range_noise")
        self.bearing_noise = check_model_scale(bearing_noise, "bearing_noise")
        # a bearing wraps at +-pi: up to pi/4 the Gaussian puts under 1e-4 of its mass beyond, so
        # the filters' Gaussian reading of a wrapped bearing holds; a larger error is most often
        # a bearing error given in degrees
        if self.bearing_noise > np.pi / 4:
            raise ValueError(f"bearing_noise: expected a standard deviation in radians, at most pi/4 (45 degrees), "
                             f"got {self.bearing_noise:g}; was it given in degrees?")
        self.observation_cov = np.diag([self.range_noise**2, self.bearing_noise**2])

    def _offsets(self, X):
        return _position_columns(X) - self.site

    def observe_mean(self, X):
        """The range and bearing of states ``X`` (their first two columns: east, north).

        Parameters
        ----------
        X : array-like of shape (n, >= 2)
            States.

        Returns
        -------
        ndarray of shape (n, 2)
            Range (m) and bearing (rad, clockwise from north).
        """
        d = self._offsets(X)
        return np.column_stack([np.hypot(d[:, 0], d[:, 1]), np.arctan2(d[:, 0], d[:, 1])])

    def observe(self, X, rng=None):
        """Noisy radar observations of the states ``X``.

        Parameters
        ----------
        X : array-like of shape (n, >= 2)
            True states (a recorded track).
        rng : int, Generator or None
            The random numbers.

        Returns
        -------
        ndarray of shape (n, 2)
            Range and bearing, the bearing wrapped into ``(-pi, pi]``.
        """
        X = _positions(X)
        noise = check_rng(rng, "rng").standard_normal((len(X), 2))
        z = self.observe_mean(X) + noise * [self.range_noise, self.bearing_noise]
        z[:, 1] = wrapped_angle(z[:, 1])
        return z

    def residual(self, a, b):
        """``a - b`` with the bearing difference wrapped into ``(-pi, pi]``.

        Parameters
        ----------
        a, b : ndarray of shape (..., 2)
            Observations.

        Returns
        -------
        ndarray of shape (..., 2)
            Their difference.
        """
        out = np.subtract(a, b)
        out[..., 1] = wrapped_angle(out[..., 1])
        return out

    def observation_loglik(self, z, X):
        """``log p(z | x)`` for each row of ``X``: the Gaussian density of the range and of the
        wrapped bearing difference, normalised.

        Parameters
        ----------
        z : array-like of shape (2,)
            One observation.
        X : array-like of shape (n, >= 2)
            States.

        Returns
        -------
        ndarray of shape (n,)
            The log-likelihoods.
        """
        diff = self.residual(one_observation(self, z), self.observe_mean(X)) / [self.range_noise, self.bearing_noise]
        return -0.5 * np.sum(diff**2, axis=1) - np.log(2 * np.pi * self.range_noise * self.bearing_noise)

    def average(self, Z, weights):
        """The weighted mean of observations, the bearing's as a circular mean.

        Parameters
        ----------
        Z : ndarray of shape (n, 2)
            Ranges and bearings.
        weights : ndarray of shape (n,)
            Their weights (the unscented transform's may be negative).

        Returns
        -------
        ndarray of shape (2,)
            Mean range and bearing.
        """
        Z = np.asarray(Z, dtype=np.float64)
        return np.array([np.dot(weights, Z[:, 0]),
                         np.arctan2(np.dot(weights, np.sin(Z[:, 1])), np.dot(weights, np.cos(Z[:, 1])))])

    def position_jacobian(self, position):
        """``d(range, bearing) / d(east, north)`` at a position (not at the site).

        Parameters
        ----------
        position : array-like of shape (2,)
            East and north.

        Returns
        -------
        ndarray of shape (2, 2)
            The Jacobian.
        """
        de, dn = np.asarray(position, dtype=np.float64)[:2] - self.site
        r2 = max(de * de + dn * dn, 1e-12)
        r = np.sqrt(r2)
        return np.array([[de / r, dn / r], [dn / r2, -de / r2]])

    def position_belief(self, z0):
        """The position a first observation says, with its covariance through the Jacobian of the
        polar-to-Cartesian map.

        Parameters
        ----------
        z0 : array-like of shape (2,)
            Range and bearing.

        Returns
        -------
        mean : ndarray of shape (2,)
            East and north.
        cov : ndarray of shape (2, 2)
            Their covariance.
        """
        r, b = check_vector(z0, "zs[0]", length=2)
        J = np.array([[np.sin(b), r * np.cos(b)], [np.cos(b), -r * np.sin(b)]])
        return self.site + r * np.array([np.sin(b), np.cos(b)]), J @ self.observation_cov @ J.T


class _TrackingModel(System):
    """What the tracking models share: the sensor (its mean, likelihood, Jacobian, residual and the
    position a first observation says), the white-acceleration noise and the first belief."""

    dim_z, obs_shape = 2, (2,)

    def _set_sensor(self, sensor):
        self.sensor = PositionFixes() if sensor is None else sensor
        for method in ("observe_mean", "observation_loglik"):
            if not callable(getattr(self.sensor, method, None)):
                raise ValueError(f"sensor: expected a sensor with observe_mean and observation_loglik, got "
                                 f"{type(sensor).__name__}")
        self.observation_cov = self.sensor.observation_cov

    def _acceleration_cov(self):
        dt = self.step
        G = np.array([[dt * dt / 2, 0], [0, dt * dt / 2], [dt, 0], [0, dt]])
        with np.errstate(over="ignore", invalid="ignore"):
            Q = self.accel**2 * G @ G.T
        if not np.all(np.isfinite(Q)):
            raise ValueError(f"step, accel: the process covariance (step^4 accel^2 / 4 and the like) overflows with "
                             f"step={self.step!r} and accel={self.accel!r}; express them in other units")
        return Q

    def observe_mean(self, X):
        return self.sensor.observe_mean(X)

    def observation_jacobian(self, x):
        jacobian = getattr(self.sensor, "position_jacobian", None)
        if jacobian is None:
            return super().observation_jacobian(x)
        return np.hstack([jacobian(np.asarray(x)[:2]), np.zeros((2, self.dim_x - 2))])

    def observation_loglik(self, z, X):
        return self.sensor.observation_loglik(z, X)

    def observation_residual(self, a, b):
        residual = getattr(self.sensor, "residual", None)
        return np.subtract(a, b) if residual is None else residual(a, b)

    def observation_average(self, Z, weights):
        average = getattr(self.sensor, "average", None)
        return super().observation_average(Z, weights) if average is None else average(Z, weights)

    def _first_belief(self, z0):
        belief = getattr(self.sensor, "position_belief", None)
        if belief is None:
            raise NotImplementedError(f"{type(self.sensor).__name__} says no position from one observation")
        position, cov = belief(z0)
        mean = np.zeros(self.dim_x)
        mean[:2] = position
        full = np.diag(np.full(self.dim_x, self.speed**2))
        full[:2, :2] = cov
        return mean, full

    def two_point_belief(self, z_before, z, steps=1):
        """The belief two observations ``steps`` apart say: the position of the later one and the
        velocity of the difference (two-point differencing, Bar-Shalom, Li and Kirubarajan 2001).

        Where one observation cannot tell a velocity, two can: a tracker re-initiates a lost track
        this way rather than assuming the vehicle at rest.

        Parameters
        ----------
        z_before, z : array-like of shape (2,)
            The earlier and the later observation.
        steps : int, default=1
            Steps between them.

        Returns
        -------
        mean : ndarray of shape (dim_x,)
            The later position and the mean velocity between the two (other coordinates as
            :meth:`initial_belief` sets them).
        cov : ndarray of shape (dim_x, dim_x)
            The errors of both positions carried through the difference, and the velocity's change
            over the interval under the model's acceleration noise.
        """
        steps = check_int(steps, "steps", minimum=1)
        belief = getattr(self.sensor, "position_belief", None)
        if belief is None:
            raise NotImplementedError(f"{type(self.sensor).__name__} says no position from one observation")
        (p0, C0), (p1, C1) = belief(z_before), belief(z)
        dt = steps * self.step
        mean, cov = self.initial_belief(z)
        mean[2:4] = (p1 - p0) / dt
        cov[:4, :4] = 0.0
        cov[:2, :2] = C1
        cov[:2, 2:4] = cov[2:4, :2] = C1 / dt
        # the velocity at the later fix differs from the mean velocity between the fixes by up to
        # the acceleration over the interval
        cov[2:4, 2:4] = (C0 + C1) / dt**2 + (self.accel * dt) ** 2 * np.eye(2)
        return mean, cov

    def initial_state(self, rng):
        # where a simulated run starts: the origin, at a speed drawn from the first belief
        x = np.zeros(self.dim_x)
        x[2:4] = self.speed * check_rng(rng, "rng").standard_normal(2)
        return x

    @staticmethod
    def _training_tracks(tracks):
        """``tracks`` as a list of (n_i, 4) arrays of at least two rows; one array is one track."""
        if isinstance(tracks, np.ndarray) and tracks.ndim == 2:
            tracks = [tracks]
        if not isinstance(tracks, Iterable):
            raise ValueError(f"tracks: expected a list of (n_i, 4) arrays (a TrackSet's .tracks), got "
                             f"{type(tracks).__name__}")
        tracks = [check_matrix(t, f"tracks[{i}]", n_features=4, min_samples=2) for i, t in enumerate(tracks)]
        if not tracks:
            raise ValueError("tracks: expected at least one training track, got none")
        return tracks

    @staticmethod
    def _fitted_accel(tracks, step):
        """``accel`` on training tracks: the RMS velocity change a step over the step."""
        changes = np.concatenate([np.diff(t[:, 2:], axis=0) for t in tracks])
        accel = float(np.sqrt(np.mean(changes**2))) / step
        if not accel > 0:
            # a model that never expects a change of velocity trusts its prediction over every observation
            raise ValueError("tracks: no velocity changes from one row to the next on any training track, so the "
                             "acceleration noise would be 0; pass tracks that manoeuvre, or build the model with "
                             "a chosen accel")
        return accel


@persistent("step", "accel", "sensor", "speed", holds={"sensor": ("PositionFixes", "RangeBearing")})
class ConstantVelocity(_TrackingModel):
    """Constant velocity with white acceleration, seen through :class:`PositionFixes` or a
    :class:`RangeBearing` radar.

    Parameters
    ----------
    step : float
        Seconds between steps.
    accel : float
        ``sigma_a``, the standard deviation of each acceleration component, m/s^2 (see
        :meth:`fitted` for the rule that chooses it on training tracks).
    sensor : PositionFixes or RangeBearing, optional
        The sensor; ``PositionFixes(5.0)`` by default.
    speed : float
        The standard deviation of each velocity component in the first belief (which takes its
        position from the first observation and assumes no velocity), m/s.

    Examples
    --------
    >>> cv = ConstantVelocity(step=10.0, accel=0.5)
    >>> cv.transition_mean([[0.0, 0.0, 10.0, -5.0]])
    array([[100., -50.,  10.,  -5.]])
    """

    dim_x = 4

    def __init__(self, step=10.0, accel=1.0, sensor=None, speed=100.0):
        self.step = check_model_scale(step, "step")
        self.accel = check_model_scale(accel, "accel")
        self._set_sensor(sensor)
        self.speed = check_model_scale(speed, "speed")
        dt = self.step
        self.F = np.array([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float64)
        self.process_cov = self._acceleration_cov()

    @classmethod
    def fitted(cls, tracks, step, sensor=None, speed=100.0):
        """The model with ``accel`` chosen on training tracks: the root mean square of the recorded
        velocity changes a step, divided by the step (both axes pooled).

        Parameters
        ----------
        tracks : list of ndarray of shape (n_i, 4), or one such array
            Training tracks (never the test tracks).
        step : float
            Seconds between their rows.
        sensor : PositionFixes or RangeBearing, optional
            The sensor.
        speed : float
            As for the constructor.

        Returns
        -------
        ConstantVelocity
            The model.
        """
        step = check_positive(step, "step")
        return cls(step, cls._fitted_accel(cls._training_tracks(tracks), step), sensor, speed)

    def transition_mean(self, X):
        return np.atleast_2d(X) @ self.F.T

    def transition_jacobian(self, x):
        return self.F

    def initial_belief(self, z0):
        return self._first_belief(z0)


@persistent("step", "accel", "turn_noise", "sensor", "speed", "turn", "turning",
            holds={"sensor": ("PositionFixes", "RangeBearing")})
class CoordinatedTurn(_TrackingModel):
    """The coordinated turn: constant speed on a circle of turn rate ``omega``, with white
    acceleration and a turn rate that wanders (Bar-Shalom, Li and Kirubarajan 2001).

    The state is ``(east, north, east velocity, north velocity, omega)``; a step rotates the
    velocity by ``omega * step`` (a positive ``omega`` turns left, counterclockwise seen from
    above) and moves the position along the arc. ``turning=False`` holds the
    turn rate at zero instead (constant velocity in the same state): the straight mode of an
    interacting multiple model (:class:`~kbfilter.filters.InteractingMultipleModel`) that mixes it
    with the turning one.

    Parameters
    ----------
    step : float
        Seconds between steps.
    accel : float
        ``sigma_a``, the standard deviation of each acceleration component, m/s^2.
    turn_noise : float
        The standard deviation of the turn rate's change a step, rad/s (see :meth:`fitted`).
    sensor : PositionFixes or RangeBearing, optional
        The sensor; ``PositionFixes(5.0)`` by default.
    speed : float
        The standard deviation of each velocity component in the first belief, m/s.
    turn : float
        The standard deviation of the turn rate in the first belief (which assumes 0), rad/s.
    turning : bool, default=True
        False holds the turn rate at 0 (the straight mode).

    Examples
    --------
    >>> import numpy as np
    >>> ct = CoordinatedTurn(step=1.0, accel=0.1, turn_noise=0.01)
    >>> x = ct.transition_mean([[100.0, 0.0, 0.0, 10.0, np.pi / 2]])[0]   # a quarter turn a second
    >>> np.round(x, 6)
    array([ 93.633802,   6.366198, -10.      ,   0.      ,   1.570796])
    """

    dim_x = 5

    def __init__(self, step=10.0, accel=1.0, turn_noise=0.01, sensor=None, speed=100.0, turn=0.05, turning=True):
        self.step = check_model_scale(step, "step")
        self.accel = check_model_scale(accel, "accel")
        self.turn_noise = check_model_scale(turn_noise, "turn_noise")
        self._set_sensor(sensor)
        self.speed = check_model_scale(speed, "speed")
        self.turn = check_model_scale(turn, "turn")
        self.turning = check_bool(turning, "turning")
        self.process_cov = np.zeros((5, 5))
        self.process_cov[:4, :4] = self._acceleration_cov()
        self.process_cov[4, 4] = self.turn_noise**2

    @classmethod
    def fitted(cls, tracks, step, sensor=None, speed=100.0, turn=0.05, turning=True, min_speed=1.0):
        """The model with its noises chosen on training tracks.

        ``accel`` is :meth:`ConstantVelocity.fitted`'s (the RMS velocity change a step over the
        step); ``turn_noise`` the RMS change a step of the recorded turn rate, where the turn rate
        of a step is the heading change over it (wrapped) divided by the step, counted only where
        the speed is at least ``min_speed`` at both ends (a target at rest has no heading).

        Parameters
        ----------
        tracks : list of ndarray of shape (n_i, 4), or one such array
            Training tracks (never the test tracks).
        step : float
            Seconds between their rows.
        sensor, speed, turn, turning
            As for the constructor.
        min_speed : float, default=1.0
            The slowest speed whose heading counts, m/s.

        Returns
        -------
        CoordinatedTurn
            The model.
        """
        step = check_positive(step, "step")
        tracks = cls._training_tracks(tracks)
        accel = cls._fitted_accel(tracks, step)
        changes = []
        for track in tracks:
            v = track[:, 2:]
            moving = np.hypot(v[:, 0], v[:, 1]) >= min_speed
            rate = wrapped_angle(np.diff(np.arctan2(v[:, 0], v[:, 1]))) / step
            valid = moving[:-1] & moving[1:]
            rate = np.where(valid, rate, np.nan)
            changes.append(np.diff(rate))
        changes = np.concatenate(changes)
        changes = changes[np.isfinite(changes)]
        turn_noise = float(np.sqrt(np.mean(changes**2))) if changes.size else turn
        return cls(step, accel, max(turn_noise, 1e-6), sensor, speed, turn, turning)

    def transition_mean(self, X):
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        e, n, ve, vn, w = X.T
        if not self.turning:
            return np.column_stack([e + self.step * ve, n + self.step * vn, ve, vn, np.zeros_like(w)])
        wt = w * self.step
        s, c = np.sin(wt), np.cos(wt)
        small = np.abs(wt) < 1e-4
        safe = np.where(small, 1.0, w)
        # sin(wT)/w and (1 - cos(wT))/w, by their series where wT is tiny (no 0/0 on straight tracks)
        along = np.where(small, self.step * (1 - wt**2 / 6), s / safe)
        across = np.where(small, self.step * wt / 2 * (1 - wt**2 / 12), (1 - c) / safe)
        return np.column_stack([e + along * ve - across * vn, n + across * ve + along * vn,
                                c * ve - s * vn, s * ve + c * vn, w])

    def initial_belief(self, z0):
        mean, cov = self._first_belief(z0)
        cov[4, 4] = self.turn**2
        return mean, cov


def dropouts(observations, rng=None, rate=0.05, length=(1, 20)):
    """Observations with stretches missing: each step after the first starts a dropout with
    probability ``rate``.

    Parameters
    ----------
    observations : array-like of shape (T, d)
        The observations.
    rng : int, Generator or None
        The random numbers.
    rate : float in [0, 1], default=0.05
        The chance that a dropout starts at a step (outside a dropout); 0 leaves every
        observation in.
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
    rng = check_rng(rng, "rng")
    rate = check_positive(rate, "rate", allow_zero=True)
    if rate > 1:
        raise ValueError(f"rate: expected a probability in [0, 1], got {rate!r}")
    if isinstance(length, (str, bytes)) or np.ndim(length) != 1 or len(length) != 2:
        raise ValueError(f"length: expected (shortest, longest), got {length!r}")
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
