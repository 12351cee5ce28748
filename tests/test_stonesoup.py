"""The Stone Soup adapter: a fitted kernel Bayes filter as a Stone Soup predictor and updater."""

import datetime

import numpy as np
import pytest

pytest.importorskip("stonesoup")

from stonesoup.types.detection import Detection, MissedDetection  # noqa: E402
from stonesoup.types.hypothesis import SingleHypothesis  # noqa: E402
from stonesoup.types.state import GaussianState  # noqa: E402

import kbfilter as kb  # noqa: E402
from kbfilter.stonesoup import (PROJECTION_SAMPLES, KernelBayesPredictor, KernelBayesState,  # noqa: E402
                                KernelBayesStateUpdate, KernelBayesUpdater)

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
    with pytest.raises(ValueError, match="prior: expected a state vector of length 2"):
        KernelBayesPredictor(kbf).predict(GaussianState(np.zeros((3, 1)), np.eye(3), timestamp=START))


def test_the_predicted_measurement_is_the_learned_observation_densitys(fitted):
    kbf, _ = fitted
    kbf.reset()
    prediction = KernelBayesPredictor(kbf).predict(_state(kbf, 0), timestamp=START + SECOND)
    measured = KernelBayesUpdater(kbf).predict_measurement(prediction)
    mean, cov = kbf.observation_model_.density.moments(prediction.weights)
    np.testing.assert_allclose(measured.state_vector.ravel(), mean)
    np.testing.assert_allclose(measured.covar, cov)
    assert measured.cross_covar.shape == (2, 2)
    # on the oscillation (z = x + noise) the observations follow the states: positive cross-covariance
    assert np.all(np.diag(measured.cross_covar) > 0)
    # and it is a density of observations near the prediction: the mixture's mean is the state's, nearly
    assert np.linalg.norm(mean - prediction.state_vector.ravel()) < 0.1


def test_the_stone_soup_plugin_lookup_finds_the_adapter():
    from stonesoup.plugins.kbfilter import KernelBayesPredictor as FromPlugin

    assert FromPlugin is KernelBayesPredictor


def test_weights_given_to_reset_are_checked():
    kbf = kb.KernelBayesFilter().fit(*kb.systems.Rotation().simulate(100, rng=0))
    with pytest.raises(ValueError, match="weights: expected length 100"):
        kbf.reset(weights=np.ones(99) / 99)
    with pytest.raises(ValueError, match="weights: expected weights summing to 1"):
        kbf.reset(weights=np.ones(100))
    with pytest.raises(ValueError, match="weights: expected None when a prior is given"):
        kbf.reset(prior=np.zeros((5, 2)), weights=np.ones(100) / 100)
