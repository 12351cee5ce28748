"""Estimates do not depend on where the coordinates' origin is or on their units: a log in map
coordinates (metres, millions from the origin) is filtered as the same log near zero would be."""

import numpy as np
import pytest

import kbfilter as kb
from kbfilter.features import LearnedFeatures, exact_pca
from kbfilter.filters.motion import LearnedMotion

SHIFT = 5e6


@pytest.fixture(scope="module")
def data():
    system = kb.systems.Oscillation()
    return system.simulate(300, rng=0), system.simulate(40, rng=1)


FILTERS = {
    "kernel Bayes": lambda: kb.KernelBayesFilter(),
    "kernel Bayes, Nystrom": lambda: kb.KernelBayesFilter(approximation="nystrom"),
    "kernel Bayes, local": lambda: kb.KernelBayesFilter(approximation="local"),
    # the learned linear motion and sensor: least squares beside a column of ones lost every
    # digit of states 5e6 from the origin
    "learned motion": lambda: kb.LearnedMotionFilter(n_particles=200, random_state=0),
    # the network's targets were the raw states
    "window regressor": lambda: kb.filters.WindowRegressor(hidden_layer_sizes=(16,), max_iter=100),
    # ... and its inputs raw observations
    "learned features": lambda: kb.KernelBayesFilter(
        features=LearnedFeatures(n_pca=None, hidden_layer_sizes=(16, 4), max_iter=100)),
}


@pytest.mark.parametrize("name", FILTERS)
@pytest.mark.parametrize("shift, scale, where", [(SHIFT, 1.0, "states"), (SHIFT, 1.0, "observations"),
                                                 (0.0, 1e3, "states")])
def test_estimates_follow_the_states_when_the_origin_or_the_units_change(data, name, shift, scale, where):
    (states, obs), (_, test_obs) = data
    reference, reference_covs = FILTERS[name]().fit(states, obs).batch_filter(test_obs)[:2]
    if where == "states":
        means, covs = FILTERS[name]().fit(states * scale + shift, obs).batch_filter(test_obs)[:2]
        means, covs = (means - shift) / scale, covs / scale**2
    else:
        means, covs = FILTERS[name]().fit(states, obs * scale + shift).batch_filter(test_obs * scale + shift)[:2]
    np.testing.assert_allclose(means, reference, rtol=0, atol=1e-6 * np.abs(reference).max())
    np.testing.assert_allclose(covs, reference_covs, rtol=0, atol=1e-6 * np.abs(reference_covs).max())


def test_the_learned_linear_parts_do_not_depend_on_the_origin(data):
    (states, obs), _ = data
    near, far = LearnedMotion().fit(states), LearnedMotion().fit(states + SHIFT)
    np.testing.assert_allclose(far.linear_part()[0], near.linear_part()[0], atol=1e-9)
    np.testing.assert_allclose(far.mean_step(states[:5] + SHIFT), near.mean_step(states[:5]), atol=1e-8)
    near, far = (kb.systems.LinearGaussianSensor.fitted(x, obs) for x in (states, states + SHIFT))
    np.testing.assert_allclose(far.H, near.H, atol=1e-9)
    np.testing.assert_allclose(far.R, near.R, atol=1e-9)


def test_the_librarys_pca_of_data_far_from_the_origin_is_that_of_the_centred_data():
    # scikit-learn's "auto" solver forms X^T X on narrow data: 0.06 off at this offset
    Z = np.random.default_rng(0).normal(size=(500, 3)) * [0.3, 0.5, 1.0]
    near, far = exact_pca(2, Z, 0).fit(Z), exact_pca(2, Z + SHIFT, 0).fit(Z + SHIFT)
    np.testing.assert_allclose(np.abs(far.transform(Z + SHIFT)), np.abs(near.transform(Z)), atol=1e-8)
    assert exact_pca(50, Z, 0).n_components == 3


@pytest.mark.parametrize("method", ["exact", "nystrom", "icf", "knn", "nw"])
def test_conditional_embedding_weights_do_not_depend_on_the_origin_of_its_inputs(data, method):
    # scikit-learn's Nystroem measures distances from ||a||^2 + ||b||^2 - 2 a.b: half the weights'
    # size off at this offset when it was handed the raw inputs
    (states, obs), (test_states, _) = data
    near = kb.ConditionalEmbedding(method=method, rank=100, random_state=0).fit(states[:-1], states[1:])
    far = kb.ConditionalEmbedding(method=method, rank=100, random_state=0).fit(states[:-1] + SHIFT, states[1:])
    W = near.weights(test_states)
    W = W.toarray() if hasattr(W, "toarray") else W
    W_far = far.weights(test_states + SHIFT)
    W_far = W_far.toarray() if hasattr(W_far, "toarray") else W_far
    np.testing.assert_allclose(W_far, W, rtol=0, atol=1e-6 * np.abs(W).max())
