"""The kernel Bayes filter on a bounded support (``approximation="local"``)."""

import re
import warnings

import numpy as np
import pytest

import kbfilter as kb
from kbfilter.filters.local import AUTO_LOCAL_T, UNTILTED, LocalFilterModel
from kbfilter.persistence import load, save


@pytest.fixture(scope="module")
def oscillation():
    system = kb.systems.Oscillation()
    return system.simulate(600, rng=0), system.simulate(60, rng=1)


def _mse(means, truth):
    return float(np.mean(np.sum((means - truth) ** 2, axis=1)))


# the exact filter's original rule solves through a low-rank factor of G_z, which KernelBayesRule
# documents to differ from the dense solve by about 2e-8 relative at delta = 1e-2; the local filter
# solves densely on its support
@pytest.mark.parametrize("rule, rtol", [("iw", 1e-8), ("original", 1e-6)])
def test_a_support_holding_every_state_is_the_exact_filter(oscillation, rule, rtol):
    (X, Z), (_, Zt) = oscillation
    params = dict(rule=rule, reg_prior=1e-2, reg_update=1e-2, n_neighbors=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        exact = kb.KernelBayesFilter(transition="knn", **params).fit(X, Z)
        local = kb.KernelBayesFilter(approximation="local", support=len(X), **params).fit(X, Z)
        expected, covs, priors, _ = exact.batch_filter(Zt)
        means, local_covs, local_priors, _ = local.batch_filter(Zt)
        # and its smoother is the exact filter's, missing observations included
        zs = [None if 10 <= t < 14 else z for t, z in enumerate(Zt)]
        smoothed, smoothed_covs = exact.smooth(zs)
        local_smoothed, local_smoothed_covs = local.smooth(zs)
    scale = np.abs(expected).max()
    assert np.abs(means - expected).max() <= rtol * scale
    assert np.abs(priors - local_priors).max() <= rtol * scale
    assert np.abs(covs - local_covs).max() <= rtol * np.abs(covs).max()
    assert local.dropped_mass == 0.0
    np.testing.assert_allclose(local.weights, exact.weights, atol=rtol * np.abs(exact.weights).max())
    assert np.abs(local_smoothed - smoothed).max() <= rtol * np.abs(smoothed).max()
    assert np.abs(local_smoothed_covs - smoothed_covs).max() <= rtol * np.abs(smoothed_covs).max()
    # and so are the residual and the predicted observation's covariance of the last update
    np.testing.assert_allclose(local.y, exact.y, atol=rtol * np.abs(Zt).max())
    np.testing.assert_allclose(local.S, exact.S, atol=rtol * np.abs(exact.S).max())


@pytest.mark.parametrize("prior_neighbors", [0, 3])
def test_a_bounded_support_keeps_the_belief_small_and_tracks(oscillation, prior_neighbors):
    (X, Z), (Xt, Zt) = oscillation
    exact = kb.KernelBayesFilter(transition="knn", n_neighbors=20).fit(X, Z)
    local = kb.KernelBayesFilter(approximation="local", support=100, n_neighbors=20,
                                 prior_neighbors=prior_neighbors).fit(X, Z)
    baseline = _mse(exact.batch_filter(Zt)[0], Xt)
    dropped, sizes, means = [], [], []
    for z in Zt:
        local.predict()
        local.update(z)
        dropped.append(local.dropped_mass)
        sizes.append(np.count_nonzero(local.weights))
        means.append(local.x)
    # the update solves on the drawn states and the neighbours each one brings
    assert max(sizes) <= 100 * (prior_neighbors + 1)
    assert (max(sizes) > 100) == (prior_neighbors > 0)
    assert all(0.0 <= d < 1.0 for d in dropped) and max(dropped) > 0
    # a few hundred states of a 600-state log: near the exact filter, and far better than no filter
    assert _mse(np.array(means), Xt) <= 1.25 * baseline
    assert _mse(np.array(means), Xt) < 0.5 * _mse(np.tile(X.mean(axis=0), (len(Xt), 1)), Xt)


def test_prior_neighbours_covering_the_log_project_the_prior_as_the_exact_filter(oscillation):
    (X, Z), (_, Zt) = oscillation
    params = dict(reg_prior=1e-2, reg_update=1e-2, n_neighbors=20)
    w = np.zeros(len(X))
    w[[10, 200, 201, 400]] = [0.1, 0.4, 0.3, 0.2]
    exact = kb.KernelBayesFilter(transition="knn", **params).fit(X, Z).reset(weights=w)
    exact.predict()
    exact.update(Zt[0])
    steps = {}
    for neighbours in (0, len(X) - 1):
        # a prediction on at most 4 x 20 states: kept whole, nothing drawn
        local = kb.KernelBayesFilter(approximation="local", support=150, prior_neighbors=neighbours, **params)
        local.fit(X, Z).reset(weights=w)
        local.predict()
        local.update(Zt[0])
        assert local.dropped_mass == 0.0
        steps[neighbours] = local
    # every training state is a neighbour: the prior is projected onto all of them, as the exact
    # filter projects it, and the update is the exact filter's
    every = steps[len(X) - 1]
    np.testing.assert_allclose(every.x_prior, exact.x_prior, rtol=0, atol=1e-12)
    np.testing.assert_allclose(every.weights, exact.weights, rtol=0, atol=1e-8 * np.abs(exact.weights).max())
    np.testing.assert_allclose(every.x, exact.x, rtol=0, atol=1e-8 * np.abs(exact.x).max())
    np.testing.assert_allclose(every.P, exact.P, rtol=0, atol=1e-8 * np.abs(exact.P).max())
    # without them the prior is projected onto the prediction's own states: another posterior
    assert np.abs(steps[0].x - exact.x).max() > 1e-3 * np.abs(exact.x).max()


def test_prior_neighbors_is_checked_at_the_boundary(oscillation):
    (X, Z), _ = oscillation
    for value, message in ((-1, "expected an integer >= 0, got -1"), (1.5, "expected an integer, got 1.5"),
                           (True, "expected an integer, got True")):
        with pytest.raises(ValueError, match=f"prior_neighbors: {re.escape(message)}"):
            kb.KernelBayesFilter(approximation="local", prior_neighbors=value).fit(X, Z)
    local = kb.KernelBayesFilter(approximation="local", support=64).fit(X, Z)
    with pytest.raises(ValueError, match="prior_neighbors: expected an integer >= 0"):
        local.with_params(prior_neighbors=-2)


def test_draws_keep_every_state_worth_a_draw_and_drop_only_the_others(oscillation):
    (X, Z), _ = oscillation
    model = kb.KernelBayesFilter(approximation="local", support=50).fit(X, Z).model_
    rng = np.random.default_rng(3)
    values = rng.exponential(size=400) ** 3
    values /= values.sum()
    support = np.sort(rng.choice(len(X), size=400, replace=False))
    tilt = rng.uniform(size=400)
    drawn, kept, dropped = model.drawn(values, support, tilt)
    q = values * (tilt + UNTILTED * (values @ tilt) / values.sum())
    q /= q.sum()
    assert len(kept) <= 50 and set(kept) <= set(support)
    # a state with at least 1/50 of the draw probability is always drawn
    assert set(support[q >= 1 / 50]) <= set(kept)
    # what is dropped is the mass of states each holding less than one draw
    lost = ~np.isin(support, kept)
    assert dropped == pytest.approx(values[lost].sum() / values.sum())
    assert np.all(q[lost] < 1 / 50)
    # importance weights: a belief that the draws divide evenly comes back as it was
    even, states, none = model.drawn(np.full(10, 0.1), support[:10], np.ones(10))
    np.testing.assert_allclose(even, np.full(10, 0.1), rtol=1e-12)
    assert list(states) == list(support[:10]) and none == 0.0


def test_an_observation_far_from_every_training_observation_draws_by_the_mass_alone(oscillation):
    (X, Z), (_, Zt) = oscillation
    filt = kb.KernelBayesFilter(approximation="local", support=50).fit(X, Z)
    rng = np.random.default_rng(4)
    values = rng.exponential(size=400)
    values /= values.sum()
    support = np.sort(rng.choice(len(X), size=400, replace=False))
    # a tilt that is zero everywhere says nothing: the draw is the untilted one
    for got, expected in zip(filt.model_.drawn(values, support, np.zeros(400)),
                             filt.model_.drawn(values, support, np.ones(400))):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    # and in a step: the observation kernel underflows on every state, no NaN is formed, the update
    # falls back to the prediction (reported), and the dropped mass is a share of the belief
    filt.batch_filter(Zt[:5])
    filt.predict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filt.update(np.full(Z.shape[1], 1e300))
    # only the library's own reports: numpy's "invalid value" would mean a NaN was formed
    assert all(isinstance(w.message, kb.NumericalWarning) for w in caught)
    assert any("kept the previous belief" in str(w.message) for w in caught)
    assert 0.0 <= filt.dropped_mass < 1.0
    np.testing.assert_array_equal(filt.x, filt.x_prior)


def test_a_fitted_local_filter_is_linear_in_the_log():
    system = kb.systems.Rotation()

    def size(T):
        model = kb.KernelBayesFilter(approximation="local", n_neighbors=10).fit(*system.simulate(T, rng=0)).model_
        assert isinstance(model, LocalFilterModel)
        return model.states.nbytes + model.observations.nbytes + model.successors.nbytes

    assert 1.8 <= size(4000) / size(2000) <= 2.2


@pytest.mark.parametrize("prior_neighbors", [0, 2])
def test_save_load_continues_the_same_run(oscillation, tmp_path, prior_neighbors):
    (X, Z), (_, Zt) = oscillation
    filt = kb.KernelBayesFilter(approximation="local", support=80, n_neighbors=20,
                                prior_neighbors=prior_neighbors).fit(X, Z)
    filt.batch_filter(Zt[:10])
    filt.predict()
    path = tmp_path / "local.npz"
    save(filt, path)
    loaded = load(path)
    assert loaded.dropped_mass == filt.dropped_mass
    filt.update(Zt[10])
    loaded.update(Zt[10])
    np.testing.assert_array_equal(filt.batch_filter(Zt[11:])[0], loaded.batch_filter(Zt[11:])[0])


def test_auto_picks_the_exact_filter_on_short_logs_and_the_local_one_on_long():
    system = kb.systems.Rotation()
    short = kb.KernelBayesFilter(approximation="auto").fit(*system.simulate(300, rng=0))
    long = kb.KernelBayesFilter(approximation="auto", n_neighbors=10).fit(*system.simulate(AUTO_LOCAL_T + 1, rng=0))
    assert short.rule_ is not None and short.projection_operator_ is not None
    assert long.rule_ is None and isinstance(long.model_, LocalFilterModel)
    _, zs = system.simulate(20, rng=1)
    assert np.all(np.isfinite(long.batch_filter(zs)[0]))


def test_the_local_filter_reports_a_likelihood_and_refuses_what_it_cannot_do(oscillation):
    (X, Z), (_, Zt) = oscillation
    filt = kb.KernelBayesFilter(approximation="local", support=80).fit(X, Z)
    filt.predict()
    filt.update(Zt[0])
    assert np.isfinite(filt.log_likelihood)
    with pytest.raises(ValueError, match="approximation"):
        kb.KernelBayesFilter(approximation="local", compress=50).fit(X, Z)
    with pytest.raises(ValueError, match="approximation"):
        kb.KernelBayesFilter(approximation="local").fit(X, Z, controls=np.zeros((len(X), 1)))
    with pytest.raises(ValueError, match="support"):
        kb.KernelBayesFilter(approximation="local", support=0).fit(X, Z)
    with pytest.raises(ValueError, match="approximation"):
        kb.KernelMonteCarloFilter(motion=kb.systems.Oscillation(), approximation="local").fit(X, Z)
    # weights kept from another filter are a start
    start = np.zeros(len(X))
    start[:5] = 0.2
    filt.reset(weights=start)
    assert np.count_nonzero(filt.weights) == 5


def test_the_same_data_give_the_same_numbers(oscillation):
    (X, Z), (_, Zt) = oscillation
    runs = [kb.KernelBayesFilter(approximation="local", support=60).fit(X, Z).batch_filter(Zt)[0] for _ in range(2)]
    np.testing.assert_array_equal(*runs)


@pytest.mark.parametrize("kernel", [kb.GaussianKernel(scale=0.5, standardise=True), kb.LaplaceKernel()])
def test_radial_kernels_in_bandwidths_give_their_gram_matrix(kernel):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(30, 3)) * [1.0, 10.0, 0.1], rng.normal(size=(7, 3))
    kernel = kernel.fit(A)
    UA, UB = kernel.in_bandwidths(A), kernel.in_bandwidths(B)
    sq = ((UA[:, None, :] - UB[None, :, :]) ** 2).sum(axis=-1)
    np.testing.assert_allclose(kernel.of_squared_distance(sq), kernel(A, B), rtol=1e-12, atol=1e-14)


def test_a_tampered_share_in_a_saved_file_is_refused(oscillation, tmp_path):
    (X, Z), _ = oscillation
    filt = kb.KernelBayesFilter(approximation="local", support=80).fit(X, Z)
    save(filt, tmp_path / "good.npz")
    filt.dropped_mass = 3.0
    save(filt, tmp_path / "tampered.npz")
    with pytest.raises(ValueError, match="dropped_mass"):
        load(tmp_path / "tampered.npz")
    assert isinstance(load(tmp_path / "good.npz").model_, LocalFilterModel)


@pytest.mark.parametrize("quantile", [None, 0.99])
def test_partial_fit_in_pieces_equals_one_fit_on_the_whole(quantile):
    system = kb.systems.Oscillation()
    first, second, third = (system.simulate(n, rng=seed) for n, seed in ((400, 0), (300, 1), (250, 2)))
    _, zs = system.simulate(60, rng=3)
    # the prior's neighbours (a step's setting) come through every extension too
    params = dict(approximation="local", support=60, n_neighbors=15, outlier_quantile=quantile, prior_neighbors=2,
                  kernel_x=kb.GaussianKernel(bandwidth=0.5), kernel_z=kb.GaussianKernel(bandwidth=0.4))
    whole = kb.KernelBayesFilter(**params).fit([first[0], second[0], third[0]], [first[1], second[1], third[1]])
    pieces = kb.KernelBayesFilter(**params).fit(*first).partial_fit(*second).partial_fit(*third)
    assert pieces.n_train_ == whole.n_train_ == 950
    np.testing.assert_array_equal(pieces.predecessors_, whole.predecessors_)
    A, B = pieces.transition_operator_.toarray(), whole.transition_operator_.toarray()
    np.testing.assert_allclose(A, B, rtol=0, atol=1e-12 * np.abs(B).max())
    np.testing.assert_allclose(pieces.batch_filter(zs)[0], whole.batch_filter(zs)[0], rtol=0, atol=1e-9)


def test_partial_fit_relearns_only_where_new_states_come_near():
    system = kb.systems.Rotation()
    X, Z = system.simulate(600, rng=0)
    filt = kb.KernelBayesFilter(approximation="local", n_neighbors=10).fit(X, Z)
    before = filt.transition_operator_.toarray()
    # a new sequence far from every training state changes no old state's transition
    far = X[:50] + 100.0
    filt.partial_fit(far, Z[:50])
    after = filt.transition_operator_.toarray()
    np.testing.assert_array_equal(after[:600, :600], before)
    assert np.all(after[600:, :600] == 0) and np.any(after[600:, 600:] != 0)


def test_a_loaded_filter_grows_as_the_saved_one_does(tmp_path):
    """The kernels a filter fits once and shares are saved as shared: a loaded filter's
    partial_fit had refitted the state kernel on the grown log (another bandwidth), where the
    saved filter keeps it, and tracked 0.09 away on a rotation run."""
    system = kb.systems.Rotation()
    (X, Z), (X2, Z2), (_, zs) = (system.simulate(n, rng=seed) for n, seed in ((300, 0), (200, 1), (30, 2)))
    saved = kb.KernelBayesFilter(approximation="local").fit(X, Z)
    loaded = load(saved.save(tmp_path / "local.npz"))
    saved.partial_fit(X2, Z2)
    loaded.partial_fit(X2, Z2)
    assert loaded.kernel_x_.bandwidth_ == saved.kernel_x_.bandwidth_
    np.testing.assert_array_equal(loaded.batch_filter(zs)[0], saved.batch_filter(zs)[0])


def test_partial_fit_refuses_other_paths_and_other_shapes(oscillation):
    (X, Z), _ = oscillation
    with pytest.raises(ValueError, match="partial_fit"):
        kb.KernelBayesFilter().fit(X, Z).partial_fit(X, Z)
    local = kb.KernelBayesFilter(approximation="local").fit(X, Z)
    with pytest.raises(ValueError, match="observations"):
        local.partial_fit(X, np.hstack([Z, Z]))
    unfitted = kb.KernelBayesFilter(approximation="local").partial_fit(X, Z)
    np.testing.assert_array_equal(unfitted.states_, local.states_)


def test_a_fitted_kernel_handed_to_another_filter_is_not_rescaled_behind_its_owners_back(oscillation):
    (X, Z), (_, Zt) = oscillation
    owner = kb.KernelBayesFilter().fit(X, Z)
    kernel, expected = owner.kernel_x_, owner.batch_filter(Zt)[0]
    with pytest.raises(ValueError, match="kernel_x"):
        kb.KernelBayesFilter(kernel_x=kernel, scale=0.5).fit(X, Z)
    assert kernel.scale == 1.0
    np.testing.assert_array_equal(owner.reset().batch_filter(Zt)[0], expected)
    # with a multiplier of 1 it is used as it is
    assert kb.KernelBayesFilter(kernel_x=kernel).fit(X, Z).kernel_x_.bandwidth_ == kernel.bandwidth_


def test_with_params_answers_as_a_fresh_fit_and_leaves_the_filter_alone(oscillation, tmp_path):
    (X, Z), (_, Zt) = oscillation
    fitted = kb.KernelBayesFilter(approximation="local", support=64, reg_update=1e-2).fit(X, Z)
    before = fitted.batch_filter(Zt)
    changed = dict(reg_update=0.1, support=32, estimate="raw_mean", covariance_scale=2.0, prior_neighbors=2)
    copy = fitted.with_params(**changed)
    fresh = kb.KernelBayesFilter(**{**fitted.get_params(), **changed}).fit(X, Z)
    for got, expected in zip(copy.batch_filter(Zt), fresh.batch_filter(Zt)):
        np.testing.assert_array_equal(got, expected)
    assert copy.get_params() == fresh.get_params()
    # the original keeps its parameters and answers
    assert fitted.reg_update == 1e-2
    for got, expected in zip(fitted.reset().batch_filter(Zt), before):
        np.testing.assert_array_equal(got, expected)
    # a copy is a filter like any other: saved, loaded and run on
    save(copy.reset(), tmp_path / "copy.npz")
    np.testing.assert_array_equal(load(tmp_path / "copy.npz").batch_filter(Zt)[0], fresh.reset().batch_filter(Zt)[0])


def test_with_params_needs_a_fit_for_what_the_fit_learns_and_refuses_bad_values(oscillation):
    (X, Z), _ = oscillation
    local = kb.KernelBayesFilter(approximation="local", support=64).fit(X, Z)
    assert local.with_params(scale=0.5) is None
    assert local.with_params(reg_prior=1e-3, reg_update=0.1) is None
    assert kb.KernelBayesFilter().fit(X, Z).with_params(reg_update=0.1) is None
    with pytest.raises(ValueError, match="reg_update: expected"):
        local.with_params(reg_update=-1.0)
    with pytest.raises(ValueError, match="support: expected"):
        local.with_params(support=0)
    # a name that is no parameter: None ("fit again with it") would be no answer, as set_params refuses it
    for filt in (local, kb.KernelMonteCarloFilter(kb.systems.Oscillation(), n_particles=50).fit(X, Z)):
        with pytest.raises(ValueError, match=r"^params: \['reg_updte'\] are not parameters of "):
            filt.with_params(reg_updte=0.1)
    # nor a value the fit it asks for would refuse, where it asks for one (None before)
    for filt in (local, kb.KernelBayesFilter().fit(X, Z),
                 kb.KernelMonteCarloFilter(kb.systems.Oscillation(), n_particles=50).fit(X, Z)):
        with pytest.raises(ValueError, match="scale: expected a positive finite number, got -1.0"):
            filt.with_params(scale=-1.0)
    with pytest.raises(ValueError, match="reg_update: expected a positive finite number"):
        kb.KernelBayesFilter().fit(X, Z).with_params(reg_update=-1.0)


def test_tuning_sweeps_the_update_on_one_fit_and_scores_as_fresh_fits(oscillation, monkeypatch, count_fits):
    (X, Z), _ = oscillation
    template = kb.KernelBayesFilter(approximation="local", support=64)
    grid = {"scale": (0.5, 1.0), "reg_update": (1e-3, 1e-2, 1e-1)}
    fits = count_fits(kb.KernelBayesFilter)
    tuned = kb.tune_filter(template, X, Z, param_grid=grid, search="grid", validation_length=100, progress=False)
    # one fit per scale, and the refit on all the data
    assert len(fits) == 3
    monkeypatch.undo()
    train, validation = kb.tuning.validation_split(X, Z, 100)
    assert len(tuned.search_table_) == 6
    for row in tuned.search_table_:
        point = {name: row[name] for name in grid}
        assert row["mse"] == kb.tuning.validation_mse(template, point, train, validation)


def test_a_prior_puts_each_samples_weight_on_its_nearest_training_state(oscillation):
    (X, Z), _ = oscillation
    filt = kb.KernelBayesFilter(approximation="local", support=80).fit(X, Z)
    rng = np.random.default_rng(4)
    samples = rng.multivariate_normal(X.mean(axis=0), 0.2 * np.cov(X.T), size=50)
    gamma = rng.uniform(0.5, 1.5, size=50)
    # brute force: a radial kernel is largest at the nearest state in its coordinates
    nearest = np.argmax(filt.kernel_x_(samples, X), axis=1)
    expected = np.bincount(nearest, weights=gamma, minlength=len(X)) / gamma.sum()
    track = filt.with_belief(prior=kb.KernelMean(samples, gamma))
    np.testing.assert_allclose(track.weights, expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(track.x_prior, expected @ X, rtol=1e-12, atol=1e-14)
    # the filter itself keeps its belief, and reset gives the same one
    np.testing.assert_array_equal(filt.weights, np.full(len(X), 1 / len(X)))
    np.testing.assert_array_equal(filt.reset(prior=kb.KernelMean(samples, gamma)).weights, track.weights)
    # plain samples weigh equally; a kernel mean on other states is refused before any change
    counts = np.bincount(nearest, minlength=len(X)) / 50
    np.testing.assert_allclose(filt.reset(prior=samples).weights, counts, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="prior: expected a kernel mean on 2-dimensional states"):
        filt.reset(prior=kb.KernelMean(samples[:, :1]))
    np.testing.assert_array_equal(filt.weights, counts)
    assert filt.diagnostics["prior_outside_training"] == 0
    # a prior the training states cannot reach is said so, not followed silently
    far = np.vstack([samples[:3], X.max(axis=0) + 10 * X.std(axis=0)])
    with pytest.warns(kb.NumericalWarning, match="1 of the prior's 4 samples lay outside the training states'"):
        filt.reset(prior=far)
    assert filt.diagnostics["prior_outside_training"] == 1
    np.testing.assert_array_equal(filt.weights[np.argmax(filt.kernel_x_(far[3:], X))], 0.25)


@pytest.mark.parametrize("approximation", ["exact", "local"])
def test_sparse_weights_hold_the_belief_and_reset_continues_from_them(oscillation, approximation):
    (X, Z), (_, Zt) = oscillation
    filt = kb.KernelBayesFilter(approximation=approximation, support=80).fit(X, Z)
    for z in Zt[:5]:
        filt.predict()
        filt.update(z)
    held = filt.sparse_weights
    assert held.shape == (1, len(X))
    if approximation == "local":
        assert held.nnz <= 80
    np.testing.assert_array_equal(held.toarray().ravel(), filt.weights)
    twin = filt.with_belief(weights=held)
    for z in Zt[5:15]:
        filt.predict(), twin.predict()
        filt.update(z), twin.update(z)
        np.testing.assert_array_equal(twin.x, filt.x)
        np.testing.assert_array_equal(twin.weights, filt.weights)
    with pytest.raises(ValueError, match=f"weights: expected a sparse array of shape \\(1, {len(X)}\\)"):
        filt.reset(weights=held.T)
    with pytest.raises(ValueError, match="weights: expected weights summing to 1"):
        filt.reset(weights=2 * held)


@pytest.mark.parametrize("prior_neighbors", [0, 3])
def test_a_bounded_support_smooths_better_than_it_filters_and_leaves_the_filter_where_a_run_would(prior_neighbors):
    # a run long enough for smoothing to pay on the exact filter too (on 60 steps it does not)
    system = kb.systems.Oscillation()
    (X, Z), (Xt, Zt) = system.simulate(1000, rng=0), system.simulate(200, rng=1)
    params = dict(reg_prior=1e-3, reg_update=1e-2, n_neighbors=20, scale=0.5)
    # (posteriors on the neighbours too: more states than the next prediction draws from)
    local = kb.KernelBayesFilter(approximation="local", support=100, prior_neighbors=prior_neighbors,
                                 **params).fit(X, Z)
    zs = [None if 20 <= t < 25 else z for t, z in enumerate(Zt)]
    filtered = local.reset().batch_filter(zs)[0]
    after_run = local.x.copy()
    smoothed, covs = local.reset().smooth(zs)
    np.testing.assert_array_equal(local.x, after_run)
    np.testing.assert_array_equal(smoothed[-1], filtered[-1])  # the last step has nothing after it
    assert covs.shape == (len(zs), 2, 2) and np.all(np.linalg.eigvalsh(covs) >= -1e-12)
    assert _mse(smoothed, Xt) < 0.95 * _mse(filtered, Xt)
    # about as much as the exact filter's smoother gains on the same run
    exact = kb.KernelBayesFilter(transition="knn", **params).fit(X, Z)
    gain = _mse(exact.smooth(zs)[0], Xt) / _mse(exact.reset().batch_filter(zs)[0], Xt)
    assert _mse(smoothed, Xt) / _mse(filtered, Xt) <= gain + 0.05
    with pytest.raises(ValueError, match="filt: kernel_smoother smooths weights over all the training states"):
        kb.kernel_smoother(local, np.tile(local.weights, (3, 1)), Zt[:3])


def test_the_localized_transition_refuses_indices_outside_the_log():
    # a negative query counted from the end of the log, silently; a predecessor without a successor
    # was an IndexError
    from kbfilter.filters.local import localized_transition

    X = np.random.default_rng(0).normal(size=(100, 2))
    kernel = kb.GaussianKernel().fit(X)
    pred = np.arange(99)
    for args, match in (((np.arange(100), np.arange(5)), r"pred: expected indices in \[0, 99\)"),
                        ((pred, np.array([-1])), r"queries: expected indices in \[0, 100\), got values from -1"),
                        ((pred, np.array([0.5])), "queries: expected integer indices")):
        with pytest.raises(ValueError, match=match):
            localized_transition(X, args[0], kernel, 10, 1e-3, args[1])
    successors, weights, _, _ = localized_transition(X, pred, kernel, 10, 1e-3, np.arange(5))
    assert successors.shape == weights.shape == (5, 10) and successors.min() >= 1
