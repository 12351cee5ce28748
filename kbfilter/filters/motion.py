"""Learned motion that transfers: the law of the step ``x_{t+1} - x_t`` given what it depends on,
and a particle filter that moves by it.

The kernel Bayes filter learns the transition as weights over the training states, so its belief
can never leave them: a track that goes where the log did not go is lost. Here the transition is
learned in a frame that carries over. The step ``d_t = x_{t+1} - x_t`` is regressed on chosen
inputs ``a_t`` (the velocity, for a vehicle: not its position, unless the motion depends on where
it is) in two parts:

- a linear regression ``L`` on all the training pairs, which carries the structure every vehicle
  shares (a position moves by its velocity) and extrapolates it to inputs the log never held;
- the local law of what ``L`` misses: the offsets ``e_j = d_j - L(a_j)`` of the ``n_neighbors``
  training steps whose inputs are nearest to the query (each input column standardised), which
  carry the noise of the motion and whatever depends on the inputs non-linearly where the log has
  data, and stay bounded where it has none.

A draw of the next state is ``x' = x + L(a) + e_j``, with ``e_j`` the offset of one of the
particle's neighbours drawn at random: the nearest-neighbour estimate of the conditional law of
the offsets, so the draws' spread is the recorded one. Their mean, ``L(a)`` plus the neighbours'
mean offset, is where a k-point estimate goes wrong: neighbours that come from a few logged
vehicles carry those vehicles' accelerations, which a track in a dropout then integrates. By
default the neighbours' mean offset is shrunk towards zero, coordinate by coordinate, in the
proportion by which its square exceeds its own variance (the positive-part shrinkage of James
and Stein 1961): a drift that stands out of the noise of its k offsets is kept, one that does not
is dropped, and the spread is kept either way (see ``local_mean``).

Two simpler designs failed on a constant-velocity system and are not used: a local mean of the
neighbours' steps moved each particle by its neighbours' velocity rather than its own, and local
linear fits, extrapolated past the recorded velocities, accelerated particles without bound;
weighting the neighbours by a narrow kernel made duplicated particles draw the same offset, and
the resampled cloud collapsed.
"""

from collections import Counter

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator
from sklearn.linear_model import LinearRegression
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from .._validation import check_choice, check_fraction, check_int, check_matrix, check_memory, check_observation, \
    check_positive, check_rng, check_saved_matrix, check_sequences, check_state_samples, check_state_sequences
from ..embedding import weighted_covariance
from ..linalg import psd_solve
from ..persistence import Persistent, persistent, saved_before_fit
from ..systems.base import (checked_belief, finite_difference_jacobian, log_likelihood_of, model_jacobian,
                            observation_mean_of, sensor_residual)
from ..systems.linear import LinearGaussianSensor
from ..threads import limited_blas
from .base import (TUNING_RECORD, LearnedFilter, SharedModel, SharesFittedParts, check_loaded_estimates,
                   check_model_states, probe_loaded, tuning_record_holds)
from .likelihood import Innovation, Likelihood, SensorInnovation
from .particles import MAX_PARTICLES, DrawsFromOwnGenerator, HoldsParticles, ParticleBelief
from .reacquisition import ChiSquareGate, RecentObservations
from .smoothing import SmoothsParticleMoments

__all__ = ["LearnedMotion", "LearnedMotionModel", "LearnedMotionFilter", "MOTION_GRID", "PROPOSALS", "LOCAL_MEANS"]

#: the sensor models a saved learned-motion filter may hold
SENSORS = ("System", "PositionFixes", "RangeBearing", "LinearGaussianSensor")
#: how the learned-motion filter moves its particles when an observation comes (see its ``proposal``)
PROPOSALS = ("guided", "bootstrap")


def _neighbours_mean(offsets):
    """Each query's mean offset, shape ``(n, d)``, of its offsets, shape ``(n, k, d)``."""
    # einsum sums over the neighbours several times faster than mean(axis=1) with d innermost
    return np.einsum("nkd->nd", offsets) / offsets.shape[1]


def _shrunk(offsets):
    """Each query's offsets, shape ``(n, k, d)``, with their mean ``m`` shrunk towards zero a
    coordinate at a time, kept in the proportion ``max(0, 1 - (s^2 / k) / m^2)`` (``s^2 / k`` the
    variance of a k-point mean; James and Stein 1961); the spread about the mean is kept."""
    k = offsets.shape[1]
    mean = _neighbours_mean(offsets)
    squared = mean**2
    # E[e^2] - m^2 loses digits only where s^2 << m^2, where the proportion kept is 1 either way
    variance = np.maximum(np.einsum("nkd,nkd->nd", offsets, offsets) / k - squared, 0.0)
    ratio = np.divide(variance / k, squared, out=np.ones_like(squared), where=squared > 0)
    return offsets - (np.minimum(ratio, 1.0) * mean)[:, None, :]


def _centred(offsets):
    """Each query's offsets with their mean taken away: the neighbours give the spread only."""
    return offsets - _neighbours_mean(offsets)[:, None, :]


# each ``local_mean``'s rule, applied to the neighbours' offsets of every query
_LOCAL_MEAN_RULES = {"shrunk": _shrunk, "recorded": lambda offsets: offsets, "none": _centred}

#: what the learned motion can do with its neighbours' mean offset (see :class:`LearnedMotion`'s ``local_mean``)
LOCAL_MEANS = tuple(_LOCAL_MEAN_RULES)

#: the most times an update linearises the sensor (see ``LearnedMotionFilter._linearised_update``)
UPDATE_ITERATIONS = 20

#: the learned-motion filter's default tuning grid: the neighbours a draw comes from
MOTION_GRID = {"n_neighbors": (5, 10, 20, 40, 80)}


def _checked_neighbours(n_neighbors, steps):
    """``n_neighbors`` as an int, at most the ``steps`` training steps (their neighbours are taken)."""
    k = check_int(n_neighbors, "n_neighbors", minimum=1)
    if k > steps:
        raise ValueError(f"n_neighbors: expected at most the {steps} training steps, got {k}; pass a smaller "
                         f"n_neighbors or a longer log")
    return k


def _checked_columns(columns, dim_x, name):
    """``columns`` as distinct integer column indices below ``dim_x``."""
    given, columns = columns, np.asarray(columns).ravel()
    if columns.size == 0 or not np.issubdtype(columns.dtype, np.integer) or columns.min() < 0 \
            or columns.max() >= dim_x or len(set(columns.tolist())) != columns.size:
        raise ValueError(f"{name}: expected distinct column indices below {dim_x} (the state's dimension), "
                         f"got {given!r}")
    return columns


@persistent("steps_", "n_features_in_", "columns_", "n_neighbors_", "local_mean_", "inputs_", "scaler_", "coef_",
            "offsets_",
            holds={"scaler_": "StandardScaler"})
class LearnedMotion(Persistent, BaseEstimator):
    """The law of the next state learned from trajectories: a linear step plus neighbours' offsets.

    Parameters
    ----------
    inputs : sequence of int or None, default=None
        The state columns the step depends on; None: all of them. For a vehicle whose state is
        ``(east, north, v_east, v_north)``, ``inputs=(2, 3)`` learns a motion that holds anywhere.
    n_neighbors : int, default=30
        The training steps whose offsets a query draws from: fewer follow the local motion more
        closely, more give a smoother law.
    local_mean : {"shrunk", "recorded", "none"}, default="shrunk"
        The neighbours' mean offset ``m`` (what the step's mean adds to the linear part there):
        ``"shrunk"`` moves each neighbour's offset by ``-(1 - c) m`` with, coordinate by
        coordinate, ``c = max(0, 1 - s^2 / (k m^2))`` (``s^2`` the offsets' variance, ``k`` their
        number; James and Stein 1961); ``"recorded"`` keeps the offsets as recorded; ``"none"``
        centres them, so that the step's mean is the linear part and the neighbours give its
        spread only. Measured on recorded aircraft and ships: see the real-tracks study.

    Attributes
    ----------
    steps_ : ndarray of shape (n, dim_x)
        The training steps ``x_{t+1} - x_t``.
    coef_ : ndarray of shape (1 + n_inputs, dim_x)
        The linear part: intercept, then one row per input.
    offsets_ : ndarray of shape (n, dim_x)
        The steps' offsets from the linear part, which a draw samples among the neighbours.
    scaler_ : sklearn.preprocessing.StandardScaler
        Standardises the inputs before neighbours are looked up.
    inputs_ : ndarray of shape (n, n_inputs)
        The training steps' inputs (the neighbour index is built on them, and rebuilt on load).

    Examples
    --------
    >>> import numpy as np
    >>> v = np.tile([2.0, 3.0, 4.0], 100)                         # a velocity that cycles
    >>> track = np.column_stack([np.r_[0.0, np.cumsum(v)[:-1]], v])   # position moves by v
    >>> motion = LearnedMotion(inputs=(1,), n_neighbors=10).fit(track)
    >>> motion.sample_transition([[1e6, 3.0]], rng=0)             # far from anything in training
    array([[1.000003e+06, 4.000000e+00]])
    """

    def __init__(self, inputs=None, n_neighbors=30, local_mean="shrunk"):
        self.inputs = inputs
        self.n_neighbors = n_neighbors
        self.local_mean = local_mean

    def _columns(self, dim_x):
        if self.inputs is None:
            return np.arange(dim_x)
        return _checked_columns(self.inputs, dim_x, "inputs")

    @limited_blas
    def fit(self, states):
        """Learn the steps of one trajectory or a list of them.

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            The training trajectories (rows one step apart).

        Returns
        -------
        self : LearnedMotion
            The fitted motion.
        """
        xs = check_state_sequences(states)
        self.local_mean_ = check_choice(self.local_mean, "local_mean", LOCAL_MEANS)
        before = np.vstack([x[:-1] for x in xs])
        self.steps_ = np.vstack([np.diff(x, axis=0) for x in xs])
        self.n_features_in_ = before.shape[1]
        self.columns_ = self._columns(before.shape[1])
        self.n_neighbors_ = _checked_neighbours(self.n_neighbors, len(before))
        self.inputs_ = inputs = before[:, self.columns_]
        self.scaler_ = StandardScaler().fit(inputs)
        self._index()
        # the linear part, by least squares on [1, a] over every training pair; scikit-learn centres
        # the inputs first, so that positions far from the origin (map coordinates in metres) do
        # not ruin the solve's conditioning as a column of ones beside them would
        fit = LinearRegression().fit(inputs, self.steps_)
        self.coef_ = np.vstack([fit.intercept_, fit.coef_.T])
        self.offsets_ = self.steps_ - fit.predict(inputs)
        return self

    def _index(self):
        self.index_ = NearestNeighbors(n_neighbors=self.n_neighbors_).fit(self.scaler_.transform(self.inputs_))

    def _after_load(self):
        if saved_before_fit(self, "steps_"):
            return
        # a file's fields must agree, and hold values fit could have learned, before the index is
        # built on them
        d = check_int(self.n_features_in_, "n_features_in_")
        columns = _checked_columns(self.columns_, d, "columns_")
        arrays = {"steps_": d, "inputs_": len(columns), "offsets_": d, "coef_": d}
        for name, width in arrays.items():
            check_saved_matrix(getattr(self, name, None), name, n_features=width, allow_1d=False)
        n = len(self.steps_)
        if not (len(self.inputs_) == len(self.offsets_) == n and len(self.coef_) == len(columns) + 1):
            raise ValueError("LearnedMotion: the saved steps, inputs, offsets and coefficients disagree")
        check_int(self.n_neighbors_, "n_neighbors_", maximum=n)
        check_choice(self.local_mean_, "local_mean_", LOCAL_MEANS)
        self._index()

    def _linear_next(self, X):
        """The inputs of states ``X`` (checked) and their next states by the linear part alone,
        ``x + L(a)``."""
        check_is_fitted(self, "steps_")
        X = check_matrix(X, "X", n_features=self.n_features_in_)
        inputs = X[:, self.columns_]
        return inputs, X + self.coef_[0] + inputs @ self.coef_[1:]

    def _neighbours(self, inputs):
        return self.index_.kneighbors(self.scaler_.transform(inputs), return_distance=False)

    def _local_offsets(self, inputs):
        """The offsets of each query's neighbours, shape ``(n, n_neighbors, dim_x)``, their mean
        moved as ``local_mean`` says."""
        return _LOCAL_MEAN_RULES[self.local_mean_](self.offsets_[self._neighbours(inputs)])

    def mean_step(self, X):
        """The learned mean step ``m(a)`` at states ``X``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n, dim_x)
            ``E[x_{t+1} - x_t | a_t]`` at each.
        """
        check_is_fitted(self, "steps_")
        X = check_matrix(X, "X", n_features=self.n_features_in_)
        inputs = X[:, self.columns_]
        return self.coef_[0] + inputs @ self.coef_[1:] + _neighbours_mean(self._local_offsets(inputs))

    def linear_part(self):
        """The motion's linear part as a linear-Gaussian transition ``x' = F x + c + N(0, Q)``:
        the step's regression on the inputs, with the covariance of every training step's offset
        as the noise.

        Returns
        -------
        F : ndarray of shape (dim_x, dim_x)
            ``I`` plus the regression's coefficients in the inputs' columns.
        c : ndarray of shape (dim_x,)
            The regression's intercept.
        Q : ndarray of shape (dim_x, dim_x)
            The offsets' covariance.
        """
        check_is_fitted(self, "steps_")
        F = np.eye(self.n_features_in_)
        F[:, self.columns_] += self.coef_[1:].T
        Q = np.cov(self.offsets_, rowvar=False).reshape(F.shape)
        return F, self.coef_[0].copy(), Q

    def candidates(self, X):
        """The next states the law allows from each row of ``X``: one per neighbour's offset.

        The learned law of ``x'`` given ``x`` is the uniform mixture of these points, so a filter
        that knows the observation can choose among them (see :class:`LearnedMotionFilter`).

        Parameters
        ----------
        X : array-like of shape (n, dim_x)
            Current states.

        Returns
        -------
        ndarray of shape (n, n_neighbors, dim_x)
            ``x + L(a) + e_j`` for each row and each of its neighbours ``j``, nearest first.
        """
        inputs, linear = self._linear_next(X)
        return linear[:, None, :] + self._local_offsets(inputs)

    def sample_transition(self, X, rng=None, u=None):
        """A draw of the next state for each row of ``X`` (the motion model's interface).

        Parameters
        ----------
        X : array-like of shape (n, dim_x)
            Current states.
        rng : int, Generator or None
            The random numbers.
        u : None
            Controls are not learned here; must be None.

        Returns
        -------
        ndarray of shape (n, dim_x)
            ``x + L(a) + e_j`` for each row.
        """
        check_is_fitted(self, "steps_")
        if u is not None:
            raise ValueError("u: LearnedMotion learns no control; expected None")
        rng = check_rng(rng, "rng")
        inputs, linear = self._linear_next(X)
        offsets = self._local_offsets(inputs)
        return linear + offsets[np.arange(len(linear)), rng.integers(offsets.shape[1], size=len(linear))]


@persistent("motion", "sensor", "states", "obs_shape", "gate",
            holds={"motion": "LearnedMotion", "sensor": SENSORS, "gate": "ChiSquareGate"})
class LearnedMotionModel(SharedModel):
    """What :meth:`LearnedMotionFilter.fit` learns, read-only once built and shared by the copies of
    the filter (one a track).

    Parameters
    ----------
    motion : LearnedMotion
        The fitted motion.
    sensor : object
        The sensor the filter weighs by.
    states : ndarray of shape (n, dim_x)
        The training states.
    obs_shape : tuple of int
        The shape of one observation.
    gate : ChiSquareGate or None
        The reacquisition gate (see the filter's ``reacquire``).
    """

    def __init__(self, motion, sensor, states, obs_shape, gate=None):
        # built by fit, and by load from a file, which is untrusted input
        self.states = check_saved_matrix(states, "states")
        if getattr(motion, "n_features_in_", None) != self.states.shape[1]:
            raise ValueError(f"motion: expected a motion fitted on {self.states.shape[1]}-dimensional states")
        self.motion, self.sensor = motion, sensor
        if not isinstance(obs_shape, tuple) or not obs_shape:
            raise ValueError(f"obs_shape: expected a tuple of sizes, got {obs_shape!r}")
        self.obs_shape = tuple(check_int(d, "obs_shape") for d in obs_shape)
        if gate is not None and gate.dim != int(np.prod(self.obs_shape)):
            raise ValueError(f"gate: expected the gate of a {int(np.prod(self.obs_shape))}-dimensional observation, "
                             f"got one of dimension {gate.dim}")
        self.gate = gate


@persistent("model_", "n_features_in_", "rng_state", "belief", "x", "P",
            "x_prior", "P_prior", "x_post", "P_post", "_started", "_recent", "_candidates", "_outside",
            *TUNING_RECORD,
            holds={"sensor": SENSORS, "model_": "LearnedMotionModel", "belief": "ParticleBelief",
                   "_recent": "RecentObservations", **tuning_record_holds(*SENSORS)})
class LearnedMotionFilter(Persistent, SharesFittedParts, HoldsParticles, SmoothsParticleMoments, DrawsFromOwnGenerator,
                          Likelihood, Innovation, LearnedFilter):
    """A particle filter that moves by motion learned from trajectories and weighs by a sensor model.

    The motion is :class:`LearnedMotion` (a linear step given ``inputs`` plus an offset drawn from
    the nearest training steps'), so the belief can leave the training states: a track in a place the log never
    visited is followed as long as it moves as the logged ones did. The observation's weight is the
    sensor's likelihood ``sensor.observation_loglik(z, X)``, e.g. a
    :class:`~kbfilter.systems.tracking.ConstantVelocity` model's (whose motion part is not used),
    or, given no sensor, that of the linear-Gaussian sensor learned from the training pairs.

    A copy (``copy.deepcopy``) has particles, a random generator and a history of its own and
    shares the fitted motion, sensor and training states with the filter it was copied from: a
    tracker keeps one copy a track (see :mod:`kbfilter.stonesoup`).

    Parameters
    ----------
    sensor : object with ``observation_loglik(z, X)``, or None, default=None
        The sensor model: ``observation_loglik(z, X)`` gives one real log density a row of ``X``
        (finite, or ``-inf`` where ``z`` is impossible; anything else is refused, the sensor
        named). When it also has ``initial_belief(z0)`` returning ``(mean, cov)``,
        ``batch_filter`` starts from that Gaussian (drawn once); otherwise from the training states.
        None learns it with the motion: ``z = H x + offset + N(0, R)`` by least squares on the
        training pairs (:meth:`~kbfilter.systems.LinearGaussianSensor.fitted`), a map that carries
        over to places the log never held, as the learned motion does; right for position fixes,
        not for a sensor whose observation bends with the state (give a radar's model).
    inputs, n_neighbors
        Of the :class:`LearnedMotion`.
    n_particles : int, default=1000
        Particles (at most :data:`~kbfilter.filters.particles.MAX_PARTICLES`).
    ess_threshold : float in (0, 1], default=0.5
        Resample when the effective sample size falls below this fraction of the particles.
    reacquire : float in (0, 1) or None, default=0.999
        Lost-track recovery, as trackers do it: when the observation lies outside this
        probability's gate around every particle's predicted observation (with the guided
        proposal, every candidate's; the squared Mahalanobis
        distance ``(z - h(x))^T R^{-1} (z - h(x))`` above the chi-square quantile, for a sensor
        with ``observe_mean``, ``observation_cov`` and ``initial_belief``), the particles are drawn
        afresh from the belief that the recent observations and this one say together, velocity
        included, as a tracker initiates a track from several scans: for a sensor with
        ``observation_jacobian`` (the tracking models, the learned sensor), the iterated extended
        Kalman filter of the observations of the last ``reacquire_window`` steps and this one, from
        ``sensor.initial_belief`` at the oldest, through the motion's linear part
        (:meth:`LearnedMotion.linear_part`); else the sensor's ``two_point_belief(z_before, z,
        steps)`` of the last observation and this one, when it has one; from
        ``sensor.initial_belief(z)`` alone otherwise. A sensor with ``observe_mean`` and
        ``observation_cov`` but no ``initial_belief`` (a bare
        :class:`~kbfilter.systems.tracking.PositionFixes` or
        :class:`~kbfilter.systems.tracking.RangeBearing`) restarts from the same Kalman filter of
        the recent observations, started before the oldest from each state coordinate's mean and
        variance over the training states, independently (their correlations, extrapolated to a
        fix far from every training state, would say a velocity the fixes do not); its
        ``observation_jacobian``, or central finite differences of ``observe_mean`` without one.
        When no observation is that recent, the last one serves. Counted as ``"reacquired"`` in
        ``diagnostics`` and warned about. None never does.
    reacquire_window : int, default=6
        The steps back whose observations a reacquisition starts from (see ``reacquire``).
        Two fixes one step apart say a velocity with the error of their difference (a radar's
        cross-range error of hundreds of metres makes it tens of m/s); more fixes say it better,
        until the vehicle has turned in between. Measured on the recorded aircraft seen by a
        radar: see the real-tracks study.
    reacquire_after : int, default=1
        How many observations in a row must lie outside every particle's gate before the track
        is taken as lost (see ``reacquire``). The ones before are taken as outliers, clutter or a
        sensor's glitch: left out, the prediction kept, and counted as ``"outlier"`` in
        ``diagnostics`` (a missing observation between them does not break the row, and they stay
        among the recent observations a restart starts from). 1 restarts at the first, which one
        bad fix then throws off; 2 takes it as an outlier, at the cost of a slower recovery when
        the target really has moved. Measured on simulated
        constant-velocity tracks with 3 m fixes (``python scenarios/fix_glitches.py``, 10 runs):
        over the ten steps from each of two fixes 500 m off, the position RMSE was 108 m with 1
        (14 restarts a track) and 3.1 m with 2 (3.0 m without the glitches); over the ten steps
        from a real jump of 500 m, 99 m with 1 and 180 m with 2.
    roughening : float or None, default=0.2
        After a resampling, move the particles by Gordon, Salmond and Smith's (1993) roughening
        with this constant (0.2 is theirs; see :meth:`~kbfilter.filters.particles.ParticleBelief.roughen`),
        so that copies of one particle are told apart; None or 0 does not. Measured with the
        bootstrap proposal on the recorded aircraft seen by a radar (10 splits), it took the
        position RMSE from 1,066 m to 822 m and the lost tracks from 59 to 31 of 262; on the
        Solent ships, level (30.0 and 30.1 m) with 5 tracks lost instead of 7.
    proposal : {"guided", "bootstrap"}, default="guided"
        How the particles move when an observation comes. The learned law of the next state is
        a uniform mixture of ``n_neighbors`` points (:meth:`LearnedMotion.candidates`), so the
        best proposal there is, the law given the observation too (Doucet, Godsill and Andrieu
        2000), can be drawn exactly: ``"guided"`` moves each particle to one of its candidates
        with probability proportional to the sensor's likelihood there, and weighs it by the
        mean likelihood of its candidates. ``"bootstrap"`` moves it to a candidate at random
        and weighs by the likelihood there (Gordon, Salmond and Smith 1993). Both filter the same
        model; the guided one wastes fewer particles when the sensor is sharper than the motion
        is certain (measured on the recorded aircraft seen by a radar: see the real-tracks study).
        A step without an observation moves the particles at random either way. The guided
        filter keeps the ``n_particles x n_neighbors`` candidates from a prediction to the update
        and evaluates the likelihood at each of them.
    degenerate_ess : float in (0, 1] or None, default=0.1
        The rule for an update the particles cannot represent: when the observation leaves fewer
        than this fraction of the particles effective (a sharp fix after a dropout has spread the
        cloud, so that a handful of particles, or one, carry all the weight, and the reported
        covariance collapses towards zero), the posterior is instead the iterated extended Kalman
        update (Bell and Cathey 1993) of the prediction's mean and covariance (over every
        candidate, with the guided proposal) by the sensor's Jacobian, and the particles are drawn
        afresh from it; counted as ``"degenerate"`` in ``diagnostics``. For a sensor with
        ``observe_mean``, ``observation_jacobian`` and ``observation_cov`` (the tracking models,
        the learned sensor); None never does. Where the covariance of the predicted observation is
        singular to working precision (fixes far sharper than the prediction in some direction),
        this update and the restart of a lost track condition through its pseudo-inverse, counted
        as ``"pseudo_inverse"``, as the Kalman filters count it.
        Measured on the recorded aircraft seen by a radar and on the Solent ships: see the
        real-tracks study.
    local_mean : {"shrunk", "recorded", "none"}, default="shrunk"
        Of the :class:`LearnedMotion` (its neighbours' mean offset, shrunk by default).
    random_state : int, Generator or None
        The random numbers; the same seed gives the same estimates.

    Attributes
    ----------
    model_ : LearnedMotionModel
        What fit learned, read-only and shared by the filter's copies: the next four.
    sensor_ : object
        The sensor the filter weighs by: ``sensor``, or the one learned when it is None.
    motion_ : LearnedMotion
        The learned motion.
    states_ : ndarray of shape (n, dim_x)
        The training states (a start drawn uniformly from them).
    gate_ : ChiSquareGate or None
        The gate of ``reacquire`` (:class:`~kbfilter.filters.reacquisition.ChiSquareGate`).
    log_likelihood : float or None
        ``log sum_j a_j p(z | x_j)`` over the predicted particles for the last observation given
        to :meth:`update` (the sensor's likelihood; None after a missing one), as the particle
        filter's; with the guided proposal ``p(z | x_j)`` is the mean over particle ``j``'s
        candidates, the likelihood under its law of the next state, exactly. Summed over a run,
        the log-likelihood of the observations under the learned motion. ``-inf`` when no
        particle gives the observation a positive likelihood.
    likelihood : float or None
        ``exp(log_likelihood)``, floored at the smallest positive float, as filterpy's.
    y, S, mahalanobis : ndarray, ndarray or float, or None
        filterpy's innovation of the last observation: its residual from the predicted particles'
        mean measurement, the predicted measurement's covariance (their spread plus the sensor's
        ``observation_cov``) and ``sqrt(y^T S^{-1} y)``, whose square is the NIS; computed when
        read. None where ``log_likelihood`` is, and for a sensor without ``observe_mean`` and
        ``observation_cov``.

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> from kbfilter.systems.tracking import ConstantVelocity
    >>> rng = np.random.default_rng(0)
    >>> v = np.cumsum(0.1 * rng.standard_normal((300, 2)), axis=0) + [5.0, 0.0]
    >>> track = np.hstack([np.cumsum(v, axis=0), v])                  # east, north, velocities
    >>> cv = ConstantVelocity(step=1.0, accel=0.1, speed=10.0)      # its sensor: fixes, 5 m noise
    >>> lmf = LearnedMotionFilter(cv, inputs=(2, 3), random_state=0).fit(track, track[:, :2])
    >>> far = track[:50] + [1e5, 1e5, 0.0, 0.0]                      # somewhere the log never went
    >>> means = lmf.batch_filter(cv.sensor.observe(far, rng=1))[0]
    >>> bool(np.sqrt(np.mean(np.sum((means[10:, :2] - far[10:, :2]) ** 2, axis=1))) < 10.0)
    True
    """

    #: no observation yet
    log_likelihood = None

    # copies (``copy.deepcopy``: one a track) share these
    _fitted_parts = ("model_", "sensor")

    _noise_source = "its sensor (sensor_.observation_cov) and the motion it learned"

    def __init__(self, sensor=None, inputs=None, n_neighbors=30, n_particles=1000, ess_threshold=0.5,
                 reacquire=0.999, reacquire_window=6, roughening=0.2, proposal="guided", degenerate_ess=0.1,
                 local_mean="shrunk", random_state=None, reacquire_after=1):
        self.reacquire_window = reacquire_window
        self.reacquire_after = reacquire_after
        self.degenerate_ess = degenerate_ess
        self.local_mean = local_mean
        self.proposal = proposal
        self.roughening = roughening
        self.sensor = sensor
        self.inputs = inputs
        self.n_neighbors = n_neighbors
        self.n_particles = n_particles
        self.ess_threshold = ess_threshold
        self.reacquire = reacquire
        self.random_state = random_state

    @limited_blas
    def fit(self, states, observations, *, controls=None):
        """Learn the motion from the training trajectories (the observations are the sensor's; they
        are checked against the states but the likelihood is ``sensor``'s).

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            Training trajectories.
        observations : array-like or list of array-like
            Their observations (row for row).
        controls : None
            Not supported.

        Returns
        -------
        self : LearnedMotionFilter
            The fitted filter, reset.
        """
        self._checked_settings()
        if controls is not None:
            raise ValueError("controls: LearnedMotionFilter learns no control; expected None")
        xs, zs, obs_shape = check_sequences(states, observations)
        if self.sensor is not None:
            sensor_shape = getattr(self.sensor, "obs_shape", None)
            if sensor_shape is not None and tuple(sensor_shape) != tuple(obs_shape):
                raise ValueError(f"observations: expected observations of the sensor's shape {tuple(sensor_shape)}, "
                                 f"got {tuple(obs_shape)}")
            check_model_states(self.sensor, xs[0], "sensor", observe=True)
        if self.sensor is None and len(obs_shape) != 1:
            # check_sequences hands back image rows flattened: the learned sensor would see vectors
            raise ValueError(f"observations: a linear sensor is learned from vectors, got observations of shape "
                             f"{tuple(obs_shape)}; give the filter a sensor model for them (sensor=...)")
        sensor = LinearGaussianSensor.fitted(xs, zs) if self.sensor is None else self.sensor
        gate = None
        # the gate needs the sensor's mean and noise, and so does a restart (see reacquire)
        if self.reacquire is not None and hasattr(sensor, "observation_cov") \
                and callable(getattr(sensor, "observe_mean", None)):
            gate = ChiSquareGate.of_noise(sensor.observation_cov, self.reacquire, "sensor.observation_cov")
        # every step holds each particle's candidate successors: their states, distances, indices and
        # log-likelihoods (a million particles with a thousand neighbours would have the process killed)
        dim_x = xs[0].shape[1]
        # a neighbourhood past the log would fail the memory check for another reason than its own
        _checked_neighbours(self.n_neighbors, sum(len(x) - 1 for x in xs))
        check_memory(8.0 * self.n_particles * self.n_neighbors * (dim_x + 3), "n_particles, n_neighbors",
                     f"{self.n_particles:,} particles with {self.n_neighbors:,} candidate successors each "
                     f"({dim_x}-dimensional states)")
        motion = LearnedMotion(self.inputs, self.n_neighbors, self.local_mean).fit(xs)
        self.model_ = LearnedMotionModel(motion, sensor, np.vstack(xs), obs_shape, gate)
        self.n_features_in_ = dim_x
        return self.reset()

    @property
    def motion_(self):
        """The learned motion: :class:`LearnedMotion`."""
        return self.model_.motion

    @property
    def sensor_(self):
        """The sensor the filter weighs by: ``sensor``, or the one learned when it is None."""
        return self.model_.sensor

    @property
    def states_(self):
        """The training states: ndarray of shape (n, dim_x)."""
        return self.model_.states

    @property
    def obs_shape_(self):
        """Shape of one training observation: tuple of int."""
        return self.model_.obs_shape

    @property
    def gate_(self):
        """The reacquisition gate: :class:`~kbfilter.filters.reacquisition.ChiSquareGate`, or None
        (no ``reacquire``, or a sensor without ``observe_mean`` and ``observation_cov``)."""
        return self.model_.gate

    def check_params(self):
        self._checked_settings()
        return self

    def _checked_settings(self):
        # the hyperparameters, checked at fit and again when a file is loaded
        if self.sensor is not None and not callable(getattr(self.sensor, "observation_loglik", None)):
            raise ValueError(f"sensor: expected a sensor model with observation_loglik(z, X) or None, got "
                             f"{type(self.sensor).__name__}")
        check_int(self.n_particles, "n_particles", minimum=2, maximum=MAX_PARTICLES)
        check_int(self.n_neighbors, "n_neighbors", minimum=1)
        check_int(self.reacquire_window, "reacquire_window", minimum=1)
        check_int(self.reacquire_after, "reacquire_after", minimum=1)
        check_choice(self.proposal, "proposal", PROPOSALS)
        check_choice(self.local_mean, "local_mean", LOCAL_MEANS)
        check_fraction(self.ess_threshold, "ess_threshold")
        check_rng(self.random_state)  # before any work (reset draws from it)
        if self.degenerate_ess is not None:
            check_fraction(self.degenerate_ess, "degenerate_ess")
        if self.roughening is not None:
            check_positive(self.roughening, "roughening", allow_zero=True)
        if self.reacquire is not None:
            check_fraction(self.reacquire, "reacquire", below_one=True, what=" or None")

    def _grid_for(self, obs_shape):
        return MOTION_GRID

    def reset(self, prior=None):
        """Draw the particles afresh and restart the random generator from ``random_state``.

        Parameters
        ----------
        prior : (mean, cov), array-like of shape (m, dim_x) or (dim_x,), optional
            A Gaussian to draw the particles from, or samples of the initial state (one state, of
            shape (dim_x,), is one sample): ``m = n_particles`` samples are the particles, and
            otherwise ``n_particles`` are drawn from them uniformly with the filter's random
            numbers (with replacement when ``m < n_particles``). By default the particles are drawn
            uniformly from the training states.

        Returns
        -------
        self : LearnedMotionFilter
            The filter with its new particles.
        """
        check_is_fitted(self, "model_")
        self._checked_settings()  # set_params after fit reaches here first: a bad value is named
        self._events = Counter()
        self._rng = check_rng(self.random_state)
        self._started = prior is not None
        self.log_likelihood = self._measured = None
        self._recent = RecentObservations(self.reacquire_window)
        self._candidates = None
        self._outside = 0
        self.belief = self._drawn(prior)
        self._estimate_particles("prior", "post")
        return self

    def _drawn(self, prior):
        """The particles of ``prior`` (see :meth:`reset`)."""
        N, d = self.n_particles, self.n_features_in_
        if prior is None:
            return ParticleBelief.drawn_from(self.states_, N, self._rng)
        if isinstance(prior, tuple) and len(prior) == 2:
            return ParticleBelief.drawn_from_gaussian(prior, d, N, self._rng)
        samples = check_state_samples(prior, "prior", d)
        # samples of another number than the particles are drawn from, as the training states are
        return ParticleBelief(samples) if len(samples) == N else ParticleBelief.drawn_from(samples, N, self._rng)

    def _start_batch(self, zs):
        # like the Kalman filters: a first belief from the first observation, when the sensor gives one
        start = getattr(self.sensor_, "initial_belief", None)
        if self._started or zs[0] is None or not callable(start):
            return 0, []
        z0 = check_observation(zs[0], self.obs_shape_, "zs[0]").reshape(self.obs_shape_)
        try:
            belief = self._sensor_belief("initial_belief", z0)
        except NotImplementedError:
            return 0, []
        self.reset(prior=belief)
        self._recent = self._recent.with_observation(z0)
        return 1, [(self.x.copy(), self.P.copy(), self.x.copy(), self.P.copy())]

    def _after_load(self):
        super()._after_load()
        self._checked_settings()
        if saved_before_fit(self, "model_"):
            return
        # observations in a row outside every particle's gate (a file saved before the row was kept has none)
        self._outside = check_int(getattr(self, "_outside", 0), "_outside", minimum=0)
        d = self.n_features_in_
        if self.states_.shape[1] != d or self.belief.particles.shape[1] != d:
            raise ValueError(f"LearnedMotionFilter: the saved motion, particles and training states disagree on "
                             f"the state's dimension ({d})")
        C = getattr(self, "_candidates", None)
        if C is not None and not (isinstance(C, np.ndarray) and C.ndim == 3 and C.dtype.kind == "f"
                                  and C.shape[0] == len(self.belief.particles) and C.shape[2] == d
                                  and np.all(np.isfinite(C))):
            raise ValueError(f"LearnedMotionFilter: the saved candidates are not finite states, one row of "
                             f"dimension {d} per particle")
        recent = self._recent.observations
        if recent is not None and recent.shape[1:] != tuple(self.obs_shape_):
            raise ValueError(f"LearnedMotionFilter: the saved recent observations are not of the sensor's shape "
                             f"{tuple(self.obs_shape_)}")
        check_loaded_estimates(self, d)
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one prediction, and one update where the sensor says what it would see (see probe_loaded)
        filt.predict()
        observe = getattr(filt.sensor_, "observe_mean", None)
        if callable(observe):
            filt.update(np.asarray(observe(filt.states_[:1]))[0])
        return filt.x, filt.P

    def _chosen(self, candidates, loglik, particle_loglik):
        """Each particle's candidate drawn with probability proportional to its likelihood (a
        particle none of whose candidates explains the observation has weight 0 and keeps its draw)."""
        particles = self.belief.particles.copy()
        rows = np.flatnonzero(np.isfinite(particle_loglik))
        cumulative = np.cumsum(np.exp(loglik[rows] - loglik[rows].max(axis=1, keepdims=True)), axis=1)
        u = self._rng.random(rows.size)[:, None] * cumulative[:, -1:]
        picks = np.minimum(np.sum(cumulative < u, axis=1), loglik.shape[1] - 1)
        particles[rows] = candidates[rows, picks]
        return particles

    def _lost(self, z, points):
        """True when ``z`` is outside the reacquisition gate of every point (the particles or
        their candidates)."""
        if self.gate_ is None:
            return False
        return not self.gate_.admits_any(sensor_residual(self.sensor_, z, self._sensor_mean(points)))

    @property
    def _obs_size(self):
        """The number of values in one observation: int."""
        return int(np.prod(self.obs_shape_))

    def _sensor_mean(self, X):
        """The sensor's ``observe_mean`` of states, checked: one finite row of the observation's
        size a state (a sensor of one's own is named, not met as numpy's broadcasting error)."""
        return observation_mean_of(self.sensor_, X, self._obs_size)

    def _sensor_belief(self, method, *args):
        """The sensor's ``initial_belief(z)`` or ``two_point_belief(...)``, checked to be a Gaussian
        of the state's size."""
        return checked_belief(getattr(self.sensor_, method)(*args), self.sensor_, method, self.n_features_in_)

    def _sensor_jacobian(self, x):
        """The sensor's ``observation_jacobian`` at ``x``, checked; central finite differences of its
        ``observe_mean`` for a sensor without one."""
        shape = (self._obs_size, len(x))
        jacobian = getattr(self.sensor_, "observation_jacobian", None)
        if callable(jacobian):
            return model_jacobian(np.atleast_2d(jacobian(x)), self.sensor_, "observation_jacobian", shape)
        return model_jacobian(finite_difference_jacobian(self._sensor_mean, x), self.sensor_,
                              "observe_mean (its finite differences)", shape)

    def _linearisable(self):
        """Whether the sensor says enough for an extended Kalman update."""
        sensor = self.sensor_
        return (callable(getattr(sensor, "observe_mean", None))
                and callable(getattr(sensor, "observation_jacobian", None)) and hasattr(sensor, "observation_cov"))

    def _degenerate(self):
        """True when the weights just computed leave fewer effective particles than
        ``degenerate_ess`` allows and the sensor can be linearised."""
        return (self.degenerate_ess is not None and self.belief.ess < self.degenerate_ess * len(self.belief.weights)
                and self._linearisable())

    def _linearised_update(self, z, mean, cov):
        """The iterated extended Kalman update of ``N(mean, cov)`` by ``z``, as ``(mean, cov)``
        (Bell and Cathey 1993): the sensor is linearised at the prior's mean, then again at each
        new mean, Gauss-Newton steps towards the posterior's mode, until the mean moves by less
        than a millionth of the prior's spread (at most ``UPDATE_ITERATIONS`` times). The first
        step is the extended Kalman update, which a linear sensor's second confirms. Iterating
        matters where the prior is wide against the sensor's curvature: after a dropout under a
        radar, one linearisation at a predicted position kilometres off put a restarted track
        5 km from its fix."""
        R = check_matrix(self.sensor_.observation_cov, "sensor.observation_cov")
        x = mean
        for _ in range(UPDATE_ITERATIONS):
            H = self._sensor_jacobian(x)
            K, singular = psd_solve(H @ cov @ H.T + R, H @ cov)
            K = K.T
            if singular:
                self._record("pseudo_inverse", "the covariance of the predicted observation (H P H^T + R) was "
                                               "singular to working precision; conditioned through its pseudo-inverse")
            innovation = sensor_residual(self.sensor_, z, self._sensor_mean(x[None])[0]) - H @ (mean - x)
            x, moved = mean + K @ innovation, x
            if np.all(np.abs(x - moved) <= 1e-6 * np.sqrt(np.diag(cov))):
                break
        A = np.eye(len(mean)) - K @ H
        P = A @ cov @ A.T + K @ R @ K.T  # Joseph's form: symmetric and positive whatever K's round-off
        return x, 0.5 * (P + P.T)

    def _reacquired_belief(self):
        """The Gaussian a lost track restarts from: what the recent observations, the last one
        included, say together (a vehicle that outran its particles keeps its speed; see
        ``reacquire``)."""
        Z, ages = self._recent.observations, self._recent.ages
        steps = -np.diff(ages, prepend=ages[0])  # the steps before each observation: none before the oldest
        if not callable(getattr(self.sensor_, "initial_belief", None)):
            # no belief of the sensor's own (a bare PositionFixes): each coordinate as the
            # training states spread it, without their correlations (see reacquire)
            prior = self.states_.mean(axis=0), np.diag(self.states_.var(axis=0))
            return self._kalman_of(Z, steps, *prior)
        if len(Z) > 1 and self._linearisable():
            return self._kalman_of(Z[1:], steps[1:], *self._sensor_belief("initial_belief", Z[0]))
        two_point = getattr(self.sensor_, "two_point_belief", None)
        if len(Z) > 1 and callable(two_point) and ages[-2] > 0:
            try:
                return self._sensor_belief("two_point_belief", Z[-2], Z[-1], int(ages[-2]))
            except NotImplementedError:
                pass
        return self._sensor_belief("initial_belief", Z[-1])

    def _kalman_of(self, Z, steps, mean, cov):
        """The iterated extended Kalman filter of the observations ``Z`` from ``N(mean, cov)``,
        moved ``steps[i]`` steps through the motion's linear part before ``Z[i]``."""
        F, c, Q = self.motion_.linear_part()
        for z, n in zip(Z, steps):
            for _ in range(n):
                mean, cov = F @ mean + c, F @ cov @ F.T + Q
            mean, cov = self._linearised_update(z, mean, cov)
        return mean, cov

    def _control_dimension(self):
        return 0

    @limited_blas
    def predict(self, u=None):
        """Move every particle by a draw of the learned motion.

        Parameters
        ----------
        u : None
            Not supported.
        """
        check_is_fitted(self, "model_")
        if u is not None:
            raise ValueError("u: LearnedMotion learns no control; expected None")
        self._started = True
        self._recent = self._recent.aged()
        before = self.belief.particles
        if self.proposal == "guided":
            # the prediction reported is a draw of the law, as the bootstrap filter's; an update
            # chooses among the candidates again, knowing the observation
            C = self.motion_.candidates(before)
            n, k = C.shape[:2]
            self.belief.particles = C[np.arange(n), self._rng.integers(k, size=n)]
            self._candidates = C
        else:
            self.belief.particles = self.motion_.sample_transition(before, self._rng)
        self._moved(before)
        self._estimate_particles("prior")

    @limited_blas
    def update(self, z):
        """Weigh the particles by the sensor's likelihood of ``z`` (with the guided proposal, move
        each to the candidate ``z`` favours and weigh it by its candidates' mean likelihood);
        resample when the ESS is low.

        Parameters
        ----------
        z : array-like or None
            The observation; None (missing) keeps the prediction.
        """
        check_is_fitted(self, "model_")
        self._started = True
        self.log_likelihood = self._measured = None
        # the candidates of the last prediction (guided proposal), or None: the particles are weighed
        candidates, self._candidates = self._candidates, None
        if z is None:
            self._keep_prediction()
            return
        z = check_observation(z, self.obs_shape_).reshape(self.obs_shape_)
        points = self.belief.particles if candidates is None else candidates.reshape(-1, candidates.shape[-1])
        # each candidate carries its particle's weight shared equally among the particle's candidates
        k = 1 if candidates is None else candidates.shape[1]
        point_weights = np.repeat(self.belief.weights / k, k)
        self._measured = SensorInnovation(self.sensor_, z.ravel(), points, point_weights)
        loglik = log_likelihood_of(self.sensor_, z, points)
        if candidates is not None:
            loglik = loglik.reshape(candidates.shape[:2])
            # a particle's weight is the likelihood of the observation under its law of the next
            # state: the mean over its candidates
            particle_loglik = logsumexp(loglik, axis=1) - np.log(loglik.shape[1])
        else:
            particle_loglik = loglik
        self.log_likelihood = self.belief.log_predictive(particle_loglik)
        self._recent = self._recent.with_observation(z)
        self._outside = self._outside + 1 if self._lost(z, points) else 0
        if 0 < self._outside < self.reacquire_after:
            # one fix far from the whole track is more often clutter than a jump: left out until
            # reacquire_after of them in a row say the target is elsewhere
            self._record("outlier", f"the observation was outside the gate of every particle: taken as an outlier "
                                    f"(the prediction kept) until {self.reacquire_after} in a row are (see "
                                    f"reacquire_after)")
            self._keep_prediction()
            return
        if self._outside:
            self._outside = 0
            self._record("reacquired", "the observation was outside the gate of every particle; drew the particles "
                                       "afresh from the belief of the recent observations (see reacquire)")
            self.belief = self._drawn(self._reacquired_belief())
            self._estimate_particles("post")
            return
        if not np.isfinite(self.belief.reweight_log(particle_loglik)):
            self._record("no_likelihood", "no particle gives the observation a finite likelihood; kept the "
                                          "prediction")
            self._keep_prediction()
            return
        if self._degenerate():
            # the prediction over every point it holds, weighed as the innovation is
            self._record("degenerate")
            self.belief = self._drawn(self._linearised_update(z, point_weights @ points,
                                                              weighted_covariance(points, point_weights)))
            self._estimate_particles("post")
            return
        if candidates is not None:
            self.belief.particles = self._chosen(candidates, loglik, particle_loglik)
        self._estimate_particles("post")
        if self.belief.resample_if_due(self.ess_threshold, self._rng) and self.roughening:
            self.belief.roughen(self.roughening, self._rng)
