"""Fitted learned filters as Stone Soup predictors and updaters.

Stone Soup (Barr et al. 2022) builds trackers from components: a predictor moves a track's state
to the time of a measurement, an updater corrects it with the measurement, and hypothesisers,
data associators, initiators and deleters around them decide which measurement goes with which
track. :class:`KernelBayesPredictor` and :class:`KernelBayesUpdater` put a fitted
:class:`~kbfilter.KernelBayesFilter` in the place of a Kalman predictor and updater, so the
learned motion and sensor models can drive any Stone Soup tracker and be scored with its metrics
(OSPA, SIAP). A state they return is a :class:`KernelBayesState`: a ``GaussianState`` (the
filter's estimate and covariance, which gates, associators and metrics read) that also carries the
filter's belief, the weights over its training states, so that the next step continues exactly
where the filter would. A plain ``GaussianState`` (a track initiator's) is projected onto the
training states first.

:class:`LearnedMotionPredictor` and :class:`LearnedMotionUpdater` do the same for a fitted
:class:`~kbfilter.LearnedMotionFilter`, the filter for tracks that go where the log did not: a
:class:`LearnedMotionState` carries the track's own copy of the filter (particles, random
generator, recent observations), which shares the fitted motion and sensor with every other
track's.

Needs Stone Soup (``pip install "kbfilter[stonesoup]"``); the package registers this module as the
Stone Soup plugin ``kbfilter``, so ``from stonesoup.plugins.kbfilter import KernelBayesPredictor``
works too.

Examples
--------
>>> import datetime
>>> import numpy as np
>>> import kbfilter as kb
>>> from stonesoup.types.detection import Detection
>>> from stonesoup.types.hypothesis import SingleHypothesis
>>> from stonesoup.types.state import GaussianState
>>> system = kb.systems.Rotation()
>>> kbf = kb.KernelBayesFilter(reg_prior=1e-3).fit(*system.simulate(300, rng=0))
>>> predictor, updater = KernelBayesPredictor(kbf), KernelBayesUpdater(kbf)
>>> start = datetime.datetime(2026, 1, 1)
>>> state = GaussianState(np.array([[1.0], [0.0]]), np.eye(2), timestamp=start)
>>> for t, z in enumerate(system.simulate(20, rng=1)[1], start=1):
...     prediction = predictor.predict(state, timestamp=start + datetime.timedelta(seconds=t))
...     state = updater.update(SingleHypothesis(prediction, Detection(z[:, None], timestamp=prediction.timestamp)))
>>> type(state).__name__, state.state_vector.shape
('KernelBayesStateUpdate', (2, 1))
"""

import copy
import datetime
import hashlib

import numpy as np
import scipy.sparse as sp
from stonesoup.base import Property
from stonesoup.predictor.base import Predictor
from stonesoup.types.array import CovarianceMatrix, StateVector
from stonesoup.types.prediction import GaussianMeasurementPrediction, Prediction
from stonesoup.types.state import GaussianState
from stonesoup.types.update import Update
from stonesoup.updater.base import Updater
from sklearn.utils.validation import check_is_fitted

from ._validation import check_covariance, check_observation, check_rng, check_step_control, check_vector
from .filters import KernelBayesFilter, LearnedMotionFilter
from .filters.local import LocalFilterModel
from .systems.base import predicted_measurement


__all__ = ["KernelBayesState", "KernelBayesStatePrediction", "KernelBayesStateUpdate", "KernelBayesPredictor",
           "KernelBayesUpdater", "LearnedMotionState", "LearnedMotionStatePrediction", "LearnedMotionStateUpdate",
           "LearnedMotionPredictor", "LearnedMotionUpdater", "track_random_state"]

#: a Gaussian track state is projected onto the training states through this many of its samples
PROJECTION_SAMPLES = 200
#: the most steps of the training log one prediction runs: each is a step of the filter, so a
#: timestamp a day after the prior with one-second steps would run for hours
MAX_PREDICTION_STEPS = 10_000


def _state_parameters(carried):
    """The Parameters section of a state's docstring, with ``carried``, the entry of what the
    state carries besides the estimate."""
    return """
    Parameters
    ----------
    state_vector : StateVector
        The filter's estimate ``x``, a column.
    covar : CovarianceMatrix
        Its covariance ``P``.""" + carried + """
    timestamp : datetime.datetime, optional
        When the state holds."""


#: what a prediction and an update hold besides a state's parameters
_PREDICTION_PARAMETERS = """
    transition_model : None
        The predictor's (none: the motion is the filter's).
    prior : State
        The state the prediction was made from."""
_UPDATE_PARAMETERS = """
    hypothesis : SingleHypothesis
        The prediction and measurement it was made from."""

_STATE_PARAMETERS = _state_parameters("""
    weights : ndarray of shape (n,) or scipy sparse array of shape (1, n)
        The belief: the weights over the filter's ``n`` training states, summing to 1. A filter
        with ``approximation="local"`` keeps its belief on a bounded number of training states,
        and its states carry them as a sparse array, so that a step and a stored state cost what
        the belief holds, not ``n``.
    training_states : str, optional
        Which training states the weights are over: a digest of the filter's count of training
        states and a fixed sample of them. A predictor or updater refuses a state whose weights
        are over other states (another filter's, fitted on another log), which it would otherwise
        read over its own; None is not checked.""")


class KernelBayesState(GaussianState):
    __doc__ = """A Gaussian state (the filter's estimate and covariance) with the filter's belief: its
    weights over the training states.
""" + _STATE_PARAMETERS

    weights: np.ndarray = Property(doc="The weights over the filter's training states (summing to 1); a sparse "
                                       "array of shape (1, n) from a filter with approximation='local'.")
    training_states: str = Property(default=None, doc="Which training states the weights are over (a digest of "
                                                      "them); None: not checked.")


class KernelBayesStatePrediction(Prediction, KernelBayesState):
    __doc__ = """A :class:`KernelBayesState` made by :class:`KernelBayesPredictor`.
""" + _STATE_PARAMETERS + _PREDICTION_PARAMETERS


class KernelBayesStateUpdate(Update, KernelBayesState):
    __doc__ = """A :class:`KernelBayesState` made by :class:`KernelBayesUpdater`.
""" + _STATE_PARAMETERS + _UPDATE_PARAMETERS


#: training states sampled, evenly through the log, for the digest a state's weights carry
DIGEST_ROWS = 16


def _training_digest(filt):
    """A digest of ``filt``'s training states: their count, dimension and ``DIGEST_ROWS`` of them
    spread through the log. Two filters fitted on the same states agree (their weights index the
    same states, whatever the hyperparameters); it costs the same at any ``n``."""
    states = filt.states_
    n = len(states)
    sample = states[[(n - 1) * i // (DIGEST_ROWS - 1) for i in range(DIGEST_ROWS)]]
    return hashlib.sha256(repr(states.shape).encode() + sample.tobytes()).hexdigest()[:16]


def _filter_at(filt, state, seed):
    """A copy of ``filt`` whose belief is ``state``'s (the filter itself is left as it is)."""
    check_is_fitted(filt, "model_")
    if isinstance(state, KernelBayesState):
        if state.training_states is not None and state.training_states != _training_digest(filt):
            raise ValueError("prior: expected a state whose weights are over this adapter's filter's training "
                             "states, got one of a filter fitted on other states")
        weights = state.weights
        return filt.with_belief(weights=weights if sp.issparse(weights) else np.asarray(weights, dtype=np.float64))
    mean, cov = _gaussian_of(state, filt.n_features_in_)
    samples = np.random.default_rng(seed).multivariate_normal(mean, cov, size=PROJECTION_SAMPLES)
    return filt.with_belief(prior=samples)


def _steps(step, prior, timestamp):
    """The steps of the training log from the prior's time to ``timestamp`` (one when either
    time or ``step`` is None)."""
    if step is None or timestamp is None or prior.timestamp is None:
        return 1
    steps = (timestamp - prior.timestamp) / step
    if steps < -1e-9:
        raise ValueError(f"timestamp: expected a time after the prior's ({prior.timestamp}), got {timestamp}")
    if steps > MAX_PREDICTION_STEPS:
        raise ValueError(f"timestamp: {timestamp} is {steps:,.0f} steps of {step} after the prior's time "
                         f"({prior.timestamp}); a prediction runs the learned motion once a step and takes at most "
                         f"{MAX_PREDICTION_STEPS:,} (a track that old is better started again)")
    return int(round(steps))


def _gaussian_of(state, dim):
    """The mean and covariance of a Stone Soup Gaussian state of dimension ``dim``."""
    if not hasattr(state, "covar"):
        raise ValueError(f"prior: expected a GaussianState (a mean and a covariance) or a state this adapter made, "
                         f"got {type(state).__name__}")
    mean = np.asarray(state.state_vector, dtype=np.float64).ravel()
    if mean.shape != (dim,):
        raise ValueError(f"prior: expected a state vector of length {dim}, got shape {mean.shape}")
    return check_vector(mean, "prior.state_vector"), check_covariance(state.covar, "prior.covar", dim)


def _with_weights(belief):
    """What a kernel Bayes state carries besides the estimate: the weights over the training
    states, sparse when the filter keeps its belief on a bounded support, and which training
    states they are over."""
    return {"weights": belief.sparse_weights if isinstance(belief.model_, LocalFilterModel) else belief.weights,
            "training_states": _training_digest(belief)}


def _with_track_filter(track):
    """What a learned-motion state carries besides the estimate: the track's filter."""
    return {"track_filter": track}


def _check_filter(adapter):
    """``adapter.filter`` is its filter class's instance (a string or another filter failed at the
    first prediction, with scikit-learn's ``TypeError`` or an ``AttributeError``), and no model
    the filter learned is handed in."""
    if not isinstance(adapter.filter, adapter._filter_type):
        raise ValueError(f"filter: expected a fitted {adapter._filter_type.__name__}, got "
                         f"{type(adapter.filter).__name__}")
    # a model handed in would be ignored, and the track would not move or be weighed as its author meant
    for name in adapter._learned_models:
        model = getattr(adapter, name)
        if model is not None:
            raise ValueError(f"{name}: expected None (the filter's own model, learned from its training log, is "
                             f"used), got {type(model).__name__}")


class _FilterPredictor(Predictor):
    """What the predictors share: a copy of the prior's filter, moved by the filter's own
    ``predict`` once per step of the training log between the prior's time and the prediction's
    (``step``), or once when ``step`` is None. A subclass says how a state becomes a filter
    (``_belief_at``), the control its filter takes (``_control_dimension``), what a state carries
    besides the estimate (``_carried``) and the type it makes (``_made``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        step = self.step
        # a number would be read in no unit, and a zero or negative step divides the time into no steps
        if step is not None and not (isinstance(step, datetime.timedelta) and step > datetime.timedelta(0)):
            raise ValueError(f"step: expected a positive datetime.timedelta (the time between two steps of the "
                             f"training log) or None, got {step!r}")
        _check_filter(self)

    def predict(self, prior, timestamp=None, control_input=None, **kwargs):
        """The belief at ``timestamp``.

        Parameters
        ----------
        prior : GaussianState, or a state of this adapter's filter
            The track's state (not changed).
        timestamp : datetime.datetime, optional
            When to predict to.
        control_input : State, array-like or None, default=None
            The control, as Stone Soup's predictors take it (a state whose ``state_vector`` is
            the control), for a filter fitted with controls (required then, refused otherwise);
            held over every step of the prediction, as a control model holds it over the interval.
        **kwargs
            Ignored (Stone Soup passes its own).

        Returns
        -------
        KernelBayesStatePrediction or LearnedMotionStatePrediction
            The filter's ``x_prior`` and ``P_prior``, with the belief after the prediction.
        """
        u = self._control(control_input)
        belief = self._belief_at(prior)
        for _ in range(_steps(self.step, prior, timestamp)):
            belief.predict(u)  # sets x and P to the prediction
        return Prediction.from_state(prior, StateVector(belief.x), CovarianceMatrix(belief.P), **self._carried(belief),
                                     timestamp=timestamp, transition_model=None, prior=prior, target_type=self._made)

    def _control(self, control_input):
        """The control of each step, checked against the filter's (None for a filter without)."""
        dim_u = self._control_dimension()
        if dim_u is None:
            if control_input is not None:
                raise ValueError(f"control_input: the {type(self.filter).__name__} was fitted without controls; "
                                 f"expected None")
            return None
        if control_input is None:
            raise ValueError(f"control_input: the {type(self.filter).__name__} was fitted with controls; expected "
                             f"a State whose state_vector is the control, of shape ({dim_u},)")
        return check_step_control(np.asarray(getattr(control_input, "state_vector", control_input),
                                             dtype=np.float64).ravel(), dim_u, "control_input")


class _FilterUpdater(Updater):
    """What the updaters share: a copy of the prediction's filter, corrected by the filter's own
    ``update`` with the measurement (a missed detection, a false hypothesis, is a missing
    measurement). A subclass says how a state becomes a filter (``_belief_at``), what a state
    carries besides the estimate (``_carried``) and the type it makes (``_made``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _check_filter(self)

    def update(self, hypothesis, **kwargs):
        """The posterior of a hypothesis: the prediction corrected by its measurement.

        Parameters
        ----------
        hypothesis : SingleHypothesis
            The prediction and the measurement (a missed detection, no measurement, keeps the
            prediction).
        **kwargs
            Ignored.

        Returns
        -------
        KernelBayesStateUpdate or LearnedMotionStateUpdate
            The filter's ``x_post`` and ``P_post``, with the belief after the update.
        """
        prediction = hypothesis.prediction
        belief = self._belief_at(prediction)
        z = None
        if hypothesis:  # a missed detection is a false hypothesis
            z = check_observation(np.asarray(hypothesis.measurement.state_vector, dtype=np.float64).ravel(),
                                  belief.obs_shape_, "hypothesis.measurement.state_vector")
        belief.update(z)
        return Update.from_state(prediction, StateVector(belief.x_post), CovarianceMatrix(belief.P_post),
                                 **self._carried(belief), timestamp=prediction.timestamp, hypothesis=hypothesis,
                                 target_type=self._made)


class KernelBayesPredictor(_FilterPredictor):
    """Stone Soup predictor backed by a fitted kernel Bayes filter: the learned transition.

    A prediction applies the filter's ``predict`` to the prior's belief once per step of the
    training log between the prior's time and ``timestamp`` (``step``), or once when ``step``
    is None. A prior that is a plain ``GaussianState`` is projected onto the training states
    through ``PROJECTION_SAMPLES`` samples drawn from it (``seed``).

    Parameters
    ----------
    filter : KernelBayesFilter
        The fitted filter (not changed).
    step : datetime.timedelta or None
        The time between two steps of the training log; None: one step a prediction. The time
        from the prior to ``timestamp`` is taken as the nearest whole number of steps (a
        measurement 14 s after the prior with 10 s steps is predicted one step ahead, 16 s two);
        resample irregular reports to the log's step to avoid that rounding (as
        :func:`~kbfilter.datasets.load_tracks_csv` does). At most :data:`MAX_PREDICTION_STEPS`
        steps a prediction.
    seed : int
        Seeds the samples that project a Gaussian prior.
    transition_model : None
        Not used: the transition is the filter's (Stone Soup asks every predictor for one); a
        model given here is refused.
    control_model : None
        Not used (refused as well): a filter fitted with controls learned how they move the
        state, and takes each prediction's from ``predict(..., control_input=...)``.
    """

    filter: object = Property(doc="The fitted KernelBayesFilter.")
    step: datetime.timedelta = Property(default=None, doc="Time between two steps of the training log.")
    seed: int = Property(default=0, doc="Seeds the projection of a Gaussian prior.")
    transition_model: object = Property(default=None, doc="Not used: the filter's learned transition.")
    control_model: object = Property(default=None, doc="Not used.")

    _filter_type = KernelBayesFilter
    _learned_models = ("transition_model", "control_model")
    _made = KernelBayesStatePrediction

    def _belief_at(self, state):
        return _filter_at(self.filter, state, self.seed)

    def _control_dimension(self):
        return self.filter.dim_u_

    _carried = staticmethod(_with_weights)


class KernelBayesUpdater(_FilterUpdater):
    """Stone Soup updater backed by a fitted kernel Bayes filter: kernel Bayes' rule.

    ``update`` applies the filter's ``update`` to the prediction's belief with the measurement's
    state vector. ``predict_measurement`` gives the predicted measurement as the filter's learned
    observation density sees it (:class:`~kbfilter.filters.likelihood.ObservationDensity`): the mean
    and covariance of the training observations under the predicted weights (the filter's ``y``
    and ``S`` come from the same), and the cross-covariance of the training states and
    observations under them, for gates and associators. Vector observations only.

    Parameters
    ----------
    filter : KernelBayesFilter
        The fitted filter (not changed).
    measurement_model : None
        Not used: the observation model is the filter's (Stone Soup asks every updater for one);
        a model given here is refused.
    """

    filter: object = Property(doc="The fitted KernelBayesFilter.")
    measurement_model: object = Property(default=None, doc="Not used: the filter's learned observation model.")

    _filter_type = KernelBayesFilter
    _learned_models = ("measurement_model",)
    _made = KernelBayesStateUpdate

    def _belief_at(self, state):
        return _filter_at(self.filter, state, 0)

    _carried = staticmethod(_with_weights)

    def predict_measurement(self, predicted_state, measurement_model=None, measurement_noise=True, **kwargs):
        """The predicted measurement of a predicted state.

        Parameters
        ----------
        predicted_state : KernelBayesState or GaussianState
            The prediction.
        measurement_model : None
            Not used.
        measurement_noise : bool, default=True
            The covariance of the measurement, as the filter's ``S``
            (:meth:`~kbfilter.filters.likelihood.ObservationDensity.predicted_observation`): the
            training observations' spread under the belief, which holds their noise. False gives
            that spread even where it is singular (``S`` then adds the density's ``diag(h^2)``).
        **kwargs
            Ignored.

        Returns
        -------
        GaussianMeasurementPrediction
            Mean, covariance and state-measurement cross-covariance.
        """
        belief = self._belief_at(predicted_state)
        density = belief.observation_model_.density
        if len(belief.obs_shape_) != 1 or belief.features_ is not None:
            raise ValueError("predicted_state: KernelBayesUpdater predicts vector measurements only (a filter "
                             "fitted on images or with a feature map compares observations in another space)")
        # on the training states the belief is on: the others carry no weight
        weights = belief.sparse_weights
        support = weights.indices
        density = density.restricted(support)
        mean, cov = (density.predicted_observation(weights.data) if measurement_noise
                     else density.moments(weights.data, noise=False))
        p = density.mixture_weights(weights.data)
        states = belief.states_[support]
        cross = ((states - p @ states) * p[:, None]).T @ (density.observations - p @ density.observations)
        return GaussianMeasurementPrediction(StateVector(mean), CovarianceMatrix(cov), cross_covar=cross,
                                             timestamp=predicted_state.timestamp)


_MOTION_STATE_PARAMETERS = _state_parameters("""
    track_filter : LearnedMotionFilter
        The track's filter, at this state; it shares the fitted motion and sensor with the
        predictor's and updater's filter.""")


class LearnedMotionState(GaussianState):
    __doc__ = """A Gaussian state (the filter's estimate and covariance) with the track's own copy of a
    learned-motion filter at that state: its particles and weights, its random generator and
    the recent observations a lost track restarts from.
""" + _MOTION_STATE_PARAMETERS

    track_filter: object = Property(doc="The track's copy of the learned-motion filter, at this state.")


class LearnedMotionStatePrediction(Prediction, LearnedMotionState):
    __doc__ = """A :class:`LearnedMotionState` made by :class:`LearnedMotionPredictor`.
""" + _MOTION_STATE_PARAMETERS + _PREDICTION_PARAMETERS


class LearnedMotionStateUpdate(Update, LearnedMotionState):
    __doc__ = """A :class:`LearnedMotionState` made by :class:`LearnedMotionUpdater`.
""" + _MOTION_STATE_PARAMETERS + _UPDATE_PARAMETERS


def track_random_state(random_state, mean, cov):
    """The random state of a track started from a Gaussian prior: the filter's ``random_state``
    and the prior's mean and covariance together.

    Every track a tracker initiates would otherwise restart the filter's generator from the same
    seed and draw the same numbers, so the Monte Carlo errors of all its tracks would be one
    error. Mixing in the prior gives each track its own stream, and the same prior the same
    numbers (a hypothesiser may predict from one prior many times).

    Parameters
    ----------
    random_state : None, int, SeedSequence or Generator
        The filter's ``random_state`` (a generator is not advanced: a copy of it is read).
    mean : array-like of shape (dim_x,)
        The prior's mean.
    cov : array-like of shape (dim_x, dim_x)
        The prior's covariance.

    Returns
    -------
    numpy.random.SeedSequence or None
        None when ``random_state`` is None (fresh entropy for every track already); otherwise a
        seed made of four words drawn from ``random_state`` and the SHA-256 digest of the prior's
        float64 bytes.

    Examples
    --------
    >>> a = track_random_state(0, [0.0, 1.0], [[1.0, 0.0], [0.0, 1.0]])
    >>> b = track_random_state(0, [0.0, 2.0], [[1.0, 0.0], [0.0, 1.0]])
    >>> a.entropy == track_random_state(0, [0.0, 1.0], [[1.0, 0.0], [0.0, 1.0]]).entropy, a.entropy == b.entropy
    (True, False)
    """
    if random_state is None:
        return None
    words = check_rng(copy.deepcopy(random_state)).integers(2**32, size=4, dtype=np.uint64)
    prior = np.concatenate([np.ravel(np.asarray(mean, dtype=np.float64)), np.ravel(np.asarray(cov, dtype=np.float64))])
    digest = np.frombuffer(hashlib.sha256(prior.tobytes()).digest(), dtype=np.uint32)
    return np.random.SeedSequence([int(w) for w in words] + [int(w) for w in digest])


def _track_filter_at(filt, state):
    """A copy of ``filt`` at ``state``: the state's own filter copied (so that the state stays as
    it is), or ``filt`` copied and drawn from a plain Gaussian state's mean and covariance with
    the track's own random stream (:func:`track_random_state`)."""
    check_is_fitted(filt, "motion_")
    if isinstance(state, LearnedMotionState):
        if state.track_filter.motion_ is not filt.motion_:
            raise ValueError("prior: expected a state of this predictor's and updater's filter, got one of another "
                             "filter")
        return copy.deepcopy(state.track_filter)
    mean, cov = _gaussian_of(state, filt.n_features_in_)
    track = copy.deepcopy(filt).set_params(random_state=track_random_state(filt.random_state, mean, cov))
    return track.reset(prior=(mean, cov))


class LearnedMotionPredictor(_FilterPredictor):
    """Stone Soup predictor backed by a fitted :class:`~kbfilter.LearnedMotionFilter`: the motion
    learned from trajectories, which carries over to places the log never held.

    A prediction applies the filter's ``predict`` to a copy of the prior's filter (its particles
    move by the learned motion) once per step of the training log between the prior's time and
    ``timestamp`` (``step``), or once when ``step`` is None. A prior that is a plain
    ``GaussianState`` (a track initiator's) starts a copy of ``filter`` whose particles are drawn
    from it, with a random generator of its own (:func:`track_random_state`: the filter's
    ``random_state`` and the prior together).

    Parameters
    ----------
    filter : LearnedMotionFilter
        The fitted filter (not changed).
    step : datetime.timedelta or None
        The time between two steps of the training log; None: one step a prediction. The time
        from the prior to ``timestamp`` is taken as the nearest whole number of steps (a
        measurement 14 s after the prior with 10 s steps is predicted one step ahead, 16 s two);
        resample irregular reports to the log's step to avoid that rounding (as
        :func:`~kbfilter.datasets.load_tracks_csv` does). At most :data:`MAX_PREDICTION_STEPS`
        steps a prediction.
    transition_model : None
        Not used: the motion is the filter's (Stone Soup asks every predictor for one); a model
        given here is refused.
    control_model : None
        Not used (refused as well).
    """

    filter: object = Property(doc="The fitted LearnedMotionFilter.")
    step: datetime.timedelta = Property(default=None, doc="Time between two steps of the training log.")
    transition_model: object = Property(default=None, doc="Not used: the filter's learned motion.")
    control_model: object = Property(default=None, doc="Not used.")

    _filter_type = LearnedMotionFilter
    _learned_models = ("transition_model", "control_model")
    _made = LearnedMotionStatePrediction

    def _belief_at(self, state):
        return _track_filter_at(self.filter, state)

    @staticmethod
    def _control_dimension():
        return None  # the learned motion takes no control

    _carried = staticmethod(_with_track_filter)


class LearnedMotionUpdater(_FilterUpdater):
    """Stone Soup updater backed by a fitted :class:`~kbfilter.LearnedMotionFilter`: its sensor
    model weighs the particles.

    ``update`` applies the filter's ``update`` to a copy of the prediction's filter with the
    measurement's state vector (a missed detection keeps the prediction). ``predict_measurement``
    gives the predicted measurement over the predicted particles, through the sensor's
    ``observe_mean`` (and its own residual and average, for a radar's bearings) with its
    ``observation_cov`` added: mean, covariance and the state-measurement cross-covariance, for
    gates and associators.

    Parameters
    ----------
    filter : LearnedMotionFilter
        The fitted filter (not changed).
    measurement_model : None
        Not used: the sensor model is the filter's (Stone Soup asks every updater for one); a
        model given here is refused.
    """

    filter: object = Property(doc="The fitted LearnedMotionFilter.")
    measurement_model: object = Property(default=None, doc="Not used: the filter's sensor model.")

    _filter_type = LearnedMotionFilter
    _learned_models = ("measurement_model",)
    _made = LearnedMotionStateUpdate

    def _belief_at(self, state):
        return _track_filter_at(self.filter, state)

    _carried = staticmethod(_with_track_filter)

    def predict_measurement(self, predicted_state, measurement_model=None, measurement_noise=True, **kwargs):
        """The predicted measurement of a predicted state.

        Parameters
        ----------
        predicted_state : LearnedMotionState or GaussianState
            The prediction.
        measurement_model : None
            Not used.
        measurement_noise : bool, default=True
            Add the sensor's noise covariance.
        **kwargs
            Ignored.

        Returns
        -------
        GaussianMeasurementPrediction
            Mean, covariance and state-measurement cross-covariance.
        """
        track = self._belief_at(predicted_state)
        sensor = track.sensor_
        if not (callable(getattr(sensor, "observe_mean", None)) and hasattr(sensor, "observation_cov")):
            raise ValueError(f"predicted_state: LearnedMotionUpdater predicts measurements through the sensor's "
                             f"observe_mean and observation_cov, which {type(sensor).__name__} lacks")
        X, w = track.particles, track.particle_weights
        mean, cov, residuals = predicted_measurement(sensor, X, w)
        if measurement_noise:
            cov = cov + np.asarray(sensor.observation_cov, dtype=np.float64)
        cross = ((X - track.x) * w[:, None]).T @ residuals
        return GaussianMeasurementPrediction(StateVector(mean), CovarianceMatrix(cov), cross_covar=cross,
                                             timestamp=predicted_state.timestamp)
