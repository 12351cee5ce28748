import copy

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from kbfilter import GaussianKernel, LaplaceKernel, LinearKernel, NystromKernel, RandomFourierKernel, median_distance
from kbfilter.kernels import median_rows
from kbfilter.persistence import load, save


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(40, 3)), rng.normal(size=(7, 3))


def test_gaussian_and_laplace_match_their_formulas(data):
    A, B = data
    D = cdist(A, B)
    np.testing.assert_allclose(GaussianKernel(0.7)(A, B), np.exp(-D**2 / (2 * 0.7**2)), rtol=1e-12)
    np.testing.assert_allclose(LaplaceKernel(0.7)(A, B), np.exp(-D / 0.7), rtol=1e-12)
    np.testing.assert_allclose(LinearKernel()(A, B), A @ B.T, rtol=1e-12)


def test_scale_multiplies_bandwidth(data):
    A, _ = data
    np.testing.assert_allclose(GaussianKernel(0.5, scale=2.0)(A), GaussianKernel(1.0)(A))


def test_median_heuristic_and_subsample_seed(data):
    A, _ = data
    k = GaussianKernel("median", scale=0.5).fit(A)
    assert k.bandwidth_ == pytest.approx(0.5 * np.median(cdist(A, A)[np.triu_indices(40, 1)]))
    big = np.random.default_rng(0).normal(size=(3000, 2))
    assert median_distance(big, random_state=3) == median_distance(big, random_state=3)
    # the distance between two independent N(0, I_2) points is Rayleigh(sqrt 2): median 2 sqrt(ln 2)
    assert median_distance(big, random_state=3) == pytest.approx(2 * np.sqrt(np.log(2)), rel=0.05)


def test_gram_is_exactly_symmetric(data):
    A, _ = data
    G = GaussianKernel(0.3)(A)
    assert np.array_equal(G, G.T)


def test_batched_and_paired_agree_with_gram(data):
    A, B = data
    for k in (GaussianKernel(0.8), LaplaceKernel(0.8), LinearKernel()):
        stack = np.stack([A[:5], A[5:10]])
        G = k.gram_batched(stack)
        np.testing.assert_allclose(G[1], k(A[5:10], A[5:10]), atol=1e-12)
        np.testing.assert_allclose(k.paired(A[:7], B), np.diag(k(A[:7], B)), atol=1e-12)
        np.testing.assert_allclose(k.diag(B), np.diag(k(B)), atol=1e-12)


def test_paired_points_that_are_not_finite_or_do_not_pair_are_refused():
    # NaN points gave NaN values without a word, and pairs of unequal counts numpy's broadcasting error
    from kbfilter.linalg import batched_pivoted_cholesky

    k, P = GaussianKernel(0.8), np.zeros((3, 2))
    bad = P.copy()
    bad[1, 0] = np.nan
    for A, B, message in ((bad, P, "A: expected finite points"),
                          (P, np.full((3, 2), np.inf), "B: expected finite points"),
                          (P, np.zeros((4, 2)), r"A, B: expected points of shapes \(\.\.\., d\) that broadcast"),
                          (P, np.zeros((3, 1)), "that broadcast together, got \\(3, 2\\) and \\(3, 1\\)"),
                          (1.0, P, "A: expected finite points of shape \\(\\.\\.\\., d\\), got a scalar")):
        with pytest.raises(ValueError, match=message):
            k.paired(A, B)
    np.testing.assert_array_equal(k.paired(P, P[:1]), np.ones(3))
    with pytest.raises(ValueError, match="X: expected finite points of shape \\(q, m, d\\), got NaN"):
        batched_pivoted_cholesky(k, bad[None], 1e-6, 2)
    with pytest.raises(ValueError, match="X: expected finite points of shape \\(q, m, d\\), got shape \\(3, 2\\)"):
        batched_pivoted_cholesky(k, P, 1e-6, 2)


def test_unfitted_median_kernel_is_reported(data):
    with pytest.raises(NotFittedError, match="fitted"):
        GaussianKernel("median")(data[0])
    # the approximations' rank, read before fit, named the factor or sampler the getter missed
    for approximation in (NystromKernel(), RandomFourierKernel()):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            approximation.rank_


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, "mean"])
def test_bad_bandwidth(bad, data):
    with pytest.raises(ValueError, match="bandwidth"):
        GaussianKernel(bad).fit(data[0])


@pytest.mark.parametrize("kernel", [GaussianKernel, LaplaceKernel])
def test_the_median_subsample_settings_are_checked_by_their_own_names(kernel):
    # they are read only when the data has more rows than max_median_points: numpy's own messages
    # ("SeedSequence expects int...", "expected non-negative integer") came from deep inside a fit
    X = np.random.default_rng(0).normal(size=(1500, 2))
    for bad in ("x", -1, 1.5):
        with pytest.raises(ValueError, match="^random_state: expected None, a non-negative int"):
            kernel(random_state=bad).fit(X[:10])
    for bad in (1, 2.5, "1000"):
        with pytest.raises(ValueError, match="^max_median_points: expected an integer"):
            kernel(max_median_points=bad).fit(X)
    # a seed or a Generator picks the same subsample
    seeded = kernel(random_state=5, max_median_points=100).fit(X).bandwidth_
    assert kernel(random_state=np.random.default_rng(5), max_median_points=100).fit(X).bandwidth_ == seeded
    assert kernel(max_median_points=2000).fit(X).bandwidth_ == pytest.approx(np.median(pdist(X)))  # every row


def test_constant_data_has_no_median_bandwidth():
    with pytest.raises(ValueError, match="median pairwise distance"):
        GaussianKernel("median").fit(np.ones((10, 2)))
    # nor do data spread too finely to tell apart (their squared distances underflow): the message
    # says to change units
    with pytest.raises(ValueError, match="too close together .* smaller units"):
        GaussianKernel("median", standardise=False).fit(1e-200 * np.arange(20.0).reshape(10, 2))


def test_bad_arrays(data):
    A, _ = data
    with pytest.raises(ValueError, match=r"B: expected 3 columns \(features per sample\), got"):
        GaussianKernel(1.0)(A, np.ones((2, 2)))
    bad = A.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        GaussianKernel(1.0)(bad)


@pytest.mark.parametrize("kernel", [GaussianKernel(standardise=True), LaplaceKernel(standardise=True),
                                    GaussianKernel(), LaplaceKernel(), GaussianKernel(bandwidth=2.0)])
def test_a_fitted_kernel_refuses_points_of_another_dimension(kernel, tmp_path):
    # a standardising kernel would broadcast one column's scale over three; any other measured three
    # coordinates with the median distance of one, silently
    kernel = clone(kernel).fit(np.random.default_rng(0).normal(size=(50, 1)))
    P = np.ones((3, 3))
    for fitted in (kernel, kernel.frozen(), load(save(kernel, tmp_path / "k.npz"))):
        for call, name in ((lambda: fitted(P, P), "A"), (lambda: fitted(P), "A"), (lambda: fitted.diag(P), "X"),
                           (lambda: fitted.in_bandwidths(P), "X"), (lambda: fitted.coordinates(P), "X"),
                           (lambda: fitted.gram_batched(P[None]), "X"), (lambda: fitted.paired(P, P), "X")):
            with pytest.raises(ValueError, match=f"{name}: expected 1 columns \\(the fit data's\\), got 3"):
                call()
        np.testing.assert_array_equal(fitted(P[:, :1], P[:2, :1]), kernel(P[:, :1], P[:2, :1]))
    if kernel.standardise:
        # a kernel saved before it recorded n_features_in_ knows its width by its column scales
        older = copy.copy(kernel)
        del older.n_features_in_
        with pytest.raises(ValueError, match="A: expected 1 columns \\(the fit data's\\), got 3"):
            older(P)
    if not (isinstance(kernel.bandwidth, str) or kernel.standardise):
        # before fit, a kernel with a bandwidth of its own takes points of any dimension
        assert clone(kernel)(P).shape == (3, 3)


@pytest.mark.parametrize("kernel", [GaussianKernel(), GaussianKernel(standardise=True, scale=0.5),
                                    LaplaceKernel(standardise=True, max_median_points=50, random_state=3),
                                    GaussianKernel(bandwidth=0.7, standardise=True)])
def test_a_kernel_fitted_from_a_summary_equals_one_fitted_on_all_the_data(kernel):
    X = np.random.default_rng(1).normal(size=(400, 3)) * [1.0, 30.0, 0.01]
    whole = clone(kernel).fit(X)
    rows = median_rows(len(X), kernel.max_median_points, kernel.random_state)
    summary = clone(kernel).fit_summary(X.std(axis=0), X[np.sort(rows)])
    assert np.isclose(summary.bandwidth_, whole.bandwidth_, rtol=1e-12)
    Q = X[:7] + 0.1
    assert np.allclose(summary(Q, X), whole(Q, X), rtol=1e-10, atol=0)
    with pytest.raises(ValueError, match="'bkl' needs all the data"):
        GaussianKernel(bandwidth="bkl").fit_summary(X.std(axis=0), X[:50])


@pytest.mark.parametrize("kernel", [GaussianKernel(1.0), LaplaceKernel(1e-100), GaussianKernel(2.0, standardise=True)])
def test_points_far_apart_get_exact_values_never_nan(kernel):
    A = np.array([[0.0, 0.0], [1e200, -3.0], [1e7, 1.0]])
    B = np.array([[1e200, -3.0], [0.0, 0.0], [-1e300, 0.0], [1e7 + 0.5, 1.0]])
    kernel = clone(kernel).fit(np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 1.0]]))
    s = kernel.bandwidth_ * getattr(kernel, "column_scale_", 1.0)
    with np.errstate(over="ignore"):  # squares past 1e308 are inf: a kernel value of 0
        sq = (((A[:, None, :] - B[None, :, :]) / s) ** 2).sum(axis=2)
    expected = np.exp(-0.5 * sq) if isinstance(kernel, GaussianKernel) else np.exp(-np.sqrt(sq))
    got = kernel(A, B)
    assert np.all(np.isfinite(got)) and np.allclose(got, expected, rtol=1e-12, atol=0)
    assert got[1, 0] == 1.0 and got[0, 1] == 1.0  # a far point is itself


def test_gram_matrices_are_scikit_learns_to_the_bit():
    from sklearn.metrics.pairwise import euclidean_distances, linear_kernel, rbf_kernel

    from kbfilter.kernels import squared_distances

    rng = np.random.default_rng(5)
    for shift in (0.0, 1e4):
        A, B = rng.normal(size=(300, 3)) + shift, rng.normal(size=(7, 3)) + shift
        np.testing.assert_array_equal(squared_distances(A, B), euclidean_distances(A, B, squared=True))
    A, B = rng.normal(size=(300, 3)), rng.normal(size=(7, 3))
    # the kernels measure in bandwidths from the first point (see Kernel.__call__): scikit-learn on
    # the same coordinates gives the same bits
    gauss, laplace = GaussianKernel(bandwidth=0.7).fit(A), LaplaceKernel(bandwidth=0.7).fit(A)
    a, b = (A - A[0]) / 0.7, (B - A[0]) / 0.7
    np.testing.assert_array_equal(gauss(A, B), rbf_kernel(a, b, gamma=0.5))
    np.testing.assert_array_equal(laplace(A, B), np.exp(-euclidean_distances(a, b)))
    np.testing.assert_array_equal(LinearKernel()(A, B), linear_kernel(A, B))
