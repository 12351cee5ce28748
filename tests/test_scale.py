"""The scalable path: operators, low-rank kernels and the filter built on them, each against its
exact twin at full size."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kbfilter as kb
from kbfilter.kernel_approximation import NystromKernel, RandomFourierKernel
from kbfilter.linalg import NumericalWarning
from kbfilter.operators import DenseOperator, LowRankOperator, SparseOperator
from kbfilter.persistence import load, save

RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def data():
    system = kb.systems.Oscillation()
    return system.simulate(300, rng=1), system.simulate(60, rng=2)


def _mse(means, states):
    return float(np.mean(np.sum((means - states) ** 2, axis=1)))


# -- operators ---------------------------------------------------------------------------------------
def test_each_operator_applies_its_dense_matrix():
    L, R = RNG.normal(size=(7, 3)), RNG.normal(size=(5, 3))
    M = L @ R.T
    S = np.where(np.abs(M) > 1, M, 0.0)
    v, V = RNG.normal(size=5), RNG.normal(size=(5, 2))
    for op, dense in ((DenseOperator(M), M), (SparseOperator(sp.csr_matrix(S)), S), (LowRankOperator(L, R), M)):
        assert op.shape == (7, 5)
        np.testing.assert_allclose(op @ v, dense @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op @ V, dense @ V, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op.toarray(), dense, rtol=1e-12, atol=1e-12)
        rows = np.array([9, 0, 4, 2, 7, 1, 5])
        placed = np.zeros((10, 5))
        placed[rows] = dense
        np.testing.assert_allclose(op.placed(rows, 10).toarray(), placed, rtol=1e-12, atol=1e-12)
        assert type(op.placed(rows, 10)) is type(op)


def test_operators_refuse_a_matrix_that_is_not_2d_and_a_placement_that_loses_rows():
    with pytest.raises(ValueError, match="matrix: expected a 2-D array"):
        DenseOperator(np.ones(3))
    with pytest.raises(ValueError, match="matrix: expected a 2-D array"):
        SparseOperator(np.ones(3))  # scipy alone reads it as one row
    M = RNG.normal(size=(3, 2))
    for op in (DenseOperator(M), SparseOperator(sp.csr_matrix(M)), LowRankOperator(M, np.eye(2))):
        for rows, match in (([0, 1], "3 integer indices"), ([0.0, 1.0, 2.0], "integer"),
                            ([0, 1, -1], r"in \[0, 5\)"), ([0, 1, 5], r"in \[0, 5\)"), ([0, 0, 1], "distinct")):
            with pytest.raises(ValueError, match=match):
                op.placed(np.array(rows), 5)


def test_low_rank_operator_refuses_mismatched_factors():
    with pytest.raises(ValueError, match="same number of columns"):
        LowRankOperator(np.ones((4, 2)), np.ones((4, 3)))


# -- low-rank kernels ----------------------------------------------------------------------------------
def test_nystrom_kernel_with_every_point_a_landmark_is_the_kernel():
    X = RNG.normal(size=(150, 2))
    Q = RNG.normal(size=(20, 2))
    exact = kb.GaussianKernel(scale=0.3).fit(X)
    k = NystromKernel(kb.GaussianKernel(scale=0.3), rank=150, tol=0.0).fit(X)
    np.testing.assert_allclose(k(X), exact(X), atol=1e-8)
    # a training point is in the landmarks' span, so its value against any point is exact
    np.testing.assert_allclose(k(X, Q), exact(X, Q), atol=1e-6)
    np.testing.assert_allclose(k.diag(X), exact.diag(X), atol=1e-8)


def test_nystrom_tolerance_bounds_the_neglected_trace():
    X = RNG.normal(size=(400, 2))
    exact = kb.GaussianKernel().fit(X)(X)
    for tol in (1e-2, 1e-4, 1e-6):
        k = NystromKernel(tol=tol, rank=400).fit(X)
        neglected = np.trace(exact - k(X))
        assert neglected <= tol * 400 * (1 + 1e-9)
        assert k.residual_trace_ == pytest.approx(neglected, abs=1e-8)
    # a tighter tolerance needs more landmarks
    assert NystromKernel(tol=1e-6, rank=400).fit(X).rank_ > NystromKernel(tol=1e-2, rank=400).fit(X).rank_


def test_a_tolerance_as_large_as_the_trace_still_keeps_a_landmark():
    # neglecting the whole trace is within such a tolerance, but a kernel without features is none
    X = RNG.normal(size=(100, 2))
    k = NystromKernel(tol=2.0).fit(X)
    assert k.rank_ == 1 and k.converged_
    assert k.features(X).shape == (100, 1)


def test_random_fourier_kernel_approaches_the_gaussian_kernel(monkeypatch):
    import os

    X = RNG.normal(size=(80, 2))
    exact = kb.GaussianKernel().fit(X)(X)
    errors = [np.max(np.abs(RandomFourierKernel(rank=r, random_state=0).fit(X)(X) - exact)) for r in (100, 10000)]
    assert errors[1] < errors[0] / 4
    assert errors[1] < 0.05
    with pytest.raises(ValueError, match="kernel: random Fourier features need a Gaussian kernel"):
        RandomFourierKernel(kb.LaplaceKernel()).fit(X)
    # frequencies that cannot be held are refused by name, before they are drawn, and where the
    # platform does not say its memory, when numpy cannot allocate them (scikit-learn's MemoryError before)
    with pytest.raises(ValueError, match="rank: 1,000,000,000,000,000 random features .* more than this machine's"):
        RandomFourierKernel(rank=10**15).fit(X)
    monkeypatch.setattr(os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    with pytest.raises(ValueError, match="rank: 1000000000000000 random features .* more than this machine can hold"):
        RandomFourierKernel(rank=10**15).fit(X)


def test_feature_kernels_are_seeded():
    X = RNG.normal(size=(50, 2))
    a = RandomFourierKernel(rank=30, random_state=4).fit(X)(X)
    assert np.array_equal(a, RandomFourierKernel(rank=30, random_state=4).fit(X)(X))
    assert not np.array_equal(a, RandomFourierKernel(rank=30, random_state=5).fit(X)(X))


# -- the rule and the conditional embedding on low-rank kernels -------------------------------------------
@pytest.mark.parametrize("method", ["iw", "original"])
def test_rule_with_full_rank_nystrom_kernels_equals_the_exact_rule(data, method):
    (x, z), _ = data
    prior = kb.KernelMean(x[:40] + 0.1)
    common = dict(method=method, reg_prior=1e-2, reg_update=1e-1, solver="dense")
    exact = kb.KernelBayesRule(**common).fit(x, z)
    full = kb.KernelBayesRule(kernel_x=NystromKernel(rank=300, tol=0.0), kernel_z=NystromKernel(rank=300, tol=0.0),
                              **common).fit(x, z)
    for zz in z[:5]:
        a, b = exact.posterior(prior, zz).weights, full.posterior(prior, zz).weights
        np.testing.assert_allclose(b, a, atol=1e-6 * np.max(np.abs(a)))
    np.testing.assert_allclose(full.projection_operator().toarray(), exact.projection_operator().toarray(), atol=1e-6)


def test_feature_projection_is_the_prior_projection_of_the_mean_feature(data):
    (x, z), _ = data
    rule = kb.KernelBayesRule(kernel_x=NystromKernel(rank=60, tol=0.0), reg_prior=1e-2).fit(x, z)
    sample = x[:40] + 0.1
    gamma = rule.kernel_x_.features(sample).mean(axis=0)
    np.testing.assert_allclose(rule.feature_projection(gamma), rule.prior_projection(kb.KernelMean(sample)),
                               rtol=1e-10)
    with pytest.raises(ValueError, match=r"gamma: expected shape \(60,\)"):
        rule.feature_projection(gamma[:5])
    with pytest.raises(ValueError, match="gamma: feature_projection needs a state kernel with explicit features"):
        kb.KernelBayesRule().fit(x, z).feature_projection(gamma)


def test_conditional_embedding_on_a_feature_kernel_gives_a_low_rank_operator(data):
    (x, _), _ = data
    exact = kb.ConditionalEmbedding(reg=1e-3).fit(x[:-1], x[1:])
    low = kb.ConditionalEmbedding(kernel_in=NystromKernel(rank=299, tol=0.0), reg=1e-3).fit(x[:-1], x[1:])
    op = low.weights_operator(x)
    assert isinstance(op, LowRankOperator) and op.rank < 299
    np.testing.assert_allclose(op.toarray(), exact.weights(x), atol=1e-6)
    np.testing.assert_allclose(low.weights(x), exact.weights(x), atol=1e-6)


# -- the filter ------------------------------------------------------------------------------------------
PARAMS = dict(scale=0.7, reg_prior=1e-3, reg_update=1e-2)


@pytest.mark.parametrize("rule", ["iw", "original"])
def test_full_rank_scalable_filter_equals_the_exact_filter(data, rule):
    (x, z), (_, zt) = data
    exact = kb.KernelBayesFilter(rule=rule, **PARAMS).fit(x, z)
    full = kb.KernelBayesFilter(rule=rule, approximation="nystrom", rank=300, **PARAMS).fit(x, z)
    np.testing.assert_allclose(full.transition_operator_.toarray(), exact.transition_operator_.toarray(), atol=1e-6)
    a, b = exact.batch_filter(zt)[0], full.batch_filter(zt)[0]
    np.testing.assert_allclose(b, a, atol=1e-6)


def test_default_rank_rule_keeps_the_exact_filters_accuracy(data):
    (x, z), (xt, zt) = data
    exact = _mse(kb.KernelBayesFilter(**PARAMS).fit(x, z).batch_filter(zt)[0], xt)
    scalable = kb.KernelBayesFilter(approximation="nystrom", **PARAMS).fit(x, z)
    assert _mse(scalable.batch_filter(zt)[0], xt) == pytest.approx(exact, rel=0.01)
    assert isinstance(scalable.projection_operator_, LowRankOperator)
    assert scalable.projection_operator_.rank < 100


@pytest.mark.parametrize("params", [dict(reg_prior=5.0), dict(reg_update=5.0), dict(reg_prior=100.0),
                                    dict(reg_update=100.0)])
def test_default_rank_rule_keeps_the_exact_filters_accuracy_past_unit_regularisers(data, params):
    # past reg = 1 a tolerance growing with reg dropped the landmarks the normalised weights need
    # (twice the exact filter's MSE at reg_update = 5; none kept, and a failed fit, at 100)
    (x, z), (xt, zt) = data
    exact = _mse(kb.KernelBayesFilter(**params).fit(x, z).batch_filter(zt)[0], xt)
    scalable = kb.KernelBayesFilter(approximation="nystrom", **params).fit(x, z)
    assert _mse(scalable.batch_filter(zt)[0], xt) == pytest.approx(exact, rel=0.05)


def test_knn_transition_with_every_neighbour_is_the_exact_transition(data):
    (x, z), _ = data
    exact = kb.KernelBayesFilter(**PARAMS).fit(x, z)
    knn = kb.KernelBayesFilter(transition="knn", n_neighbors=len(x) - 1, **PARAMS).fit(x, z)
    assert isinstance(knn.transition_operator_, SparseOperator)
    np.testing.assert_allclose(knn.transition_operator_.toarray(), exact.transition_operator_.toarray(), atol=1e-8)


def test_random_fourier_filter_is_seeded_and_close_to_exact(data):
    (x, z), (xt, zt) = data
    exact = _mse(kb.KernelBayesFilter(**PARAMS).fit(x, z).batch_filter(zt)[0], xt)
    runs = [kb.KernelBayesFilter(approximation="rff", rank=3000, random_state=0, **PARAMS).fit(x, z).batch_filter(zt)[0]
            for _ in range(2)]
    assert np.array_equal(runs[0], runs[1])
    assert _mse(runs[0], xt) == pytest.approx(exact, rel=0.15)


def _fit_peak(T):
    states, obs = kb.systems.Oscillation().simulate(T, rng=0)
    tracemalloc.start()
    kbf = kb.KernelBayesFilter(approximation="nystrom", rank=40, transition="knn", n_neighbors=20).fit(states, obs)
    kbf.batch_filter(obs[:5])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_an_exact_fit_larger_than_the_machine_is_refused_before_any_work(data, monkeypatch):
    import os

    from kbfilter.filters import kbf, kmc

    # the refusal reckons with the exact fit's measured peak, in T x T float64 arrays
    states, obs = kb.systems.Oscillation().simulate(1000, rng=0)
    tracemalloc.start()
    kb.KernelBayesFilter().fit(states, obs)
    peak = tracemalloc.get_traced_memory()[1] / (8 * 1000**2)
    tracemalloc.stop()
    assert kbf.EXACT_FIT_ARRAYS - 1 < peak < kbf.EXACT_FIT_ARRAYS + 1, peak
    # on a machine with a page less than the fit of 300 states needs, it is refused, where the
    # process would have been killed part way; the approximations that scale still fit
    (states, obs), _ = data
    page, real = 4096, os.sysconf

    def machine_below(arrays):
        pages = arrays * 8 * 300**2 // page - 1
        monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": pages, "SC_PAGE_SIZE": page}.get(name)
                            or real(name))

    machine_below(kbf.EXACT_FIT_ARRAYS)
    with pytest.raises(ValueError, match=r"^states: the exact filter on 300 training states .* more than this "
                                         r"machine's memory .*; use approximation='local'"):
        kb.KernelBayesFilter().fit(states, obs)
    for approximation in ("local", "nystrom"):
        kb.KernelBayesFilter(approximation=approximation).fit(states, obs)
    # the Kernel Monte Carlo filter's exact observation model too (it holds fewer arrays)
    system = kb.systems.Oscillation()
    machine_below(kmc.EXACT_FIT_ARRAYS)
    with pytest.raises(ValueError, match=r"^states: the exact filter on 300 training states .*; use "
                                         r"approximation='nystrom'"):
        kb.KernelMonteCarloFilter(system, n_particles=50).fit(states, obs)
    kb.KernelMonteCarloFilter(system, n_particles=50, approximation="nystrom").fit(states, obs)


def test_random_features_larger_than_the_machine_are_refused_before_they_are_drawn(monkeypatch):
    # Linux would hand out the frequencies' pages and kill the process when they are touched
    import os

    from kbfilter.features import RandomFourierFeatures

    X = RNG.normal(size=(50, 2))
    real = os.sysconf
    gigabyte = {"SC_PHYS_PAGES": 2**18, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: gigabyte.get(name) or real(name))
    rank = 2**30 // (8 * (2 * 2 + 1 + 50)) + 1  # a feature more than a gigabyte holds
    with pytest.raises(ValueError, match=rf"^rank: {rank:,} random features of 50 2-dimensional points would take "
                                         r"about 1 GB, more than this machine's memory \(1 GB\)"):
        RandomFourierKernel(rank=rank).fit(X)
    with pytest.raises(ValueError, match=rf"^n_components: {rank:,} random features of 50 observations would take"):
        RandomFourierFeatures(n_components=rank).fit(X)
    with pytest.raises(ValueError, match=rf"^kernel_x: rank: {rank:,} random features"):
        kb.KernelBayesFilter(approximation="rff", rank=rank).fit(X, X)
    assert RandomFourierKernel(rank=rank - 1000).fit(X).rank_ == rank - 1000
    # where the platform does not say, nothing is refused
    monkeypatch.setattr(os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert RandomFourierKernel(rank=1000).fit(X).rank_ == 1000


def test_networks_and_particle_sets_larger_than_the_machine_are_refused_before_any_work(monkeypatch):
    # scikit-learn would allocate the weights, their gradients and Adam's moments layer by layer
    import os

    from kbfilter.features import LearnedFeatures
    from kbfilter.filters import WindowRegressor

    states, obs = kb.systems.Oscillation().simulate(60, rng=0)
    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**18, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a gigabyte
    wide = (2**13, 2**13)  # 2 GB of weights between the two layers alone
    with pytest.raises(ValueError, match=r"^hidden_layer_sizes: a network with hidden layers \(8192, 8192\) on 2 "
                                         r"inputs, trained on 60 rows would take about 2\.\d+ GB"):
        LearnedFeatures(n_pca=None, hidden_layer_sizes=wide).fit(obs, states)
    with pytest.raises(ValueError, match=r"^hidden_layer_sizes: a network with hidden layers \(8192, 8192\) on 6 "
                                         r"inputs"):  # a window of 3 frames of 2 features
        WindowRegressor(window=3, hidden_layer_sizes=wide).fit(states, obs)
    # the learned-motion filter's candidate successors, a particle's neighbours each step
    cv = kb.systems.ConstantVelocity(step=1.0, accel=0.5, speed=10.0)
    track = cv.simulate(2000, rng=0, burn_in=0)[0]
    with pytest.raises(ValueError, match=r"^n_particles, n_neighbors: 1,000,000 particles with 1,000 candidate "
                                         r"successors each \(4-dimensional states\) would take about 52\.2 GB"):
        kb.LearnedMotionFilter(cv, n_particles=10**6, n_neighbors=1000).fit(track, track[:, :2])
    # the exact Kernel Monte Carlo filter's step: the particles' Gram matrix and herding's joint one
    system = kb.systems.Oscillation()
    with pytest.raises(ValueError, match=r"^n_particles: a step of the exact filter with 10,000 particles and 60 "
                                         r"training states would take about 1\.\d+ GB"):
        kb.KernelMonteCarloFilter(system, n_particles=10_000).fit(states, obs)
    kb.KernelMonteCarloFilter(system, n_particles=10_000, approximation="nystrom").fit(states, obs)
    for bad in ("ab", (), (8, 0)):
        with pytest.raises(ValueError, match="hidden_layer_sizes: expected"):
            LearnedFeatures(hidden_layer_sizes=bad).fit(obs, states)
    assert LearnedFeatures(n_pca=None, hidden_layer_sizes=(8,), max_iter=5).fit(obs, states).transform(obs).shape == (
        60, 8)


def test_a_nystrom_factor_outgrowing_the_machine_is_refused_as_it_grows(monkeypatch):
    # the factor is paged in column by column as the rank grows, so a rank the data never reach
    # costs nothing and is not refused; a rank they do reach is refused before the kernel kills it
    import os

    X = np.random.default_rng(0).normal(size=(100_000, 2))
    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**16, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a quarter of a gigabyte
    narrow = kb.GaussianKernel(0.05)
    with pytest.raises(ValueError, match=r"^rank: a pivoted Cholesky factor of 100,000 rows reaching 192 columns "
                                         r"\(and its returned copy\) would take about 0\.286 GB, more than this "
                                         r"machine's memory \(0\.25 GB\); lower rank or its tolerance"):
        NystromKernel(narrow, rank=1000).fit(X)
    assert NystromKernel(narrow, rank=100).fit(X).landmarks_.shape == (100, 2)
    assert NystromKernel(kb.GaussianKernel(20.0), rank=10**6).fit(X).landmarks_.shape[0] < 64


def test_a_two_sample_test_larger_than_the_machine_is_refused_before_its_gram_matrix(monkeypatch):
    import os

    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**18, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a gigabyte
    X, Y = RNG.normal(size=(5000, 2)), RNG.normal(size=(4000, 2))
    with pytest.raises(ValueError, match=r"^X, Y: the Gram matrix of 9,000 pooled points would take about 1\.21 GB"):
        kb.mmd_test(X, Y, random_state=0)
    assert 0 < kb.mmd_test(X[:500], Y[:500], n_permutations=50, random_state=0).pvalue <= 1


def test_dense_rules_larger_than_the_machine_are_refused_before_their_gram_matrices(monkeypatch):
    # the filters checked their exact fits; the rules and embeddings they are built from did not
    import os

    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**16, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a quarter of a gigabyte
    A = RNG.normal(size=(5000, 2))
    B = A + 0.1 * RNG.normal(size=(5000, 2))
    with pytest.raises(ValueError, match=r"^A: the 'exact' conditional embedding of 5,000 pairs \(about 2 5,000 x "
                                         r"5,000 arrays\) would take about 0\.373 GB.*use method='nystrom'"):
        kb.ConditionalEmbedding().fit(A, B)
    with pytest.raises(ValueError, match=r"^A: the 'sparse' conditional embedding of 2,000 pairs \(about 14 "):
        kb.ConditionalEmbedding(method="sparse").fit(A[:2000], B[:2000])
    with pytest.raises(ValueError, match=r"^states: kernel Bayes' rule on 5,000 training pairs \(about 3 5,000 x "
                                         r"5,000 arrays\) would take about 0\.559 GB"):
        kb.KernelBayesRule().fit(A, B)
    with pytest.raises(ValueError, match=r"^states: kernel Bayes' rule on 5,000 training pairs \(about 2 "):
        kb.KernelBayesRule(kernel_x=NystromKernel(rank=50)).fit(A, B)  # the observations' Gram matrix alone
    # explicit features hold no n x n array
    assert kb.ConditionalEmbedding(method="nystrom", rank=50, random_state=0).fit(A, B).predict(A[:3]).shape == (3, 2)
    assert kb.ConditionalEmbedding(NystromKernel(rank=50)).fit(A, B).predict(A[:3]).shape == (3, 2)
    kb.KernelBayesRule(kernel_x=NystromKernel(rank=50), kernel_z=NystromKernel(rank=50)).fit(A, B)
    kb.ConditionalEmbedding().fit(A[:2000], B[:2000])  # 0.06 GB


def test_a_simulation_larger_than_the_machine_is_refused_before_its_first_step(monkeypatch):
    import os

    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**18, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a gigabyte
    with pytest.raises(ValueError, match=r"^T: 20,000 steps of MovingSprite \(4,096 observed values a step\) would "
                                         r"take about 1\.8\d GB"):
        kb.systems.MovingSprite().simulate(20_000, rng=0)
    with pytest.raises(ValueError, match=r"^T: 20,000 steps of RobotInRoom \(3,072 observed values a step\)"):
        kb.systems.robot.RobotInRoom().simulate(20_000, rng=0)  # a controlled system's run
    assert kb.systems.MovingSprite().simulate(100, rng=0)[1].shape == (100, 64, 64)
    assert kb.systems.Rotation().simulate(20_000, rng=0)[0].shape == (20_000, 2)


def test_a_smoothing_or_forecast_larger_than_the_machine_is_refused_before_the_run(monkeypatch):
    import os

    from kbfilter.filters.smoothing import kernel_smoother

    states, obs = kb.systems.Rotation().simulate(200, rng=0)
    kbf = kb.KernelBayesFilter().fit(states, obs)
    before = kbf.weights.copy()
    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 2**18, "SC_PAGE_SIZE": 4096}.get(name)
                        or real(name))  # a gigabyte
    # the filter's weights, the log densities and the smoothed weights: three 250,000 x 200 arrays
    with pytest.raises(ValueError, match=r"^zs: smoothing 250,000 steps over 200 training states would take about "
                                         r"1\.12 GB"):
        kbf.smooth([None] * 250_000)
    np.testing.assert_array_equal(kbf.weights, before)  # refused before the forward pass moved the belief
    with pytest.raises(ValueError, match=r"^zs: smoothing 400,000 steps over 200 training states would take about "
                                         r"1\.19 GB"):
        kernel_smoother(kbf, np.broadcast_to(before, (400_000, 200)), [None] * 400_000)
    with pytest.raises(ValueError, match=r"^k: 100,000,000 steps ahead of a 2-dimensional state would take about "
                                         r"4\.47 GB"):
        kbf.forecast(10**8)
    np.testing.assert_array_equal(kbf.weights, before)
    smoothed, _ = kbf.smooth(obs[:30])
    assert smoothed.shape == (30, 2) and kbf.forecast(5)[0].shape == (5, 2)


def test_scalable_filter_memory_grows_linearly_in_T(tmp_path):
    small, large = _fit_peak(1000), _fit_peak(4000)
    # four times the data: at most about four times the memory (a T x T array would be 16 times)
    assert large / small < 6, (small, large)
    states, obs = kb.systems.Oscillation().simulate(4000, rng=0)
    sizes = []
    for T in (1000, 4000):
        kbf = kb.KernelBayesFilter(approximation="nystrom", rank=40).fit(states[:T], obs[:T])
        sizes.append(save(kbf, tmp_path / f"f{T}.npz").stat().st_size)
    assert sizes[1] / sizes[0] < 5, sizes


@pytest.mark.parametrize("approximation, transition", [("nystrom", "exact"), ("nystrom", "knn"), ("rff", "exact")])
def test_save_load_continue_is_identical(tmp_path, data, approximation, transition):
    (x, z), (_, zt) = data
    kbf = kb.KernelBayesFilter(approximation=approximation, transition=transition, rank=50, random_state=0,
                               **PARAMS).fit(x, z)
    kbf.batch_filter(zt[:10])
    back = load(save(kbf, tmp_path / "kbf.npz"))
    assert np.array_equal(back.batch_filter(zt[10:])[0], kbf.batch_filter(zt[10:])[0])


def test_tune_filter_tunes_rank_and_neighbours(data):
    (x, z), _ = data
    tuned = kb.tune_filter(kb.KernelBayesFilter(approximation="nystrom", transition="knn", **PARAMS), x, z,
                           param_grid={"rank": (10, 40), "n_neighbors": (10, 30)}, validation_length=50,
                           progress=False, search="grid")
    assert set(tuned.best_params_) == {"rank", "n_neighbors"}
    assert len(tuned.search_table_) == 4
    assert tuned.projection_operator_.rank <= 40


@pytest.mark.parametrize("params, message", [
    (dict(approximation="svd"), "approximation: expected one of"),
    (dict(approximation="nystrom", rank=0), "rank: expected"),
    (dict(n_neighbors=0), "n_neighbors: expected"),
    (dict(approximation="rff", kernel_x=kb.LaplaceKernel()), "random Fourier features need a Gaussian kernel"),
])
def test_bad_scalable_settings_are_clear_errors(data, params, message):
    (x, z), _ = data
    with pytest.raises(ValueError, match=message):
        kb.KernelBayesFilter(**params).fit(x, z)


def test_a_tiny_regulariser_stays_finite_on_the_low_rank_path(data):
    (x, z), (_, zt) = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        kbf = kb.KernelBayesFilter(approximation="nystrom", reg_prior=1e-12, reg_update=1e-12).fit(x, z)
        means = kbf.batch_filter(zt)[0]
    assert np.all(np.isfinite(means))


def test_a_rank_rule_stopped_by_its_cap_is_reported(data, monkeypatch):
    import kbfilter.filters.observation as observation_module

    (x, z), _ = data
    monkeypatch.setattr(observation_module, "MAX_RANK", 5)
    with pytest.warns(NumericalWarning, match="MAX_RANK = 5"):
        kbf = kb.KernelBayesFilter(approximation="nystrom", scale=0.3, reg_prior=1e-6).fit(x, z)
    assert kbf.diagnostics["rank_cap"] == 1
    assert kbf.projection_operator_.rank == 5
