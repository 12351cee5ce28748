"""A fitted kernel Bayes filter as a Stone Soup predictor and updater.

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

import numpy as np
from stonesoup.base import Property
from stonesoup.predictor.base import Predictor
from stonesoup.types.array import CovarianceMatrix, StateVector
from stonesoup.types.prediction import GaussianMeasurementPrediction, Prediction
from stonesoup.types.state import GaussianState
from stonesoup.types.update import Update
from stonesoup.updater.base import Updater
from sklearn.utils.validation import check_is_fitted


__all__ = ["KernelBayesState", "KernelBayesStatePrediction", "KernelBayesStateUpdate", "KernelBayesPredictor",
           "KernelBayesUpdater"]

#: a Gaussian track state is projected onto the training states through this many of its samples
PROJECTION_SAMPLES = 200


_STATE_PARAMETERS = """
    Parameters
    ----------
    state_vector : StateVector
        The filter's estimate ``x``, a column.
    covar : CovarianceMatrix
        Its covariance ``P``.
    weights : ndarray of shape (n,)
        The belief: the weights over the filter's ``n`` training states, summing to 1.
    timestamp : datetime.datetime, optional
        When the state holds."""


class KernelBayesState(GaussianState):
    __doc__ = """A Gaussian state (the filter's estimate and covariance) with the filter's belief: its
    weights over the training states.
""" + _STATE_PARAMETERS

    weights: np.ndarray = Property(doc="The weights over the filter's training states (summing to 1).")


class KernelBayesStatePrediction(Prediction, KernelBayesState):
    __doc__ = """A :class:`KernelBayesState` made by :class:`KernelBayesPredictor`.
""" + _STATE_PARAMETERS + """
    transition_model : None
        The predictor's (none: the transition is the filter's).
    prior : State
        The state the prediction was made from."""


class KernelBayesStateUpdate(Update, KernelBayesState):
    __doc__ = """A :class:`KernelBayesState` made by :class:`KernelBayesUpdater`.
""" + _STATE_PARAMETERS + """
    hypothesis : SingleHypothesis
        The prediction and measurement it was made from."""


def _filter_at(filt, state, seed):
    """A copy of ``filt`` whose belief is ``state``'s (the filter itself is left as it is)."""
    check_is_fitted(filt, "model_")
    belief = copy.deepcopy(filt)  # the fitted model is shared, not copied
    if isinstance(state, KernelBayesState):
        return belief.reset(weights=np.asarray(state.weights, dtype=np.float64))
    mean = np.asarray(state.state_vector, dtype=np.float64).ravel()
    if mean.shape != (filt.n_features_in_,):
        raise ValueError(f"prior: expected a state vector of length {filt.n_features_in_}, got shape {mean.shape}")
    cov = np.asarray(state.covar, dtype=np.float64)
    samples = np.random.default_rng(seed).multivariate_normal(mean, cov, size=PROJECTION_SAMPLES)
    return belief.reset(prior=samples)


class KernelBayesPredictor(Predictor):
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
        The time between two steps of the training log; None: one step a prediction.
    seed : int
        Seeds the samples that project a Gaussian prior.
    transition_model : None
        Not used: the transition is the filter's (Stone Soup asks every predictor for one).
    control_model : None
        Not used.
    """

    filter: object = Property(doc="The fitted KernelBayesFilter.")
    step: datetime.timedelta = Property(default=None, doc="Time between two steps of the training log.")
    seed: int = Property(default=0, doc="Seeds the projection of a Gaussian prior.")
    transition_model: object = Property(default=None, doc="Not used: the filter's learned transition.")
    control_model: object = Property(default=None, doc="Not used.")

    def _steps(self, prior, timestamp):
        if self.step is None or timestamp is None or prior.timestamp is None:
            return 1
        steps = (timestamp - prior.timestamp) / self.step
        if steps < -1e-9:
            raise ValueError(f"timestamp: expected a time after the prior's ({prior.timestamp}), got {timestamp}")
        return int(round(steps))

    def predict(self, prior, timestamp=None, **kwargs):
        """The belief at ``timestamp``.

        Parameters
        ----------
        prior : GaussianState or KernelBayesState
            The track's state.
        timestamp : datetime.datetime, optional
            When to predict to.
        **kwargs
            Ignored (Stone Soup passes its own).

        Returns
        -------
        KernelBayesStatePrediction
            The filter's ``x_prior`` and ``P_prior``, with the predicted weights.
        """
        belief = _filter_at(self.filter, prior, self.seed)
        for _ in range(self._steps(prior, timestamp)):
            belief.predict()  # sets x and P to the prediction
        return Prediction.from_state(prior, StateVector(belief.x), CovarianceMatrix(belief.P), weights=belief.weights,
                                     timestamp=timestamp, transition_model=None, prior=prior,
                                     target_type=KernelBayesStatePrediction)


class KernelBayesUpdater(Updater):
    """Stone Soup updater backed by a fitted kernel Bayes filter: kernel Bayes' rule.

    ``update`` applies the filter's ``update`` to the prediction's belief with the measurement's
    state vector. ``predict_measurement`` gives the predicted measurement as the filter's learned
    observation density sees it (:class:`~kbfilter.filters.likelihood.ObservationDensity`): the mean
    and covariance of the mixture of the training observations under the predicted weights, and
    the cross-covariance of the training states and observations under them, for gates and
    associators. Vector observations only.

    Parameters
    ----------
    filter : KernelBayesFilter
        The fitted filter (not changed).
    measurement_model : None
        Not used: the observation model is the filter's (Stone Soup asks every updater for one).
    """

    filter: object = Property(doc="The fitted KernelBayesFilter.")
    measurement_model: object = Property(default=None, doc="Not used: the filter's learned observation model.")

    def predict_measurement(self, predicted_state, measurement_model=None, measurement_noise=True, **kwargs):
        """The predicted measurement of a predicted state.

        Parameters
        ----------
        predicted_state : KernelBayesState or GaussianState
            The prediction.
        measurement_model : None
            Not used.
        measurement_noise : bool, default=True
            Include the observation density's own spread in the covariance.
        **kwargs
            Ignored.

        Returns
        -------
        GaussianMeasurementPrediction
            Mean, covariance and state-measurement cross-covariance.
        """
        belief = _filter_at(self.filter, predicted_state, 0)
        density = belief.observation_model_.density
        if len(belief.obs_shape_) != 1 or belief.features_ is not None:
            raise ValueError("predicted_state: KernelBayesUpdater predicts vector measurements only (a filter "
                             "fitted on images or with a feature map compares observations in another space)")
        mean, cov = density.moments(belief.weights, noise=measurement_noise)
        p = density.mixture_weights(belief.weights)
        states = belief.states_
        cross = ((states - p @ states) * p[:, None]).T @ (density.observations - p @ density.observations)
        return GaussianMeasurementPrediction(StateVector(mean), CovarianceMatrix(cov), cross_covar=cross,
                                             timestamp=predicted_state.timestamp)

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
        KernelBayesStateUpdate
            The filter's ``x_post`` and ``P_post``, with the posterior weights.
        """
        prediction = hypothesis.prediction
        belief = _filter_at(self.filter, prediction, 0)
        # a missed detection (a false hypothesis) is a missing measurement
        belief.update(np.asarray(hypothesis.measurement.state_vector, dtype=np.float64).ravel() if hypothesis else None)
        return Update.from_state(prediction, StateVector(belief.x_post), CovarianceMatrix(belief.P_post),
                                 weights=belief.weights, timestamp=prediction.timestamp, hypothesis=hypothesis,
                                 target_type=KernelBayesStateUpdate)
