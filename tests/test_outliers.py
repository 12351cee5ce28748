"""The outlier gate: its radius and distances by brute force, and what the gated filters do with an outlier."""

import copy

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import kbfilter as kb
from kbfilter.filters import NearestNeighbourParticleFilter
from kbfilter.filters.outliers import OutlierGate

ROTATION = kb.systems.Rotation()
STATES, OBS = ROTATION.simulate(300, rng=0)
TEST_STATES, TEST_OBS = ROTATION.simulate(60, rng=1)

FILTERS = {
    "kbf": lambda q: kb.KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3, outlier_quantile=q),
    "kmc-herding": lambda q: kb.KernelMonteCarloFilter(ROTATION, n_particles=200, random_state=0,
                                                       outlier_quantile=q),
    "kmc-ratio": lambda q: kb.KernelMonteCarloFilter(ROTATION, n_particles=200, resample="ratio", random_state=0,
                                                     outlier_quantile=q),
    "nn-pf": lambda q: NearestNeighbourParticleFilter(ROTATION, n_particles=200, random_state=0,
                                                      outlier_quantile=q),
}


def test_radius_and_distances_match_brute_force():
    rng = np.random.default_rng(0)
    Z, Q = rng.normal(size=(200, 3)), 2.0 * rng.normal(size=(50, 3))
    pairwise = cdist(Z, Z)
    np.fill_diagonal(pairwise, np.inf)
    nearest = pairwise.min(axis=1)
    for q in (0.5, 0.9, 1.0):
        assert OutlierGate.from_quantile(Z, q).radius == pytest.approx(np.quantile(nearest, q), rel=1e-12)
    gate = OutlierGate.from_quantile(Z, 0.9)
    to_training = cdist(Q, Z).min(axis=1)
    np.testing.assert_allclose(gate.distance(Q), to_training, rtol=1e-10)
    assert [gate.admits(q[None, :]) for q in Q] == list(to_training <= gate.radius)
    assert 0 < np.sum(to_training <= gate.radius) < len(Q)  # the check above saw both answers


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_an_outlier_leaves_the_prediction_as_a_missing_observation_does(name):
    filt = FILTERS[name](0.99).fit(STATES, OBS)
    for z in TEST_OBS[:5]:
        filt.predict()
        filt.update(z)
    filt.predict()
    missing = copy.deepcopy(filt)
    missing.update(None)
    filt.update(TEST_OBS[5] + 10.0)  # far from every training observation
    assert filt.diagnostics["outlier"] == 1
    np.testing.assert_array_equal(filt.x_post, filt.x_prior)
    np.testing.assert_array_equal(filt.x_post, missing.x_post)
    np.testing.assert_array_equal(filt.P_post, missing.P_post)
    filt.update(TEST_OBS[6])  # an ordinary observation is used
    assert filt.diagnostics["outlier"] == 1
    assert not np.array_equal(filt.x_post, filt.x_prior)
    filt.reset()
    assert filt.diagnostics["outlier"] == 0


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_a_gate_that_admits_every_observation_changes_nothing(name):
    gated, plain = FILTERS[name](1.0).fit(STATES, OBS), FILTERS[name](None).fit(STATES, OBS)
    # training observations lie at distance 0 from the training set
    np.testing.assert_array_equal(gated.batch_filter(OBS[:30])[0], plain.batch_filter(OBS[:30])[0])
    assert gated.diagnostics["outlier"] == 0


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_gate_lets_the_motion_model_carry_the_belief_through_a_corrupted_stretch(name):
    zs = TEST_OBS.copy()
    zs[20:35] += 4.0  # a sensor fault: fifteen readings far outside the training range
    errors = {}
    for q in (None, 0.99):
        filt = FILTERS[name](q).fit(STATES, OBS)
        means = filt.batch_filter(zs)[0]
        errors[q] = np.mean(np.sum((means[20:40] - TEST_STATES[20:40]) ** 2, axis=1))
    assert filt.diagnostics["outlier"] >= 15
    assert errors[0.99] < 0.5 * errors[None]


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize("bad", [0, 1.5, -0.2, "high", True])
def test_a_bad_outlier_quantile_is_a_clear_error(name, bad):
    with pytest.raises(ValueError, match="outlier_quantile: expected"):
        FILTERS[name](bad).fit(STATES, OBS)


def test_the_gate_needs_two_training_observations():
    with pytest.raises(ValueError, match="observations"):
        OutlierGate.from_quantile(np.ones((1, 3)), 0.9)
    with pytest.raises(ValueError, match="quantile: expected"):
        OutlierGate.from_quantile(np.ones((5, 3)), 0.0)


def test_the_gate_refuses_a_radius_or_distance_that_is_not_a_distance_and_more_than_one_row():
    observations = np.arange(10.0)[:, None]
    # a NaN or negative radius admitted nothing, silently
    for bad in (-1.0, np.nan, "1", True):
        with pytest.raises(ValueError, match="radius: expected a non-negative number"):
            OutlierGate(observations, bad)
    gate = OutlierGate(observations, 1.0)
    assert OutlierGate(observations, np.inf).admits(np.array([[100.0]]))
    with pytest.raises(ValueError, match=r"z: expected one observation, a row of shape \(1, 1\), got 2 rows"):
        gate.admits(np.array([[4.0], [100.0]]))  # answered for the first row alone
    for bad in (np.nan, -0.5, np.array([0.5, 2.0])):
        with pytest.raises(ValueError, match="distance: expected a non-negative number"):
            gate.admits_distance(bad)
    assert gate.admits_distance(1.0) and not gate.admits_distance(1.5)
