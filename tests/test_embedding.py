import numpy as np
import pytest

import kbfilter as kb
from kbfilter import GaussianKernel, KernelMean, LinearKernel, NumericalWarning
from kbfilter.closed_forms import gaussian_kernel_mean, gaussian_kernel_mean_sqnorm, rkhs_error_to_gaussian


def test_closed_form_kernel_mean_agrees_with_monte_carlo():
    rng = np.random.default_rng(0)
    mu = np.array([0.5, -1.0])
    M = rng.normal(size=(2, 2))
    V = M @ M.T + 0.2 * np.eye(2)
    s = 0.8
    sample = rng.multivariate_normal(mu, V, size=200_000)
    Y = rng.normal(size=(5, 2))
    mc = KernelMean(sample, kernel=GaussianKernel(s)).evaluate(Y)
    np.testing.assert_allclose(mc, gaussian_kernel_mean(Y, mu, V, s), atol=5e-3)
    # ||m_P||^2 = E k(X, X') for independent X, X'
    other = rng.multivariate_normal(mu, V, size=200_000)
    mc_sq = np.mean(GaussianKernel(s).paired(sample, other))
    assert mc_sq == pytest.approx(gaussian_kernel_mean_sqnorm(V, s), abs=5e-3)
    # and the RKHS distance of a large sample to m_P is small, of a shifted one large
    small = rkhs_error_to_gaussian(sample[:2000], np.full(2000, 1 / 2000), mu, V, s)
    far = rkhs_error_to_gaussian(sample[:2000] + 1.0, np.full(2000, 1 / 2000), mu, V, s)
    assert small < 0.05 < far


def test_the_closed_forms_refuse_what_is_no_gaussian_and_read_one_point_as_one():
    from kbfilter.closed_forms import gaussian_conditional

    mu, V = np.zeros(2), np.eye(2)
    # a bandwidth of 0 gave NaN, a negative one the answer of its absolute value, a negative or
    # skewed covariance an answer (or numpy's LinAlgError), a mean of another length a broadcast
    cases = [(lambda: gaussian_kernel_mean(np.zeros((3, 2)), mu, V, 0.0), "s: expected a positive"),
             (lambda: gaussian_kernel_mean(np.zeros((3, 2)), mu, V, -1.0), "s: expected a positive"),
             (lambda: gaussian_kernel_mean(np.zeros((3, 2)), mu, -V, 1.0), "V: expected a positive semi-definite"),
             (lambda: gaussian_kernel_mean_sqnorm(-V, 1.0), "V: expected a positive semi-definite"),
             (lambda: gaussian_kernel_mean(np.zeros((3, 2)), mu, [[1, 0.5], [0, 1]], 1.0), "V: expected a symmetric"),
             (lambda: gaussian_kernel_mean(np.zeros((3, 3)), mu, V, 1.0), "Y: expected 2 columns"),
             (lambda: rkhs_error_to_gaussian(np.zeros((3, 2)), np.ones(2) / 2, mu, V, 1.0),
              "weights: expected length 3"),
             (lambda: gaussian_conditional(mu, V, [0], [0]), "idx_out: expected coordinates other than the given"),
             (lambda: gaussian_conditional(mu, V, [5], [1]), r"idx_given: expected distinct coordinates of 0 \.\. 1"),
             (lambda: gaussian_conditional(np.zeros(3), np.diag([0.0, 1, 1]), [0], [1]), "cov: .* is singular")]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    # one point given as a vector is one point; in one dimension a vector is that many points
    np.testing.assert_allclose(gaussian_kernel_mean([0.0, 0.0], mu, V, 1.0), [0.5])
    np.testing.assert_allclose(gaussian_kernel_mean([0.0, 1.0], [0.0], 1.0, 1.0),
                               np.sqrt(0.5) * np.exp(-0.25 * np.array([0.0, 1.0])))


def test_mean_expect_covariance():
    pts = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    w = np.array([0.2, 0.3, 0.5])
    m = KernelMean(pts, w, kernel=GaussianKernel(1.0))
    np.testing.assert_allclose(m.mean(), w @ pts)
    np.testing.assert_allclose(m.mean(normalize=False), w @ pts)
    np.testing.assert_allclose(m.expect(lambda x: x.sum(axis=1)), w @ pts.sum(axis=1))
    # a complex function keeps its imaginary part (numpy's cast to float dropped it with a warning):
    # the characteristic function at t
    t = np.array([0.3, -0.7])
    np.testing.assert_allclose(m.expect(lambda x: np.exp(1j * x @ t)), w @ np.exp(1j * pts @ t), rtol=1e-14)
    assert np.iscomplexobj(m.expect(lambda x: np.exp(1j * x @ t)))
    np.testing.assert_allclose(m.covariance(), np.cov(pts.T, aweights=w, bias=True))
    doubled = KernelMean(pts, 2 * w, kernel=GaussianKernel(1.0))
    np.testing.assert_allclose(doubled.mean(), w @ pts)
    np.testing.assert_allclose(doubled.mean(normalize=False), 2 * w @ pts)


def test_negative_weight_sum_falls_back_with_warning():
    m = KernelMean([[0.0], [1.0], [5.0]], [0.5, -2.0, 0.5], kernel=GaussianKernel(1.0))
    with pytest.warns(NumericalWarning, match="sum of weights"):
        est = m.mean()
    np.testing.assert_allclose(est, [2.5])
    with pytest.raises(ValueError, match="no weight is positive"):
        KernelMean([[0.0], [1.0]], [-1.0, -1.0], kernel=GaussianKernel(1.0)).mean()


def test_a_one_point_embedding_needs_a_fixed_bandwidth_and_says_so():
    # the median heuristic's own check named its argument X, which the caller never passed
    with pytest.raises(ValueError, match=r"^points: expected at least 2 points to fit the kernel's bandwidth on, "
                                         r"got 1"):
        KernelMean([[0.5, 1.0]])
    m = KernelMean([[0.5, 1.0]], kernel=GaussianKernel(1.0))
    np.testing.assert_array_equal(m.mean(), [0.5, 1.0])
    np.testing.assert_array_equal(m.mode(), [0.5, 1.0])


def test_mode_recovers_dominant_component_of_two_point_mixture():
    rng = np.random.default_rng(3)
    a = rng.normal([3.0, 3.0], 0.3, size=(300, 2))
    b = rng.normal([-3.0, 0.0], 0.3, size=(100, 2))
    m = KernelMean(np.vstack([a, b]), kernel=GaussianKernel(0.5))
    np.testing.assert_allclose(m.mode(), [3.0, 3.0], atol=0.1)
    # the mean, by contrast, lies between the components
    assert np.linalg.norm(m.mean() - [3.0, 3.0]) > 1.0


def test_mode_needs_gaussian_kernel():
    with pytest.raises(ValueError, match="GaussianKernel"):
        KernelMean([[0.0], [1.0]], kernel=LinearKernel()).mode()


def test_an_embedding_with_no_positive_weight_has_no_mode():
    # 0 (or a negative embedding) is nowhere above 0: the first point was returned as its mode
    for weights in ([0.0, 0.0], [-0.5, -0.5]):
        with pytest.raises(ValueError, match="weights: no weight is positive, so the embedding has no mode"):
            KernelMean([[0.0], [1.0]], weights, kernel=GaussianKernel(1.0)).mode()
    assert KernelMean([[0.0], [1.0]], [-0.1, 0.5], kernel=GaussianKernel(1.0)).mode()[0] > 0.5


def test_mmd_matches_norm_of_difference():
    k = GaussianKernel(1.0)
    p = KernelMean([[0.0], [1.0]], [0.5, 0.5], kernel=k)
    q = KernelMean([[0.0], [1.0]], [0.9, 0.1], kernel=k)
    G = k(np.array([[0.0], [1.0]]))
    d = np.array([-0.4, 0.4])
    assert p.mmd(q, squared=True) == pytest.approx(d @ G @ d)
    assert p.mmd(p) == 0.0


def test_herding_approaches_target_as_more_points_are_picked():
    rng = np.random.default_rng(4)
    pts = rng.normal(size=(400, 2))
    w = rng.uniform(size=400)
    target = KernelMean(pts, w / w.sum(), kernel=GaussianKernel(1.0))
    d = [target.mmd(target.herd(m)) for m in (2, 10, 50)]
    assert d[0] > d[1] > d[2]
    assert d[2] < 0.05


def test_bad_input():
    with pytest.raises(ValueError, match="weights: expected length 2"):
        KernelMean([[0.0], [1.0]], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="points: contains NaN"):
        KernelMean([[np.nan], [1.0]])
    with pytest.raises(ValueError, match="kernel"):
        KernelMean([[0.0], [1.0]], kernel="rbf")
    m = KernelMean([[0.0], [1.0]])
    with pytest.raises(ValueError, match="f: expected a callable"):
        m.expect("x")
    with pytest.raises(ValueError, match="f: returned values that are not finite"):
        m.expect(lambda x: np.where(x[:, 0] > 0, 1.0, np.inf))
    with pytest.raises(ValueError, match="f: expected real or complex values, got an array of dtype <U"):
        m.expect(lambda x: x.astype(str))  # read as numbers before
    with pytest.raises(ValueError, match=r"f: expected an array of real or complex values \(.*inhomogeneous"):
        m.expect(lambda x: [[1.0], [2.0, 3.0]])  # numpy's error, which did not say whose output it was
    with pytest.raises(ValueError, match="weights: their sum overflows a float"):
        KernelMean([[0.0], [1.0]], [1e308, 1e308])
    # a kernel fitted on points of another dimension is named here, not inside its first evaluation
    fitted = GaussianKernel().fit(np.arange(15.0).reshape(5, 3))
    with pytest.raises(ValueError, match="kernel: fitted on points of dimension 3, got points of dimension 1"):
        KernelMean([[0.0], [1.0]], kernel=fitted)
    with pytest.raises(ValueError, match="info: expected a dict of notes, got list"):
        KernelMean([[0.0], [1.0]], info=["clipped"])
    with pytest.raises(ValueError, match="tol: expected a non-negative finite number, got nan"):
        m.mode(tol=np.nan)


def test_herding_refuses_an_embedding_of_no_positive_mass_and_keeps_the_mass_it_is_given():
    points = np.array([[0.0], [1.0], [2.0]])
    for weights in ([0.0, 0.0, 0.0], [-1.0, 0.2, 0.3]):
        with pytest.raises(ValueError, match="weights: herding approximates an embedding of positive mass"):
            KernelMean(points, weights, kernel=GaussianKernel(1.0)).herd(3)
    # a positive mass other than one is kept, and the picks are those of the probability it scales
    scaled = KernelMean(points, [0.5, 1.0, 0.5], kernel=GaussianKernel(1.0)).herd(4)
    probability = KernelMean(points, [0.25, 0.5, 0.25], kernel=GaussianKernel(1.0)).herd(4)
    np.testing.assert_array_equal(scaled.points, probability.points)
    np.testing.assert_allclose(scaled.weights, np.full(4, 0.5))


def test_an_unfitted_kernel_is_cloned_not_changed_and_each_embedding_gets_its_own_bandwidth():
    from kbfilter import median_distance

    rng = np.random.default_rng(0)
    near, far = rng.normal(size=(200, 2)), 10 * rng.normal(size=(200, 2))
    kernel = GaussianKernel("median")
    first, second = KernelMean(near, kernel=kernel), KernelMean(far, kernel=kernel)
    assert not hasattr(kernel, "bandwidth_")  # the caller's kernel is untouched
    assert first.kernel.bandwidth_ == pytest.approx(median_distance(near))
    assert second.kernel.bandwidth_ == pytest.approx(median_distance(far))  # about 16, not the first's 1.6
    # a fitted kernel is the way to share one bandwidth, and it is used as it is
    shared = GaussianKernel("median").fit(near)
    a, b = KernelMean(near, kernel=shared), KernelMean(far, kernel=shared)
    assert a.kernel is shared and b.kernel is shared
    assert a.mmd(b) == pytest.approx(b.mmd(a), rel=1e-12)


def test_mmd_test_statistic_is_the_squared_distance_of_kernel_means():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 2)), rng.normal(0.5, size=(20, 2))
    k = kb.GaussianKernel(0.8)
    result = kb.mmd_test(X, Y, kernel=k, n_permutations=10, random_state=0)
    direct = kb.KernelMean(X, kernel=k).mmd(kb.KernelMean(Y, kernel=k), squared=True)
    assert result.statistic == pytest.approx(direct, rel=1e-10)


def test_mmd_test_pvalue_is_uniform_under_the_null_and_small_under_an_alternative():
    from scipy.stats import kstest

    null = [kb.mmd_test(np.random.default_rng(s).normal(size=(25, 2)), np.random.default_rng(s + 10**4).normal(
        size=(15, 2)), n_permutations=199, random_state=s).pvalue for s in range(300)]
    # measured: KS distance 0.042, 5.0 % of p-values <= 0.05. Permutation p-values are multiples of
    # 1/200: the bound allows that much for the discreteness (0.08 is the KS 5 % critical value, n = 300)
    assert kstest(null, "uniform").statistic < 0.08 + 1 / 200
    assert np.mean(np.array(null) <= 0.05) == pytest.approx(0.05, abs=0.035)
    rng = np.random.default_rng(1)
    shifted = kb.mmd_test(rng.normal(size=(50, 2)), rng.normal(1.0, size=(50, 2)), n_permutations=199,
                          random_state=0)
    assert shifted.pvalue == 1 / 200  # no permutation reaches the observed statistic


def test_mmd_test_checks_its_input_and_is_reproducible():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    assert kb.mmd_test(X, Y, random_state=3) == kb.mmd_test(X, Y, random_state=3)
    with pytest.raises(ValueError, match="Y"):
        kb.mmd_test(X, rng.normal(size=(20, 3)))
    with pytest.raises(ValueError, match="n_permutations"):
        kb.mmd_test(X, Y, n_permutations=0)


def test_herd_over_its_own_points_is_herd_over_them_as_candidates():
    rng = np.random.default_rng(4)
    points = rng.normal(size=(60, 2))
    km = kb.KernelMean(points, rng.dirichlet(np.ones(60)), kb.GaussianKernel(0.8))
    np.testing.assert_array_equal(km.herd(15).points, km.herd(15, candidates=points).points)


def test_herding_refuses_more_picks_than_it_can_make_before_any_work():
    # herd(10**9) ran a loop of 10^9 passes and claimed an 8 GB index array
    from kbfilter.embedding import MAX_HERD_PICKS, herd
    km = kb.KernelMean(np.zeros((3, 1)), np.full(3, 1 / 3), kb.GaussianKernel(1.0))
    for call in (lambda m: km.herd(m), lambda m: herd(np.ones(3) / 3, lambda j: np.ones(3), m)):
        with pytest.raises(ValueError, match=f"m: expected an integer <= {MAX_HERD_PICKS}"):
            call(MAX_HERD_PICKS + 1)
        with pytest.raises(ValueError, match="m: expected an integer"):
            call(2.5)
    assert len(herd(np.ones(3) / 3, lambda j: np.eye(3)[j], 4)) == 4


def test_herd_refuses_a_target_or_column_that_would_pick_silently_wrong():
    # each of these picked [0, 0, 0] (argmax of a NaN, of a flattened table, of a broadcast scalar)
    from kbfilter.embedding import herd

    G = np.array([[1.0, 0.1], [0.1, 1.0]])
    for target, match in ((np.array([np.nan, 0.4]), "target: contains NaN"),
                          (np.ones((2, 2)), r"target: expected .* a non-empty 1-D array, got shape \(2, 2\)"),
                          (np.array([]), r"got shape \(0,\)")):
        with pytest.raises(ValueError, match=match):
            herd(target, lambda j: G[:, j], 3)
    target = np.array([0.6, 0.4])
    with pytest.raises(ValueError, match=r"column: expected column\(0\) of shape \(2,\), got \(\)"):
        herd(target, lambda j: 1.0, 3)
    with pytest.raises(ValueError, match="column: returned values that are not finite"):
        herd(target, lambda j: np.array([np.nan, 1.0]), 3)
    with pytest.raises(ValueError, match="column: expected a callable"):
        herd(target, G, 3)
    assert herd(target, lambda j: G[:, j], 3).tolist() == [0, 1, 0]


def test_herding_among_training_states_and_particles_is_herding_over_both_stacked():
    from kbfilter.embedding import herd
    from kbfilter.filters.kmc import herd_with_particles

    rng = np.random.default_rng(5)
    states, particles = rng.normal(size=(50, 2)), rng.normal(size=(30, 2))  # n != N: a transposed block shows
    kernel = kb.GaussianKernel(0.7)
    S, C, P = kernel(states), kernel(states, particles), kernel(particles)
    p = rng.dirichlet(np.ones(50))
    stacked = np.block([[S, C], [C.T, P]])
    expected = herd(np.concatenate([S @ p, C.T @ p]), lambda j: stacked[:, j], 40)
    np.testing.assert_array_equal(herd_with_particles(S, C, P, p, 40), expected)
    assert np.any(expected >= 50) and np.any(expected < 50)  # both kinds of candidate were picked
