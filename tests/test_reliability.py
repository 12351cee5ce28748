"""Hostile inputs, fallbacks with their diagnostics, and persistence without pickle."""

import json
import warnings

import numpy as np
import pytest

import kbfilter as kb
from kbfilter import ConditionalEmbedding, GaussianKernel, KernelBayesFilter, KernelBayesRule, NumericalWarning
from kbfilter.persistence import load


@pytest.fixture(scope="module")
def data():
    system = kb.systems.Oscillation()
    rng = np.random.default_rng(0)
    return system.simulate(200, rng), system.simulate(80, rng)


# -- persistence ---------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"rule": "original"}, {"transition": "knn", "n_neighbors": 20},
                                    {"estimate": "mode", "scale": 0.5}])
def test_save_load_continues_bit_identically(tmp_path, data, params):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3, **params).fit(states, obs)
    uninterrupted = kbf.batch_filter(test_obs)[0]
    kbf.reset()
    first = kbf.batch_filter(test_obs[:40])[0]
    path = kbf.save(tmp_path / "filter.npz")
    loaded = KernelBayesFilter.load(path)
    rest = loaded.batch_filter(test_obs[40:])[0]
    assert np.array_equal(np.vstack([first, rest]), uninterrupted)
    assert loaded.get_params() == kbf.get_params()


def test_rule_and_conditional_round_trip(tmp_path, data):
    (states, obs), (_, test_obs) = data
    kbr = KernelBayesRule(reg_prior=1e-3, reg_update=1e-2).fit(states, obs)
    kbr.save(tmp_path / "rule.npz")
    back = KernelBayesRule.load(tmp_path / "rule.npz")
    prior = kb.KernelMean(states[:50])
    assert np.array_equal(back.posterior(prior, test_obs[0]).weights, kbr.posterior(prior, test_obs[0]).weights)
    for method in ("exact", "knn", "nystrom", "icf", "random", "nw"):
        cme = ConditionalEmbedding(method=method, n_neighbors=20, rank=50, random_state=0).fit(states, obs)
        cme.save(tmp_path / f"{method}.npz")
        again = ConditionalEmbedding.load(tmp_path / f"{method}.npz")
        assert np.array_equal(again.predict_mean(test_obs), cme.predict_mean(test_obs))


def test_load_checks_the_class_the_version_and_damage(tmp_path, data):
    (states, obs), _ = data
    path = KernelBayesRule().fit(states, obs).save(tmp_path / "rule.npz")
    with pytest.raises(ValueError, match="expected a KernelBayesFilter"):
        KernelBayesFilter.load(path)
    # another format version
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    meta["version"] = 99
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "v99.npz", **arrays)
    with pytest.raises(ValueError, match="format version 99"):
        KernelBayesRule.load(tmp_path / "v99.npz")
    # a class outside the registry (e.g. something that would run code) is refused
    meta["version"] = 1
    meta["root"]["class"] = "Popen"
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "evil.npz", **arrays)
    with pytest.raises(ValueError, match="unknown class 'Popen'"):
        load(tmp_path / "evil.npz")
    # truncated
    raw = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable kbfilter file"):
        KernelBayesRule.load(tmp_path / "cut.npz")
    # a pickled object array inside is never unpickled
    np.savez(tmp_path / "pickled.npz", __meta__=arrays["__meta__"], a0=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="not a readable kbfilter file"):
        load(tmp_path / "pickled.npz")
    # not a zip at all
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="not a readable kbfilter file"):
        load(tmp_path / "text.npz")


def test_unsupported_attribute_is_refused_at_save(tmp_path, data):
    (states, obs), _ = data
    kbf = KernelBayesFilter().fit(states, obs)
    kbf.callback = lambda: None
    with pytest.raises(ValueError, match="callback"):
        kbf.save(tmp_path / "f.npz")


# -- fallbacks and their diagnostics ---------------------------------------------------------------
def test_prior_far_from_training_states_collapses_to_uniform_and_is_counted(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_x=GaussianKernel(0.3), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    kbf.reset(prior=np.full((5, 2), 40.0))  # every kernel value underflows to 0
    assert kbf.diagnostics["collapsed"] == 1
    np.testing.assert_allclose(kbf.weights, 1 / len(states))


def test_all_zero_kulsif_weights_use_the_uniform_ratio_and_are_counted(data):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    kbf.predict()
    kbf.weights_prior = -kbf.weights_prior  # a prior whose projection is negative everywhere: r = 0
    with pytest.warns(NumericalWarning, match="every KuLSIF weight is 0"):
        kbf.update(test_obs[0])
    assert kbf.diagnostics["uniform_ratio"] == 1
    assert np.all(np.isfinite(kbf.x)) and kbf.weights.sum() == pytest.approx(1.0)


def test_collapsed_weights_keep_the_previous_belief(data):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    kbf.predict()
    prior = kbf.weights_prior.copy()
    kbf.rule_.weights_from_projection = lambda mu, o: (np.zeros((len(mu), 1)), {})
    kbf.update(test_obs[0])
    assert kbf.diagnostics["collapsed"] == 1
    np.testing.assert_array_equal(kbf.weights, prior)


def test_nonpositive_weight_sum_is_clipped_and_counted(data):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    kbf.predict()
    signed = np.zeros((len(states), 1))
    signed[:3, 0] = [-2.0, 0.5, 0.5]
    kbf.rule_.weights_from_projection = lambda mu, o: (signed, {})
    kbf.update(test_obs[0])
    assert kbf.diagnostics["clipped"] == 1
    np.testing.assert_allclose(kbf.x, 0.5 * (states[1] + states[2]))


def test_failed_cholesky_gets_jitter_and_is_counted():
    rng = np.random.default_rng(1)
    x = np.repeat(rng.normal(size=(40, 2)), 3, axis=0)  # every state three times
    z = x + 0.1 * rng.normal(size=x.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        # a linear kernel of rank 2 with a negligible regulariser: G + n eps I is numerically singular
        kbr = KernelBayesRule(kernel_x=kb.LinearKernel(), reg_prior=1e-300, reg_update=1e-2).fit(x, z)
    assert kbr.diagnostics_["jitter"] + kbr.diagnostics_["lu"] >= 1
    assert np.all(np.isfinite(kbr.posterior(None, z[0]).weights))


def test_duplicate_training_states_are_fine(data):
    (states, obs), (test_states, test_obs) = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit([states, states], [obs, obs])
    means = kbf.batch_filter(test_obs)[0]
    assert np.all(np.isfinite(means))
    assert np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.15


def test_constant_observations_give_a_clear_error(data):
    (states, _), _ = data
    with pytest.raises(ValueError, match="kernel_z: bandwidth: the median pairwise distance"):
        KernelBayesFilter().fit(states, np.ones_like(states))
    # with a float bandwidth they are accepted (and carry no information)
    kbf = KernelBayesFilter(kernel_z=GaussianKernel(1.0)).fit(states, np.ones_like(states))
    assert np.all(np.isfinite(kbf.batch_filter(np.ones((5, 2)))[0]))


@pytest.mark.parametrize("bad", [np.array([np.nan, 0.0]), np.array([np.inf, 0.0]), np.array(["a", "b"]),
                                 np.array([1 + 1j, 0.0]), [[1.0, 2.0]]])
def test_bad_observations_are_rejected_with_a_message(data, bad):
    (states, obs), _ = data
    kbf = KernelBayesFilter().fit(states, obs)
    with pytest.raises(ValueError, match="z:"):
        kbf.update(bad)
