"""Hostile inputs, fallbacks with their diagnostics, and persistence without pickle."""

import copy
import inspect
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import kbfilter as kb
from kbfilter import GaussianKernel, KernelBayesFilter, KernelBayesRule, NumericalWarning
from kbfilter.persistence import VERSION, load


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


def test_a_tuned_filter_keeps_its_tuning_record_through_save_and_load(tmp_path, data):
    (states, obs), (_, test_obs) = data
    grid = {"kernel_x": [kb.GaussianKernel(), kb.LaplaceKernel()], "reg_update": (1e-3, 1e-1)}
    tuned = kb.tune_filter(KernelBayesFilter(reg_prior=1e-3), states, obs, param_grid=grid, validation_length=50,
                           progress=False, max_extensions=1)
    loaded = KernelBayesFilter.load(tuned.save(tmp_path / "tuned.npz"))
    for name in ("search_table_", "param_grid_", "extended_params_", "validation_nees_", "refit_time_"):
        assert repr(getattr(loaded, name)) == repr(getattr(tuned, name)), name
    assert repr(loaded.best_params_) == repr(tuned.best_params_)
    assert type(loaded.best_params_["kernel_x"]) is type(tuned.best_params_["kernel_x"])
    assert np.array_equal(loaded.batch_filter(test_obs)[0], tuned.batch_filter(test_obs)[0])
    # a filter that was not tuned has no record, saved or loaded
    plain = KernelBayesFilter.load(KernelBayesFilter().fit(states, obs).save(tmp_path / "plain.npz"))
    assert not any(hasattr(plain, name) for name in ("best_params_", "search_table_", "refit_time_"))
    # the record is untrusted input too: all of it or none, over the filter's own parameters
    arrays, meta = _arrays_and_meta(tmp_path / "tuned.npz")
    fields = meta["root"]["fields"]
    damaged = [
        (dict(fields, refit_time_=None), r"refit_time_ is None, expected a non-negative number"),
        ({k: v for k, v in fields.items() if k != "search_table_"}, r"holds \[.*\] but not \['search_table_'\]"),
        (dict(fields, param_grid_={"t": "dict", "items": {"bogus": {"t": "tuple", "items": [1, 2]}}}),
         "param_grid_ is not a grid over the filter's parameters"),
        (dict(fields, search_table_={"t": "list", "items": [{"t": "dict", "items": {"reg_update": 1}}]}),
         "search_table_ is not a list of evaluated settings"),
    ]
    for bad, message in damaged:
        with pytest.raises(ValueError, match="KernelBayesFilter: the file's tuning record.*" + message):
            load(_rewrite(tmp_path / "damaged.npz", arrays, dict(meta, root=dict(meta["root"], fields=bad))))


def test_a_window_regressor_tuned_on_a_given_grid_keeps_its_record_through_save_and_load(tmp_path, data):
    (states, obs), (_, test_obs) = data
    tuned = kb.tune_filter(kb.filters.WindowRegressor(hidden_layer_sizes=(8,), max_iter=20), states, obs,
                           param_grid={"window": (2, 4)}, validation_length=50, progress=False)
    loaded = kb.filters.WindowRegressor.load(tuned.save(tmp_path / "tuned.npz"))
    for name in ("best_params_", "search_table_", "param_grid_", "extended_params_", "validation_nees_",
                 "refit_time_"):
        assert repr(getattr(loaded, name)) == repr(getattr(tuned, name)), name
    assert np.array_equal(loaded.batch_filter(test_obs)[0], tuned.batch_filter(test_obs)[0])


def _arrays_and_meta(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return arrays, json.loads(arrays["__meta__"].tobytes())


def _rewrite(path, arrays, meta):
    arrays = dict(arrays, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    np.savez(path, **arrays)
    return path


def test_a_signed_file_loads_with_its_key_and_refuses_any_change(tmp_path, data):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter(transition="knn").fit(states, obs)
    path = kbf.save(tmp_path / "signed.npz", key="s3cret")
    loaded = KernelBayesFilter.load(path, key=b"s3cret")
    assert np.array_equal(loaded.batch_filter(test_obs)[0], kbf.batch_filter(test_obs)[0])
    assert isinstance(load(path), KernelBayesFilter)  # without a key the checksum is not read

    arrays, meta = _arrays_and_meta(path)
    # consistent tampering: valid values, so only the checksum can tell
    meta["root"]["fields"]["model_"]["fields"]["kernel_x"]["fields"]["bandwidth_"]["v"] = "2.5"
    changed_value = _rewrite(tmp_path / "value.npz", arrays, meta)
    arrays, meta = _arrays_and_meta(path)
    states_key = meta["root"]["fields"]["model_"]["fields"]["states"]["key"]
    arrays[states_key] = arrays[states_key] * 1.01
    changed_array = _rewrite(tmp_path / "array.npz", arrays, meta)
    for tampered in (changed_value, changed_array):
        assert isinstance(load(tampered), KernelBayesFilter)  # undetectable without the key
        with pytest.raises(ValueError, match="does not match its checksum"):
            load(tampered, key="s3cret")
    with pytest.raises(ValueError, match="does not match its checksum"):
        load(path, key="another")
    unsigned = kbf.save(tmp_path / "unsigned.npz")
    with pytest.raises(ValueError, match="carries no checksum"):
        load(unsigned, key="s3cret")
    for bad in ("", b"", 42):
        with pytest.raises(ValueError, match="key: expected a non-empty"):
            kbf.save(tmp_path / "bad.npz", key=bad)


def test_a_file_from_the_first_format_gives_a_clear_error():
    # written by kbfilter 0.1.0 before the format named its saved fields (a fitted filter, T = 30)
    old = Path(__file__).parent / "data" / "filter_format1.npz"
    with pytest.raises(ValueError, match=rf"file format 1, which this kbfilter \(file format {VERSION}\) cannot read; "
                                         r"fit the object again"):
        KernelBayesFilter.load(old)


def test_load_checks_the_class_the_versions_and_damage(tmp_path, data):
    (states, obs), _ = data
    path = KernelBayesRule().fit(states, obs).save(tmp_path / "rule.npz")
    with pytest.raises(ValueError, match="expected a KernelBayesFilter"):
        KernelBayesFilter.load(path)
    arrays, meta = _arrays_and_meta(path)
    assert meta["versions"]["kbfilter"] and meta["versions"]["numpy"] == np.__version__
    with pytest.raises(ValueError, match="file format 99"):
        KernelBayesRule.load(_rewrite(tmp_path / "v99.npz", arrays, dict(meta, version=99)))
    # a class outside the registry (e.g. something that would run code) is refused
    evil = json.loads(json.dumps(meta))
    evil["root"]["class"] = "Popen"
    with pytest.raises(ValueError, match="unknown class 'Popen'"):
        load(_rewrite(tmp_path / "evil.npz", arrays, evil))
    # so is a field the class does not declare
    extra = json.loads(json.dumps(meta))
    extra["root"]["fields"]["__class__"] = "x"
    with pytest.raises(ValueError, match=r"unexpected fields \['__class__'\]"):
        load(_rewrite(tmp_path / "extra.npz", arrays, extra))
    # truncated
    raw = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable kbfilter file"):
        KernelBayesRule.load(tmp_path / "cut.npz")
    # a pickled object array inside is never unpickled
    np.savez(tmp_path / "pickled.npz", __meta__=arrays["__meta__"], a0=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="damaged kbfilter file"):   # a0's header is read, never its data
        load(tmp_path / "pickled.npz")
    # not a zip at all
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="not a readable kbfilter file"):
        load(tmp_path / "text.npz")


@pytest.mark.parametrize("make, fitted", [
    (lambda states, obs: KernelBayesFilter().fit(states, obs), "model_"),
    (lambda states, obs: kb.KernelMonteCarloFilter(kb.systems.Oscillation(), n_particles=20).fit(states, obs),
     "model_"),
    (lambda states, obs: KernelBayesRule().fit(states, obs), "states_"),
    (lambda states, obs: kb.ConditionalEmbedding().fit(states, obs), "weights_"),
])
def test_fitted_state_without_the_fitted_part_it_belongs_to_is_refused(tmp_path, data, make, fitted):
    # an object saved before fit loads as it was, but a file whose fitted part was taken out while
    # the rest of what fit sets stays (a belief, a Gram matrix) is damaged, not unfitted
    (states, obs), _ = data
    arrays, meta = _arrays_and_meta(make(states, obs).save(tmp_path / "fitted.npz"))
    del meta["root"]["fields"][fitted]
    with pytest.raises(ValueError, match=rf"the file holds \[.*\] but not {fitted}, the fitted part"):
        load(_rewrite(tmp_path / "cut.npz", arrays, meta))


def test_scikit_learn_parts_need_the_scikit_learn_minor_version_that_wrote_them(tmp_path, data):
    import sklearn
    from sklearn.decomposition import PCA

    (states, obs), _ = data
    path = KernelBayesRule(features=PCA(2)).fit(states, obs).save(tmp_path / "pca.npz")
    arrays, meta = _arrays_and_meta(path)
    assert meta["versions"]["scikit-learn"] == sklearn.__version__
    KernelBayesRule.load(path)
    other = dict(meta, versions=dict(meta["versions"], **{"scikit-learn": "0.99.1"}))
    with pytest.raises(ValueError, match=r"written with scikit-learn 0\.99\.1; this environment has .*"
                                         r"Install scikit-learn 0\.99\.x"):
        KernelBayesRule.load(_rewrite(tmp_path / "old.npz", arrays, other))
    # a file without scikit-learn parts does not depend on its version
    plain = KernelBayesRule().fit(states, obs).save(tmp_path / "plain.npz")
    assert "scikit-learn" not in _arrays_and_meta(plain)[1]["versions"]


def test_only_declared_state_is_saved(tmp_path, data):
    (states, obs), (_, test_obs) = data
    kbf = KernelBayesFilter().fit(states, obs)
    kbf.batch_filter(test_obs[:5])
    kbf.note = "not part of the model"
    _, meta = _arrays_and_meta(kbf.save(tmp_path / "f.npz"))
    fields = set(meta["root"]["fields"])
    assert "note" not in fields and not any(name.startswith("_") for name in fields)
    assert {"model_", "weights", "x", "P"} <= fields
    assert set(meta["root"]["params"]) == set(kbf.get_params(deep=False))


def test_an_object_kbfilter_cannot_save_is_refused_by_name(tmp_path, data):
    from sklearn.preprocessing import FunctionTransformer

    (states, obs), _ = data
    kbf = KernelBayesFilter(features=FunctionTransformer(np.tanh)).fit(states, obs)
    with pytest.raises(ValueError, match="KernelBayesFilter.features: cannot save an object of type "
                                         "FunctionTransformer"):
        kbf.save(tmp_path / "f.npz")


# -- fallbacks and their diagnostics ---------------------------------------------------------------
def test_prior_far_from_training_states_collapses_to_uniform_and_is_counted(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_x=GaussianKernel(0.3), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    with pytest.warns(NumericalWarning, match="no weight was positive"):
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


def test_an_observation_no_training_observation_resembles_keeps_the_previous_belief(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_z=GaussianKernel(0.05), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    kbf.predict()
    prior = kbf.weights_prior.copy()
    with pytest.warns(NumericalWarning, match="kept the previous belief"):
        kbf.update([40.0, 40.0])  # k_z(z) underflows to 0 everywhere: the posterior weights vanish
    assert kbf.diagnostics["collapsed"] == 1 and kbf.diagnostics["nonpositive_sum"] == 1
    np.testing.assert_array_equal(kbf.weights, prior)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)  # reported once until reset
        kbf.update([40.0, 40.0])
    assert kbf.diagnostics["collapsed"] == 2
    kbf.reset()
    assert kbf.diagnostics["collapsed"] == 0


def test_nonpositive_weight_sum_is_clipped_and_counted(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    a, b = states[0], states[106]  # far apart (distance ~2.4)
    # a signed prior of positive mass (a prior of negative mass is refused) whose projection onto
    # the training states sums to < 0, with positive mass near b
    signed = kb.KernelMean(np.array([a, b]), [-1.0, 1.05])
    with pytest.warns(NumericalWarning, match="clipped, normalised positive part"):
        kbf.reset(prior=signed)
    assert kbf.diagnostics["clipped"] == 1
    assert np.all(kbf.weights >= 0) and kbf.weights.sum() == pytest.approx(1.0)
    assert np.linalg.norm(kbf.x - b) < np.linalg.norm(kbf.x - a) / 3


def test_failed_cholesky_gets_jitter_and_is_counted():
    rng = np.random.default_rng(1)
    x = np.repeat(rng.normal(size=(40, 2)), 3, axis=0)  # every state three times
    z = x + 0.1 * rng.normal(size=x.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        # every state three times and a negligible regulariser: G + n eps I is numerically singular
        kbr = KernelBayesRule(kernel_x=kb.GaussianKernel(1.0), reg_prior=1e-300, reg_update=1e-2).fit(x, z)
    assert kbr.diagnostics_["jitter"] + kbr.diagnostics_["lu"] >= 1
    assert np.all(np.isfinite(kbr.posterior(None, z[0]).weights))


@pytest.mark.parametrize("params", [{"approximation": "local"}, {"transition": "knn"},
                                    {"approximation": "nystrom", "transition": "knn"}])
def test_local_grams_that_needed_the_jitter_rule_are_counted_in_the_filters_diagnostics(params):
    """Every state three times and a negligible transition regulariser: each neighbourhood's Gram is
    singular, so the localized transition solves every one of the 120 by the jitter rule; the
    filter counts them as the warning does (the counts had been lost to the filter)."""
    rng = np.random.default_rng(1)
    x = np.repeat(rng.normal(size=(40, 2)), 3, axis=0)
    z = x + 0.1 * rng.normal(size=x.shape)
    with pytest.warns(NumericalWarning, match="Cholesky failed on 120 of 120 neighbourhoods"):
        kbf = KernelBayesFilter(reg_transition=1e-300, n_neighbors=6, **params).fit(x, z)
    assert kbf.diagnostics["transition_jitter"] + kbf.diagnostics["transition_lu"] == 120
    assert kbf.reset().diagnostics == kbf.diagnostics  # counted at fit: a reset keeps them
    assert np.all(np.isfinite(kbf.batch_filter(z[:20])[0]))


def _far_update(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_z=GaussianKernel(0.05), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    return lambda: kbf.update([40.0, 40.0])


def _far_batch(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_z=GaussianKernel(0.05), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    return lambda: kbf.batch_filter(np.full((3, 2), 40.0))


def _far_reset(data):
    (states, obs), _ = data
    kbf = KernelBayesFilter(kernel_x=GaussianKernel(0.3), reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    return lambda: kbf.reset(prior=np.full((5, 2), 40.0))


def _far_prior_posterior(data):
    (states, obs), _ = data
    kbr = KernelBayesRule(kernel_x=GaussianKernel(0.5), reg_prior=1e-2, reg_update=1e-2).fit(states, obs)
    return lambda: kbr.posterior(kb.KernelMean(np.full((10, 2), 50.0), kernel=GaussianKernel(1.0)), obs[0])


def _singular_fit(data):
    x = np.repeat(np.random.default_rng(1).normal(size=(40, 2)), 3, axis=0)
    return lambda: KernelBayesRule(kernel_x=GaussianKernel(1.0), reg_prior=1e-300, reg_update=1e-2).fit(x, x)


def _negative_mean(data):
    return lambda: kb.KernelMean([[0.0], [1.0], [5.0]], [0.5, -2.0, 0.5], kernel=GaussianKernel(1.0)).mean()


def _grid_edge(data):
    (states, obs), _ = data
    return lambda: kb.tune_filter(KernelBayesFilter(), states, obs, param_grid={"scale": [20.0, 40.0, 80.0]},
                                  validation_length=50, progress=False)


def _particles_missed(data):
    (states, obs), _ = data
    kmc = kb.KernelMonteCarloFilter(lambda X, u, rng: X + 50.0, n_particles=30, resample="ratio",
                                    random_state=0).fit(states, obs)
    return lambda: (kmc.predict(), kmc.update(obs[0]))


@pytest.mark.parametrize("call", [_far_update, _far_batch, _far_reset, _far_prior_posterior, _singular_fit,
                                  _negative_mean, _grid_edge, _particles_missed])
def test_a_warning_names_the_line_of_the_callers_code(data, call):
    act = call(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        act()
    assert caught, "the call was expected to warn"
    for w in caught:
        assert (w.filename, w.lineno) == (__file__, act.__code__.co_firstlineno), str(w.message)


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


def test_a_nan_in_a_training_log_is_located(data):
    # a log of many rows with one bad value: the message says where it is
    (states, obs), _ = data
    bad_states, bad_obs = states.copy(), obs.copy()
    bad_states[3, 1] = np.nan
    bad_obs[150, 0] = -np.inf
    # and, for a training log, how to mend it: cut it at the gap (dropping the rows would learn one
    # transition from the two steps around them)
    mend = (r"; for a gap in the log, cut it there and pass the pieces as lists of sequences, as "
            r"kbfilter.datasets.cut_at_gaps does \(dropping")
    with pytest.raises(ValueError, match=r"^states: contains NaN or infinite values \(the first at row 3: nan\)"
                                         + mend):
        KernelBayesFilter().fit(bad_states, obs)
    with pytest.raises(ValueError, match=r"^observations\[1\]: contains NaN or infinite values \(the first at "
                                         r"sample 50: -inf\)" + mend):
        KernelBayesFilter().fit([states[:100], states[100:]], [obs[:100], bad_obs[100:]])
    pieces = KernelBayesFilter().fit([states[:150], states[151:]], [bad_obs[:150], bad_obs[151:]])
    assert pieces.n_train_ == len(states) - 1
    # a piece of one step (between two gaps) makes no transition: the refusal says to leave it out
    short = r"^states\[1\]: expected at least 2 samples \(two steps make a transition\), got n_samples=1; leave out"
    with pytest.raises(ValueError, match=short):
        KernelBayesFilter().fit([states[:149], states[150:151], states[152:]], [obs[:149], obs[150:151], obs[152:]])
    with pytest.raises(ValueError, match=short):
        kb.filters.LearnedMotion().fit([states[:149], states[150:151], states[152:]])
    # the motion learned from states alone says the same
    with pytest.raises(ValueError, match=r"^states: contains NaN or infinite values \(the first at row 3: nan\)"
                                         + mend):
        kb.filters.LearnedMotion().fit(bad_states)
    with pytest.raises(ValueError, match=r"^weights: contains NaN or infinite values \(the first at entry 2: inf\)$"):
        kb.KernelMean(states[:4], [0.1, 0.2, np.inf, 0.3])


@pytest.mark.parametrize("bad", [np.array([np.nan, 0.0]), np.array([np.inf, 0.0]), np.array(["a", "b"]),
                                 np.array([1 + 1j, 0.0]), [[1.0, 2.0]]])
def test_bad_observations_are_rejected_with_a_message(data, bad):
    (states, obs), _ = data
    kbf = KernelBayesFilter().fit(states, obs)
    with pytest.raises(ValueError, match="z:"):
        kbf.update(bad)


def test_a_ragged_list_is_named_where_numpy_would_not():
    # a shape test before the checks raised numpy's message about an inhomogeneous array, which
    # names no argument
    states, obs = kb.systems.Rotation().simulate(100, rng=0)
    ragged = [[1.0, 2.0], [3.0]]
    kbf = KernelBayesFilter().fit(states, obs)
    for call, name in [(lambda: kbf.reset(prior=ragged), "prior"),
                       (lambda: kbf.reset(prior=(np.zeros(2), np.eye(2), 1)), "prior"),
                       (lambda: kb.KernelBayesRule().fit(states, obs).posterior(None, ragged), "z"),
                       (lambda: kb.stats.nees(ragged, states[:2], np.stack([np.eye(2)] * 2)), "truth"),
                       (lambda: kb.stats.mean_nees(ragged, states[:2], np.stack([np.eye(2)] * 2)), "truth")]:
        with pytest.raises(ValueError, match=f"^{name}: expected a numeric"):
            call()


def _every_filter(states, obs):
    system = kb.systems.Oscillation()
    fitted = [KernelBayesFilter(), KernelBayesFilter(approximation="local"),
              kb.KernelMonteCarloFilter(system, n_particles=30, random_state=0),
              kb.filters.NearestNeighbourParticleFilter(motion=system, n_particles=30, random_state=0),
              kb.filters.WindowRegressor()]
    given = [kb.filters.ExtendedKalman(system), kb.filters.UnscentedKalman(system),
             kb.filters.ParticleFilter(system, n_particles=50, rng=0),
             kb.filters.InteractingMultipleModel([system, system], 0.1)]
    return [f.fit(states, obs) for f in fitted] + given


@pytest.mark.parametrize("bad, message", [(np.zeros(3), r"zs\[3\]: expected length 2"),
                                          (np.array([np.nan, 0.0]), r"zs\[3\]: contains NaN")])
def test_a_bad_observation_late_in_a_run_is_refused_before_the_first_step(data, bad, message):
    (states, obs), (_, test_obs) = data
    for filt in _every_filter(states, obs):
        name = type(filt).__name__
        filt.batch_filter(test_obs[:5])  # a belief to keep (the Kalman filters start from their first observation)
        before = (filt.x.copy(), filt.P.copy())
        zs = [test_obs[5], None, test_obs[6], bad, test_obs[7]]
        with pytest.raises(ValueError, match=message):
            filt.batch_filter(zs)
        np.testing.assert_array_equal(filt.x, before[0], err_msg=name)
        np.testing.assert_array_equal(filt.P, before[1], err_msg=name)
        if hasattr(filt, "smooth") and getattr(filt, "approximation", None) != "local":
            with pytest.raises(ValueError, match=message):
                filt.smooth(zs)
            np.testing.assert_array_equal(filt.x, before[0], err_msg=name)


def test_a_run_given_as_a_dataframe_is_a_run_of_its_rows(data):
    # a DataFrame iterates over its column labels: a run read with pandas was refused as scalars
    pd = pytest.importorskip("pandas")
    (states, obs), (_, test_obs) = data
    for filt in _every_filter(states, obs):
        name = type(filt).__name__
        frame = pd.DataFrame(test_obs[:6], columns=["range", "bearing"])
        expected = copy.deepcopy(filt).batch_filter(test_obs[:6])
        for got, want in zip(filt.batch_filter(frame), expected):
            np.testing.assert_array_equal(got, want, err_msg=name)
        if hasattr(filt, "smooth") and getattr(filt, "approximation", None) != "local":
            twin = copy.deepcopy(filt)
            for got, want in zip(filt.smooth(frame), twin.smooth(test_obs[:6])):
                np.testing.assert_array_equal(got, want, err_msg=name)
    kbf = KernelBayesFilter().fit(states, obs)
    kbf.predict()
    np.testing.assert_array_equal(kbf.log_likelihood_of(pd.DataFrame(test_obs[:4])),
                                  kbf.log_likelihood_of(test_obs[:4]))


def test_pandas_missing_value_is_a_nan_located_as_any_other():
    """pd.NA (pandas' nullable columns, as read_csv gives with dtype_backend="numpy_nullable") had
    been "expected a numeric array (... not 'NAType')": now the row, and the way to mend the log."""
    pd = pytest.importorskip("pandas")
    states, obs = kb.systems.Rotation().simulate(60, rng=0)
    frame = pd.DataFrame(states, columns=["x", "y"]).astype("Float64")
    frame.iloc[3, 1] = pd.NA
    with pytest.raises(ValueError, match=r"^states: contains NaN or infinite values \(the first at row 3: nan\); "
                                         r"for a gap in the log, cut it there"):
        KernelBayesFilter().fit(frame, obs)
    pieces, _ = kb.datasets.cut_at_gaps(frame, obs)
    assert [len(p) for p in pieces] == [3, 56]
    np.testing.assert_array_equal(pieces[1], states[4:])
    kbf = KernelBayesFilter().fit(states, obs)
    kbf.predict()
    with pytest.raises(ValueError, match=r"^z: contains NaN or infinite values; pass None"):
        kbf.update(pd.Series([obs[0, 0], pd.NA], dtype="Float64"))
    # a column of them without a missing value is read as its numbers, to the last bit (a DataFrame hands
    # its values over laid out by column: BLAS had rounded their products otherwise)
    filled = states.copy()
    filled[3, 1] = 0.5
    np.testing.assert_array_equal(KernelBayesFilter().fit(frame.fillna(0.5), obs).batch_filter(obs[:5])[0],
                                  KernelBayesFilter().fit(filled, obs).batch_filter(obs[:5])[0])


def test_controls_given_as_a_dataframe_are_a_run_of_their_rows():
    pd = pytest.importorskip("pandas")
    system = kb.systems.ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])
    states, controls, obs = system.simulate(150, rng=0)
    _, test_controls, test_obs = system.simulate(10, rng=1)
    kbf = KernelBayesFilter().fit(states, obs, controls=controls)
    frame = pd.DataFrame(test_controls, columns=["u"])
    for got, want in zip(copy.deepcopy(kbf).batch_filter(pd.DataFrame(test_obs), us=frame),
                         copy.deepcopy(kbf).batch_filter(test_obs, us=test_controls)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(kbf.forecast(3, us=frame[:3]), kbf.forecast(3, us=test_controls[:3])):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad, message", [(np.zeros(2), r"us\[3\]: expected a control of shape \(1,\), got shape "
                                                        r"\(2,\)"),
                                          (np.array([np.inf]), r"us\[3\]: contains NaN"),
                                          (None, r"us\[3\]: expected a control of shape \(1,\), got None"),
                                          ("all missing", r"us: this filter takes a control of shape \(1,\) at every")])
def test_a_bad_control_late_in_a_run_is_refused_before_the_first_step(bad, message):
    system = kb.systems.ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])
    states, controls, obs = system.simulate(150, rng=0)
    _, test_controls, test_obs = system.simulate(10, rng=1)
    filters = [KernelBayesFilter().fit(states, obs, controls=controls),
               kb.KernelMonteCarloFilter(system, n_particles=30, random_state=0).fit(states, obs),
               kb.filters.ExtendedKalman(system), kb.filters.ParticleFilter(system, n_particles=50, rng=0)]
    for filt in filters:
        filt.batch_filter(test_obs[:3], us=test_controls[:3])
        before = (filt.x.copy(), filt.P.copy())
        us = None if isinstance(bad, str) else [*test_controls[3:6], bad, test_controls[6]]
        with pytest.raises(ValueError, match=message):
            filt.batch_filter(test_obs[3:8], us=us)
        np.testing.assert_array_equal(filt.x, before[0], err_msg=type(filt).__name__)
        np.testing.assert_array_equal(filt.P, before[1], err_msg=type(filt).__name__)
    # a filter without controls refuses one before its first step, by the control's index
    kbf = KernelBayesFilter().fit(states, obs)
    with pytest.raises(ValueError, match=r"us\[2\]: this filter takes no control; expected None"):
        kbf.batch_filter(test_obs[:4], us=[None, None, test_controls[2], None])


def test_a_one_dimensional_control_may_be_a_number_as_fit_takes_them():
    # fit took a run of one-dimensional controls as a 1-D array, but every step refused a number
    # ("us[0]: expected a 1-D array, got shape ()"); a NaN control to a known motion was reported as
    # a shape ("expected a finite control of shape (1,) or (1, 1), got shape (1, 1)")
    system = kb.systems.ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])
    states, controls, obs = system.simulate(150, rng=0)
    _, test_controls, test_obs = system.simulate(8, rng=1)
    filters = [KernelBayesFilter().fit(states, obs, controls=controls[:, 0]),
               kb.KernelMonteCarloFilter(system, n_particles=30, random_state=0).fit(states, obs),
               kb.filters.ExtendedKalman(system), kb.filters.UnscentedKalman(system),
               kb.filters.ParticleFilter(system, n_particles=50, rng=0)]
    for filt in filters[2:]:
        filt.initialize(np.zeros(1), np.eye(1))
    for filt in filters:
        name = type(filt).__name__
        for got, want in zip(copy.deepcopy(filt).batch_filter(test_obs, us=test_controls[:, 0]),
                             copy.deepcopy(filt).batch_filter(test_obs, us=test_controls)):
            np.testing.assert_array_equal(got, want, err_msg=name)
        for got, want in zip(filt.forecast(3, us=[0.5, -0.5, 1.0]), filt.forecast(3, us=[[0.5], [-0.5], [1.0]])):
            np.testing.assert_array_equal(got, want, err_msg=name)
        twin = copy.deepcopy(filt)
        filt.predict(0.5)
        twin.predict(np.array([0.5]))
        np.testing.assert_array_equal(filt.x, twin.x, err_msg=name)
        with pytest.raises(ValueError, match=r"^u: contains NaN or infinite values$"):
            filt.predict(np.nan)
        with pytest.raises(ValueError, match=r"u: expected a control of shape \(1,\), got shape \(2,\)"):
            filt.predict([0.5, 0.5])


def _numeric_parameters(cls):
    return [(cls, p.name) for p in inspect.signature(cls).parameters.values()
            if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)]


@pytest.mark.parametrize("cls, name", [pair for cls in (kb.systems.Oscillation, kb.systems.Rotation,
                                                        kb.systems.MovingSprite, kb.systems.CameraOrientation)
                                       for pair in _numeric_parameters(cls)])
def test_a_simulated_system_refuses_a_parameter_it_cannot_simulate_with_by_name(cls, name):
    # NaN and infinity made NaN trajectories without a word; text raised float()'s own message; a
    # huge noise overflowed when squared, and an infinite image side raised OverflowError
    for bad in (np.nan, np.inf, "abc", 1e300):
        with pytest.raises(ValueError, match=f"^{name}: expected"):
            cls(**{name: bad})
    states, obs = cls().simulate(3, rng=0)
    assert np.all(np.isfinite(states)) and np.all(np.isfinite(obs))


@pytest.mark.parametrize("system, u", [(kb.systems.Oscillation(), None), (kb.systems.ConstantVelocity(), None),
                                       (kb.systems.MovingSprite(size=16), None), (kb.systems.CameraOrientation(), None),
                                       (kb.systems.RobotInRoom(width=16, height=8), [0.1, 0.0])],
                         ids=lambda v: type(v).__name__)
def test_a_systems_samplers_take_a_seed_as_every_random_choice_does(system, u):
    # an int raised "'int' object has no attribute 'standard_normal'"
    x0 = system.initial_state(3)
    np.testing.assert_array_equal(x0, system.initial_state(np.random.default_rng(3)))
    X = np.atleast_2d(x0)
    kwargs = {} if u is None else {"u": u}
    np.testing.assert_array_equal(system.sample_transition(X, 5, **kwargs),
                                  system.sample_transition(X, np.random.default_rng(5), **kwargs))
    np.testing.assert_array_equal(system.sample_observation(X, 7),
                                  system.sample_observation(X, np.random.default_rng(7)))
    for bad in ("abc", -1, 1.5):
        with pytest.raises(ValueError, match="^rng: expected None, a non-negative int"):
            system.sample_transition(X, bad, **kwargs)


def test_a_systems_error_refuses_estimates_that_do_not_match_the_states():
    # numpy broadcast one column of estimates against two of states and scored that
    states, _ = kb.systems.Oscillation().simulate(5, rng=0)
    assert kb.systems.Oscillation().errors(states + 1.0, states) == {"mse": pytest.approx(2.0)}
    with pytest.raises(ValueError, match=r"^estimates: expected shape \(5, 2\) \(one estimate for each"):
        kb.systems.Oscillation().errors(states[:, :1], states)
    with pytest.raises(ValueError, match=r"^states: contains NaN"):
        kb.systems.Oscillation().errors(states, np.full_like(states, np.nan))
    robot = kb.systems.RobotInRoom(width=16, height=8)
    poses = robot.simulate(4, rng=0)[0]
    with pytest.raises(ValueError, match=r"^estimates: expected shape \(4, 4\)"):
        robot.errors(poses[:, :2], poses)
    assert robot.errors(poses, poses) == {"mse": 0.0, "heading_error_deg": 0.0}


_SENSOR = kb.systems.LinearGaussianSensor(H=np.eye(2, 4), R=np.eye(2), offset=np.zeros(2), prior_mean=np.zeros(4),
                                          prior_cov=np.eye(4))


@pytest.mark.parametrize("model", [kb.systems.Oscillation(), kb.systems.ConstantVelocity(),
                                   kb.systems.PositionFixes(5.0), kb.systems.RangeBearing(), _SENSOR,
                                   kb.systems.MovingSprite(), kb.systems.RobotInRoom(width=16, height=8)],
                         ids=lambda m: type(m).__name__)
def test_an_observation_likelihood_refuses_an_observation_of_another_shape(model):
    # numpy broadcast a one-value z against every state's mean observation: a likelihood of nothing
    X = np.zeros((3, 4)) + [0.5, 0.5, 0.0, 1.0]
    if isinstance(model, (kb.systems.Oscillation, kb.systems.MovingSprite)):
        X = X[:, :2]
    z = np.full(model.obs_shape, 0.5)
    loglik = model.observation_loglik(z, X)
    assert loglik.shape == (3,) and np.all(np.isfinite(loglik))
    np.testing.assert_array_equal(model.observation_loglik(z.ravel(), X), loglik)  # flattened, as filters hold it
    for bad, message in ((np.zeros(1), "z: expected "), (np.zeros((3, *model.obs_shape)), "z: expected "),
                         (np.full(model.obs_shape, np.nan), "z: contains NaN"), (None, "z: expected")):
        with pytest.raises(ValueError, match=f"^{message}"):
            model.observation_loglik(bad, X)


@pytest.mark.parametrize("system, name, good", [(kb.systems.MovingSprite(), "positions", [[0.1, 0.2]]),
                                                (kb.systems.CameraOrientation(), "angles", [0.3])])
def test_rendering_refuses_what_it_cannot_draw_by_name(system, name, good):
    # a NaN drew an image of NaNs (the sprite) or a view from an arbitrary column (the camera)
    # without a word, and None raised an IndexError or numpy's cast warning
    image = system.render(good)
    assert image.shape[0] == 1 and np.all(np.isfinite(image))
    np.testing.assert_array_equal(system.render(np.asarray(good)[0]), image)  # one point alone
    for bad in (np.full_like(np.asarray(good, dtype=float), np.nan), None, "abc"):
        with pytest.raises(ValueError, match=f"^{name}: "):
            system.render(bad)


@pytest.mark.parametrize("approximation", ["exact", "local"])
def test_a_far_training_state_is_warned_about_and_counted(data, approximation):
    (states, obs), _ = data
    far = states.copy()
    far[17] = 1e3
    with pytest.warns(UserWarning, match="1 training state.* robust spreads"):
        kbf = KernelBayesFilter(approximation=approximation).fit(far, obs)
    assert kbf.diagnostics["outlying training states"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clean = KernelBayesFilter(approximation=approximation).fit(states, obs)
    assert "outlying training states" not in clean.diagnostics
    if approximation == "local":
        more = far[:50].copy()
        more[3] = -5e2
        with pytest.warns(UserWarning, match="2 training state"):
            clean.partial_fit(more, obs[:50])  # the new states judged against the whole log: 1e3 and -5e2
        assert clean.diagnostics["outlying training states"] == 2


def test_training_values_past_the_bound_are_refused_by_name(data):
    (states, obs), _ = data
    big = states.copy()
    big[3, 1] = 1e200
    with pytest.raises(ValueError, match=r"states: holds values up to 1e\+200"):
        KernelBayesFilter().fit(big, obs)
    with pytest.raises(ValueError, match="observations: holds values"):
        KernelBayesFilter().fit(states, obs * 1e150)


def test_the_embedding_and_the_rule_refuse_training_values_past_the_filters_bound():
    # one state entry at 3e226 among states of size 1e90 (a median bandwidth of their own size):
    # the kNN embedding's local solves overflowed and its means were NaN, with numpy's warnings only
    rng = np.random.default_rng(0)
    states, obs = 1e90 * rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    states[2, 1] = 3e226
    for method in ("exact", "knn"):
        with pytest.raises(ValueError, match=r"^A: holds values up to 3e\+226 in size; training values must lie "):
            kb.ConditionalEmbedding(method=method, n_neighbors=3).fit(states, obs)
    with pytest.raises(ValueError, match=r"^B: holds values up to 1e\+150"):
        kb.ConditionalEmbedding().fit(obs, np.full((5, 1), 1e150))
    with pytest.raises(ValueError, match=r"^states: holds values up to 3e\+226"):
        kb.KernelBayesRule().fit(states, obs)
    with pytest.raises(ValueError, match=r"^observations: holds values up to 1e\+150"):
        kb.KernelBayesRule().fit(obs, np.full((5, 1), 1e150))
    # at the bound's own scale they still fit, and answer finitely far from the data
    states[2, 1] = 1e100
    means = kb.ConditionalEmbedding(method="knn", n_neighbors=3).fit(states, obs).predict_mean(1e169 * np.ones((2, 3)))
    assert np.all(np.isfinite(means))


def test_tuning_in_threads_leaves_the_processs_warnings_as_they_were():
    """Candidates fitted in threads (joblib's threading backend) had each swapped the process's
    warning filters in and out: the last to finish restored another's "ignore everything", and no
    warning of the process was seen again."""
    import joblib

    states, obs = kb.systems.Rotation().simulate(200, rng=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            with joblib.parallel_config(backend="threading"):
                kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, n_jobs=2, progress=False)
            warnings.warn("after tuning", UserWarning)
    assert [str(w.message) for w in caught].count("after tuning") == 2
