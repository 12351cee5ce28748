"""The Stone Soup adapter: a fitted kernel Bayes filter, and a fitted learned-motion filter, as Stone Soup
predictors and updaters."""

import copy
import datetime

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("stonesoup")

from stonesoup.types.detection import Detection, MissedDetection  # noqa: E402
from stonesoup.types.hypothesis import SingleHypothesis  # noqa: E402
from stonesoup.types.state import GaussianState, State  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

import kbfilter as kb  # noqa: E402
from kbfilter.stonesoup import (PROJECTION_SAMPLES, KernelBayesPredictor, KernelBayesState,  # noqa: E402
                                KernelBayesStateUpdate, KernelBayesUpdater, LearnedMotionPredictor,
                                LearnedMotionState, LearnedMotionStatePrediction, LearnedMotionStateUpdate,
                                LearnedMotionUpdater, track_random_state)

START = datetime.datetime(2026, 1, 1)
SECOND = datetime.timedelta(seconds=1)


@pytest.fixture(scope="module")
def fitted():
    system = kb.systems.Oscillation()
    kbf = kb.KernelBayesFilter(scale=0.5, reg_prior=1e-3).fit(*system.simulate(400, rng=0))
    return kbf, system.simulate(30, rng=1)


def _state(kbf, t):
    return KernelBayesState(kbf.x[:, None], kbf.P, weights=kbf.weights.copy(), timestamp=START + t * SECOND)


def test_predict_and_update_are_the_filters_own_on_the_same_belief(fitted):
    kbf, (_, zs) = fitted
    predictor, updater = KernelBayesPredictor(kbf), KernelBayesUpdater(kbf)
    kbf.reset()
    state = _state(kbf, 0)
    for t, z in enumerate(zs, start=1):
        prediction = predictor.predict(state, timestamp=START + t * SECOND)
        kbf.predict()
        np.testing.assert_array_equal(prediction.state_vector.ravel(), kbf.x_prior)
        np.testing.assert_array_equal(prediction.covar, kbf.P_prior)
        np.testing.assert_array_equal(prediction.weights, kbf.weights_prior)
        state = updater.update(SingleHypothesis(prediction, Detection(z[:, None], timestamp=prediction.timestamp)))
        kbf.update(z)
        assert isinstance(state, KernelBayesStateUpdate)
        np.testing.assert_array_equal(state.state_vector.ravel(), kbf.x_post)
        np.testing.assert_array_equal(state.covar, kbf.P_post)
        np.testing.assert_array_equal(state.weights, kbf.weights)


def test_a_filter_fitted_with_controls_takes_stone_soups_control_input(fitted, motion):
    """A controlled filter had been accepted and then failed at every prediction (``u: ...``),
    with no way in for the control: Stone Soup's ``control_input`` is held over each step of a
    prediction, as the filter's own ``predict(u)`` would be called."""
    system = kb.systems.ControlledLinearGaussian(F=[[0.9, 0.1], [0.0, 0.9]], B=[[0.0], [1.0]], H=[[1.0, 0.0]],
                                                 Q=0.05 * np.eye(2), R=[[0.2]])
    states, controls, obs = system.simulate(300, rng=0)
    _, us, zs = system.simulate(6, rng=1)
    kbf = kb.KernelBayesFilter().fit(states, obs, controls=controls)
    predictor, updater = KernelBayesPredictor(kbf, step=SECOND), KernelBayesUpdater(kbf)
    kbf.reset()
    state = _state(kbf, 0)
    for t, (u, z) in enumerate(zip(us, zs), start=1):
        given = State(u[:, None]) if t % 2 else u     # a State, as Stone Soup's predictors take it, or an array
        prediction = predictor.predict(state, timestamp=START + t * SECOND, control_input=given)
        kbf.predict(u)
        np.testing.assert_array_equal(prediction.weights, kbf.weights_prior)
        state = updater.update(SingleHypothesis(prediction, Detection(z[:, None], timestamp=prediction.timestamp)))
        kbf.update(z)
        np.testing.assert_array_equal(state.weights, kbf.weights)
    # two steps of the log: the control held over both
    two = predictor.predict(state, timestamp=state.timestamp + 2 * SECOND, control_input=State(us[0][:, None]))
    kbf.predict(us[0])
    kbf.predict(us[0])
    np.testing.assert_array_equal(two.weights, kbf.weights_prior)
    with pytest.raises(ValueError, match=r"^control_input: the KernelBayesFilter was fitted with controls; expected a "
                                         r"State whose state_vector is the control, of shape \(1,\)$"):
        predictor.predict(state, timestamp=state.timestamp + SECOND)
    with pytest.raises(ValueError, match=r"^control_input: expected a control of shape \(1,\), got shape \(2,\)$"):
        predictor.predict(state, timestamp=state.timestamp + SECOND, control_input=State(np.zeros((2, 1))))
    plain, _ = fitted
    lmf, _ = motion
    for adapter in (KernelBayesPredictor(plain), LearnedMotionPredictor(lmf)):
        with pytest.raises(ValueError, match=r"^control_input: the \w+ was fitted without controls; expected None$"):
            adapter.predict(GaussianState(np.zeros((adapter.filter.n_features_in_, 1)),
                                          np.eye(adapter.filter.n_features_in_)), control_input=State([[1.0]]))


def test_a_missed_detection_keeps_the_prediction_and_the_filter_is_left_alone(fitted):
    kbf, (_, zs) = fitted
    kbf.reset()
    before = kbf.weights.copy()
    prediction = KernelBayesPredictor(kbf).predict(_state(kbf, 0), timestamp=START + SECOND)
    missed = MissedDetection(timestamp=prediction.timestamp)
    state = KernelBayesUpdater(kbf).update(SingleHypothesis(prediction, missed))
    np.testing.assert_array_equal(state.state_vector, prediction.state_vector)
    np.testing.assert_array_equal(state.weights, prediction.weights)
    np.testing.assert_array_equal(kbf.weights, before)


@pytest.mark.parametrize("vector, message", [(np.ones((3, 1)), "expected length 2, got shape \\(3,\\)"),
                                             (np.array([[np.nan], [1.0]]), "contains NaN")])
def test_a_detection_that_does_not_fit_is_named_as_the_hypothesis_measurement(fitted, vector, message):
    # it was named z, the filter's own argument, which a Stone Soup loop never wrote
    kbf, _ = fitted
    kbf.reset()
    prediction = KernelBayesPredictor(kbf).predict(_state(kbf, 0), timestamp=START + SECOND)
    hypothesis = SingleHypothesis(prediction, Detection(vector, timestamp=prediction.timestamp))
    with pytest.raises(ValueError, match=f"hypothesis.measurement.state_vector: {message}"):
        KernelBayesUpdater(kbf).update(hypothesis)


def test_a_gaussian_prior_is_projected_through_seeded_samples_and_steps_follow_the_clock(fitted):
    kbf, _ = fitted
    mean, cov = np.array([1.0, 0.0]), 0.05 * np.eye(2)
    prior = GaussianState(mean[:, None], cov, timestamp=START)
    prediction = KernelBayesPredictor(kbf, step=SECOND, seed=3).predict(prior, timestamp=START + 3 * SECOND)
    samples = np.random.default_rng(3).multivariate_normal(mean, cov, size=PROJECTION_SAMPLES)
    kbf.reset(prior=samples)
    for _ in range(3):
        kbf.predict()
    np.testing.assert_allclose(prediction.state_vector.ravel(), kbf.x_prior, atol=1e-12)
    np.testing.assert_allclose(prediction.weights, kbf.weights_prior, atol=1e-12)
    with pytest.raises(ValueError, match="timestamp: expected a time after the prior's"):
        KernelBayesPredictor(kbf, step=SECOND).predict(prior, timestamp=START - 2 * SECOND)
    # a time far ahead (a stale track, a clock in another zone) is refused before it runs for hours
    with pytest.raises(ValueError, match=r"timestamp: .* is 86,400 steps of 0:00:01 after the prior's time .* at most "
                                         r"10,000"):
        KernelBayesPredictor(kbf, step=SECOND).predict(prior, timestamp=START + datetime.timedelta(days=1))
    # a zero step divided by zero, a negative one blamed the timestamp, a number (in no unit) was a TypeError
    for step in (datetime.timedelta(0), -SECOND, 1.0):
        for predictor in (KernelBayesPredictor, LearnedMotionPredictor):
            with pytest.raises(ValueError, match=r"step: expected a positive datetime.timedelta .* got"):
                predictor(kbf, step=step)
    with pytest.raises(ValueError, match="prior: expected a state vector of length 2"):
        KernelBayesPredictor(kbf).predict(GaussianState(np.zeros((3, 1)), np.eye(3), timestamp=START))
    # a covariance that is no covariance is refused, not sampled from with a warning
    with pytest.raises(ValueError, match="prior.covar: expected a positive semi-definite covariance"):
        KernelBayesPredictor(kbf).predict(GaussianState(np.zeros((2, 1)), -np.eye(2), timestamp=START))
    with pytest.raises(ValueError, match="prior.state_vector: contains NaN"):
        KernelBayesPredictor(kbf).predict(GaussianState(np.full((2, 1), np.nan), np.eye(2), timestamp=START))
    with pytest.raises(ValueError, match="prior: expected a GaussianState .* got State"):
        KernelBayesPredictor(kbf).predict(State(mean[:, None], timestamp=START))
    # a time between two steps of the log is taken as the nearest whole number of steps
    predictor = KernelBayesPredictor(kbf, step=SECOND, seed=3)
    two = predictor.predict(prior, timestamp=START + 2 * SECOND)
    for seconds, same in ((1.6, two), (2.4, two)):
        later = predictor.predict(prior, timestamp=START + seconds * SECOND)
        np.testing.assert_array_equal(later.weights, same.weights)
    assert not np.array_equal(predictor.predict(prior, timestamp=START + 1.4 * SECOND).weights, two.weights)


def test_the_predicted_measurement_is_the_learned_observation_densitys(fitted):
    kbf, _ = fitted
    kbf.reset()
    prediction = KernelBayesPredictor(kbf).predict(_state(kbf, 0), timestamp=START + SECOND)
    measured = KernelBayesUpdater(kbf).predict_measurement(prediction)
    mean, cov = kbf.observation_model_.density.moments(prediction.weights, noise=False)
    np.testing.assert_allclose(measured.state_vector.ravel(), mean)
    np.testing.assert_allclose(measured.covar, cov)
    # the filter's own S after an update from the same belief
    own = kbf.with_belief(weights=prediction.weights)
    own.update(kbf.observation_model_.density.observations[0])
    np.testing.assert_allclose(own.S, measured.covar, rtol=1e-12)
    assert measured.cross_covar.shape == (2, 2)
    # on the oscillation (z = x + noise) the observations follow the states: positive cross-covariance
    assert np.all(np.diag(measured.cross_covar) > 0)
    # and it is a density of observations near the prediction: the mixture's mean is the state's, nearly
    assert np.linalg.norm(mean - prediction.state_vector.ravel()) < 0.1


def test_on_the_local_path_a_track_starts_from_a_gaussian_and_carries_its_belief_sparse():
    system = kb.systems.Oscillation()
    kbf = kb.KernelBayesFilter(approximation="local", support=60).fit(*system.simulate(2000, rng=0))
    mean, cov = np.array([1.0, 0.0]), 0.05 * np.eye(2)
    predictor, updater = KernelBayesPredictor(kbf, seed=3), KernelBayesUpdater(kbf)
    own = kbf.with_belief(prior=np.random.default_rng(3).multivariate_normal(mean, cov, size=PROJECTION_SAMPLES))
    state = GaussianState(mean[:, None], cov, timestamp=START)
    for t, z in enumerate(system.simulate(20, rng=1)[1], start=1):
        prediction = predictor.predict(state, timestamp=START + t * SECOND)
        own.predict()
        np.testing.assert_array_equal(prediction.state_vector.ravel(), own.x_prior)
        np.testing.assert_array_equal(prediction.weights.toarray().ravel(), own.weights_prior)
        measured = updater.predict_measurement(prediction)
        np.testing.assert_allclose(measured.state_vector.ravel(),
                                   own.observation_model_.density.moments(own.weights_prior)[0], rtol=1e-12)
        hypothesis = SingleHypothesis(prediction, MissedDetection(timestamp=prediction.timestamp) if t == 5 else
                                      Detection(z[:, None], timestamp=prediction.timestamp))
        state = updater.update(hypothesis)
        own.update(None if t == 5 else z)
        np.testing.assert_array_equal(state.state_vector.ravel(), own.x_post)
        np.testing.assert_array_equal(state.weights.toarray().ravel(), own.weights)
        # an update holds at most `support` training states (a missed detection keeps the
        # prediction, which is drawn down at the next step), not the 2,000 of the log
        assert state.weights.nnz <= (prediction.weights.nnz if t == 5 else 60) < 2000


def test_the_stone_soup_plugin_lookup_finds_the_adapter():
    from stonesoup.plugins.kbfilter import KernelBayesPredictor as FromPlugin

    assert FromPlugin is KernelBayesPredictor


def test_an_adapter_given_another_kind_of_filter_says_so_when_built(fitted, motion):
    kbf, _ = fitted
    lmf, _ = motion
    # before: scikit-learn's TypeError or a NotFittedError naming another attribute, at the first prediction
    for adapter, given, wanted in [(KernelBayesPredictor, "kbf", "KernelBayesFilter"),
                                   (KernelBayesUpdater, lmf, "KernelBayesFilter"),
                                   (LearnedMotionPredictor, kbf, "LearnedMotionFilter"),
                                   (LearnedMotionUpdater, None, "LearnedMotionFilter")]:
        with pytest.raises(ValueError, match=f"^filter: expected a fitted {wanted}, got {type(given).__name__}$"):
            adapter(filter=given)
    # an unfitted filter of the right kind is named at the first use, as before
    with pytest.raises(NotFittedError):
        KernelBayesPredictor(filter=kb.KernelBayesFilter()).predict(GaussianState(np.zeros((2, 1)), np.eye(2)))


def test_an_adapter_given_a_model_of_its_own_refuses_it(fitted, motion):
    from stonesoup.models.measurement.linear import LinearGaussian
    from stonesoup.models.transition.linear import ConstantVelocity

    kbf, _ = fitted
    lmf, _ = motion
    # before: kept and never read, so the track moved by the learned motion while its author meant the model
    for adapter, filt, name, model in [(KernelBayesPredictor, kbf, "transition_model", ConstantVelocity(0.1)),
                                       (LearnedMotionPredictor, lmf, "control_model", ConstantVelocity(0.1)),
                                       (KernelBayesUpdater, kbf, "measurement_model",
                                        LinearGaussian(2, [0, 1], np.eye(2))),
                                       (LearnedMotionUpdater, lmf, "measurement_model",
                                        LinearGaussian(4, [0, 2], np.eye(2)))]:
        with pytest.raises(ValueError, match=f"^{name}: expected None .* got {type(model).__name__}$"):
            adapter(filter=filt, **{name: model})
        adapter(filter=filt, **{name: None})


def test_a_state_of_a_filter_fitted_on_other_states_is_refused():
    # its weights are over that filter's training states: read over another filter's of the same
    # count they were silently wrong (with another count, reset said so by the length)
    system = kb.systems.Rotation()
    first = kb.KernelBayesFilter(reg_prior=1e-3).fit(*system.simulate(150, rng=0))
    other = kb.KernelBayesFilter(reg_prior=1e-3).fit(*system.simulate(150, rng=1))
    same_states = kb.KernelBayesFilter(reg_prior=1e-2, scale=0.5).fit(*system.simulate(150, rng=0))
    start = datetime.datetime(2026, 1, 1)
    prediction = KernelBayesPredictor(first).predict(GaussianState(np.array([[1.0], [0.0]]), np.eye(2),
                                                                   timestamp=start))
    z = Detection(np.array([[0.9], [0.1]]), timestamp=start)
    with pytest.raises(ValueError, match="prior: expected a state whose weights are over this adapter's filter's"):
        KernelBayesUpdater(other).update(SingleHypothesis(prediction, z))
    with pytest.raises(ValueError, match="prior: expected a state whose weights are over"):
        KernelBayesPredictor(other).predict(prediction, timestamp=start)
    # the same training states under other hyperparameters: the weights mean the same, and are taken
    update = KernelBayesUpdater(same_states).update(SingleHypothesis(prediction, z))
    own = same_states.with_belief(weights=prediction.weights)
    own.update(np.array([0.9, 0.1]))
    np.testing.assert_allclose(update.state_vector.ravel(), own.x, rtol=1e-12)


def test_weights_given_to_reset_are_checked():
    kbf = kb.KernelBayesFilter().fit(*kb.systems.Rotation().simulate(100, rng=0))
    with pytest.raises(ValueError, match="weights: expected length 100"):
        kbf.reset(weights=np.ones(99) / 99)
    with pytest.raises(ValueError, match="weights: expected weights summing to 1"):
        kbf.reset(weights=np.ones(100))
    with pytest.raises(ValueError, match="weights: expected None when a prior is given"):
        kbf.reset(prior=np.zeros((5, 2)), weights=np.ones(100) / 100)
    with pytest.raises(ValueError, match="weights: contains NaN"):
        kbf.reset(weights=sp.csr_array(([np.nan, 1.0], [0, 1], [0, 2]), shape=(1, 100)))


# -- the learned-motion filter ----------------------------------------------------------------------
CV = kb.systems.ConstantVelocity(step=1.0, accel=0.5, sensor=kb.systems.PositionFixes(3.0), speed=10.0)


@pytest.fixture(scope="module")
def motion():
    train = [CV.simulate(200, rng=s, burn_in=0)[0] for s in range(5)]
    lmf = kb.LearnedMotionFilter(CV, inputs=(2, 3), n_particles=200, random_state=0)
    truth, zs = CV.simulate(40, rng=9, burn_in=0)
    zs = [None if 10 <= t < 14 else z for t, z in enumerate(zs)]
    return lmf.fit(train, [t[:, :2] for t in train]), zs


def _motion_state(lmf, t):
    return LearnedMotionState(lmf.x[:, None], lmf.P, track_filter=copy.deepcopy(lmf), timestamp=START + t * SECOND)


@pytest.mark.filterwarnings("ignore:LearnedMotionFilter. the observation was outside the gate")
def test_learned_motion_predict_and_update_are_the_filters_own_and_leave_it_alone(motion):
    lmf, zs = motion
    lmf.reset()
    particles, rng_state = lmf.particles.copy(), lmf.rng_state
    own = copy.deepcopy(lmf)
    predictor, updater = LearnedMotionPredictor(lmf, step=SECOND), LearnedMotionUpdater(lmf)
    state = _motion_state(own, 0)
    for t, z in enumerate(zs[1:], start=1):
        prediction = predictor.predict(state, timestamp=START + t * SECOND)
        own.predict()
        assert isinstance(prediction, LearnedMotionStatePrediction)
        np.testing.assert_array_equal(prediction.state_vector.ravel(), own.x_prior)
        np.testing.assert_array_equal(prediction.covar, own.P_prior)
        # a missed detection through the updater, the next through Stone Soup's convention (the
        # prediction is the state): both are the filter's update(None)
        if z is None and t % 2:
            state = prediction
        else:
            detection = MissedDetection(timestamp=prediction.timestamp) if z is None else \
                Detection(z[:, None], timestamp=prediction.timestamp)
            state = updater.update(SingleHypothesis(prediction, detection))
            assert isinstance(state, LearnedMotionStateUpdate)
        own.update(z)
        np.testing.assert_array_equal(state.state_vector.ravel(), own.x_post)
        np.testing.assert_array_equal(state.covar, own.P_post)
        np.testing.assert_array_equal(state.track_filter.particles, own.particles)
    # the run restarted from its recent fixes (the particles began on the training states), in
    # the track's filter as in the filter's own
    assert own.diagnostics["reacquired"] >= 1 and state.track_filter.diagnostics == own.diagnostics
    np.testing.assert_array_equal(lmf.particles, particles)
    assert lmf.rng_state == rng_state


def test_a_learned_motion_state_is_not_changed_by_predicting_from_it(motion):
    lmf, zs = motion
    lmf.reset()
    prior = _motion_state(lmf, 0)
    predictor = LearnedMotionPredictor(lmf)
    first, second = predictor.predict(prior), predictor.predict(prior)
    np.testing.assert_array_equal(first.state_vector, second.state_vector)
    np.testing.assert_array_equal(first.track_filter.particles, second.track_filter.particles)
    np.testing.assert_array_equal(prior.track_filter.particles, lmf.particles)


def test_a_gaussian_prior_starts_the_filter_there_and_steps_follow_the_clock(motion):
    lmf, _ = motion
    mean, cov = np.array([5.0, -3.0, 2.0, 1.0]), np.diag([4.0, 4.0, 1.0, 1.0])
    prior = GaussianState(mean[:, None], cov, timestamp=START)
    prediction = LearnedMotionPredictor(lmf, step=SECOND).predict(prior, timestamp=START + 3 * SECOND)
    by_hand = copy.deepcopy(lmf).set_params(random_state=track_random_state(lmf.random_state, mean, cov))
    by_hand.reset(prior=(mean, cov))
    for _ in range(3):
        by_hand.predict()
    np.testing.assert_array_equal(prediction.state_vector.ravel(), by_hand.x_prior)
    # three steps of about (2, 1) m/s from (5, -3)
    np.testing.assert_allclose(prediction.state_vector.ravel()[:2], [11.0, 0.0], atol=1.5)
    with pytest.raises(ValueError, match="timestamp: expected a time after the prior's"):
        LearnedMotionPredictor(lmf, step=SECOND).predict(prior, timestamp=START - 2 * SECOND)
    with pytest.raises(ValueError, match="prior: expected a state vector of length 4"):
        LearnedMotionPredictor(lmf).predict(GaussianState(np.zeros((2, 1)), np.eye(2), timestamp=START))
    with pytest.raises(ValueError, match="prior.covar: expected a symmetric covariance"):
        LearnedMotionPredictor(lmf).predict(GaussianState(np.zeros((4, 1)), np.triu(np.ones((4, 4))), timestamp=START))
    other = kb.LearnedMotionFilter(CV, inputs=(2, 3), n_particles=50).fit(*CV.simulate(100, rng=1, burn_in=0))
    with pytest.raises(ValueError, match="prior: expected a state of this predictor's and updater's filter"):
        LearnedMotionPredictor(lmf).predict(_motion_state(other, 0))
    with pytest.raises(NotFittedError):
        LearnedMotionPredictor(kb.LearnedMotionFilter(CV)).predict(prior)


def test_tracks_started_from_different_gaussian_priors_draw_their_own_numbers(motion):
    lmf, _ = motion
    cov = np.diag([4.0, 4.0, 1.0, 1.0])
    predictor = LearnedMotionPredictor(lmf)

    def started(mean):
        return predictor.predict(GaussianState(np.asarray(mean)[:, None], cov, timestamp=START)).track_filter

    a, b, again = started([5.0, -3.0, 2.0, 1.0]), started([50.0, 7.0, 2.0, 1.0]), started([5.0, -3.0, 2.0, 1.0])
    np.testing.assert_array_equal(a.particles, again.particles)
    # one stream for every track would move both clouds by the same draws: their particles would
    # differ by the means' difference alone
    assert not np.allclose(b.particles - a.particles, [45.0, 10.0, 0.0, 0.0])
    # a filter seeded with a generator: read through a copy, which is left where it was
    seeded = copy.deepcopy(lmf).set_params(random_state=np.random.default_rng(3))
    state = seeded.random_state.bit_generator.state
    assert track_random_state(seeded.random_state, [0.0] * 4, cov).entropy \
        == track_random_state(np.random.default_rng(3), [0.0] * 4, cov).entropy
    assert seeded.random_state.bit_generator.state == state
    assert track_random_state(None, [0.0] * 4, cov) is None


def test_the_predicted_measurement_is_the_particles_seen_through_the_sensor(motion):
    lmf, _ = motion
    lmf.reset(prior=(np.array([0.0, 0.0, 1.0, 0.0]), np.eye(4)))
    prediction = LearnedMotionPredictor(lmf).predict(_motion_state(lmf, 0))
    measured = LearnedMotionUpdater(lmf).predict_measurement(prediction)
    X, w = prediction.track_filter.particles, prediction.track_filter.particle_weights
    mean = w @ X[:, :2]  # position fixes see the position
    np.testing.assert_allclose(measured.state_vector.ravel(), mean, rtol=1e-12)
    spread = X[:, :2] - mean
    np.testing.assert_allclose(measured.covar, spread.T @ (w[:, None] * spread) + 9.0 * np.eye(2), rtol=1e-10)
    np.testing.assert_allclose(measured.cross_covar, (X - w @ X).T @ (w[:, None] * spread), rtol=1e-10, atol=1e-12)


def test_a_radars_predicted_bearing_is_averaged_on_the_circle():
    radar = kb.systems.ConstantVelocity(step=1.0, accel=0.5, sensor=kb.systems.RangeBearing((0.0, 0.0), 5.0, 0.01))
    track = radar.simulate(300, rng=0, burn_in=0)[0]
    lmf = kb.LearnedMotionFilter(radar, inputs=(2, 3), n_particles=400, random_state=0)
    lmf.fit(track, radar.sensor.observe(track, rng=1))
    # straight south of the radar, 1 km away: bearings on both sides of +-pi
    lmf.reset(prior=(np.array([0.0, -1000.0, 0.0, 0.0]), np.diag([400.0, 1.0, 1e-6, 1e-6])))
    measured = LearnedMotionUpdater(lmf).predict_measurement(_motion_state(lmf, 0), measurement_noise=False)
    r, bearing = measured.state_vector.ravel()
    assert abs(r - 1000.0) < 5 and abs(abs(bearing) - np.pi) < 0.01  # a plain mean would be near 0
    assert measured.covar[1, 1] < 0.01


def test_the_stone_soup_plugin_lookup_finds_the_learned_motion_adapter():
    from stonesoup.plugins.kbfilter import LearnedMotionUpdater as FromPlugin

    assert FromPlugin is LearnedMotionUpdater
