"""Bayesian kernel learning: the marginal pseudolikelihood and the bandwidth that maximises it."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import multivariate_normal
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

import kbfilter as kb
from kbfilter.bandwidth_learning import bayesian_bandwidth, log_pseudolikelihood, posterior_embedding


def _direct(X, Z, s, tau2):
    """The mn-dimensional normal density and the Jacobians, written out."""
    n, d = X.shape
    m = Z.shape[0]
    Phi = np.exp(-cdist(Z, X, "sqeuclidean") / (2 * s * s))
    R = (np.pi * s * s) ** (d / 2) * np.exp(-cdist(Z, Z, "sqeuclidean") / (4 * s * s))
    cov = np.kron(np.ones((n, n)), R) + tau2 * np.eye(m * n)
    value = multivariate_normal(np.zeros(m * n), cov).logpdf(Phi.T.ravel())
    for i in range(n):
        J = -Phi[:, i, None] * (X[i] - Z) / s**2  # (m, d): d k(x_i, z_l) / d x
        value += 0.5 * np.log(np.linalg.det(J.T @ J))
    return value


@pytest.mark.parametrize("d", [1, 2, 3])
def test_kronecker_closed_form_equals_the_direct_density(d):
    rng = np.random.default_rng(d)
    X, Z = rng.normal(size=(7, d)), rng.normal(size=(3 + 2 * d, d))  # enough z for a well-posed J^T J
    for s, tau2 in ((0.7, 0.05), (2.0, 1e-3)):
        assert log_pseudolikelihood(X, Z, s, tau2) == pytest.approx(_direct(X, Z, s, tau2), rel=1e-8)


def test_profile_over_the_noise_is_the_best_noise():
    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(60, 2)), rng.normal(size=(8, 2))
    best = log_pseudolikelihood(X, Z, 0.8)
    grid = max(log_pseudolikelihood(X, Z, 0.8, t) for t in np.geomspace(1e-6, 1.0, 200))
    assert grid <= best + 1e-6 and best - grid < 1e-2 * abs(best)


def test_bkl_finds_the_clusters_scale_where_the_median_finds_the_layout():
    rng = np.random.default_rng(0)
    centres = 10.0 * np.array([[i, j] for i in range(3) for j in range(3)])
    X = np.repeat(centres, 60, axis=0) + 0.5 * rng.normal(size=(540, 2))
    fit = bayesian_bandwidth(X, random_state=0)
    assert fit.bandwidth < 0.1 * fit.median
    assert fit.log_pseudolikelihood == pytest.approx(
        log_pseudolikelihood(X[~np.isin(X, fit.inducing).all(axis=1)], fit.inducing, fit.bandwidth, fit.noise))
    # the kernel resolves "bkl" through it, reproducibly
    a = kb.GaussianKernel("bkl", random_state=0).fit(X)
    assert a.bandwidth_ == pytest.approx(fit.bandwidth)
    assert kb.GaussianKernel("bkl", scale=2.0, random_state=0).fit(X).bandwidth_ == pytest.approx(2 * fit.bandwidth)


def test_bkl_bandwidth_makes_the_mmd_test_see_rotated_components():
    # the scenario's setting in small: the median bandwidth misses a change of the components' shape
    rng = np.random.default_rng(1)
    centres = np.repeat(10.0 * np.array([[i, j] for i in range(3) for j in range(3)]), 60, axis=0)
    P = centres + rng.normal(size=centres.shape)
    turn = np.array([[1.0, -1.0], [1.0, 1.0]]) / np.sqrt(2.0)
    Q = centres + rng.multivariate_normal([0, 0], turn @ np.diag([3.0, 1 / 3.0]) @ turn.T, size=len(centres))
    pooled = np.vstack([P, Q])
    pvalues = {}
    for name in ("median", "bkl"):
        s = kb.GaussianKernel(name, random_state=0).fit(pooled).bandwidth_
        pvalues[name] = kb.mmd_test(P, Q, kernel=kb.GaussianKernel(s), n_permutations=200, random_state=0).pvalue
    assert pvalues["bkl"] < 0.01 < 0.05 < pvalues["median"]


def test_bkl_errors():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match="bandwidth: expected a positive float, 'median', got 'bkl'"):
        kb.LaplaceKernel("bkl").fit(X)
    with pytest.raises(ValueError, match="min_ratio: expected less than max_ratio"):
        bayesian_bandwidth(X, min_ratio=2.0)
    with pytest.raises(ValueError, match="X: the median pairwise distance is 0"):
        bayesian_bandwidth(np.ones((10, 2)))
    with pytest.raises(ValueError, match="noise"):
        log_pseudolikelihood(X, X[:3], 1.0, -1.0)


@pytest.mark.parametrize("d", [1, 2])
def test_posterior_embedding_is_gaussian_process_regression_on_the_empirical_embedding(d):
    # r(z, z') = (pi s^2)^(d/2) exp(-|z - z'|^2 / (4 s^2)) is scikit-learn's constant times RBF
    # with length scale sqrt(2) s; the empirical embedding is observed with noise tau^2 / n.
    rng = np.random.default_rng(10 + d)
    X, Z, Q = rng.normal(size=(150, d)), rng.normal(size=(12, d)), rng.normal(size=(9, d)) * 1.5
    s, tau2 = 0.6, 0.3
    mu_hat = np.exp(-cdist(Z, X, "sqeuclidean") / (2 * s * s)).mean(axis=1)
    kernel = ConstantKernel((np.pi * s * s) ** (d / 2), "fixed") * RBF(np.sqrt(2) * s, "fixed")
    gp = GaussianProcessRegressor(kernel, alpha=tau2 / len(X), optimizer=None).fit(Z, mu_hat)
    mean, sd = gp.predict(Q, return_std=True)
    post = posterior_embedding(X, Q, s, tau2, inducing=Z)
    np.testing.assert_allclose(post.mean, mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(post.sd, sd, rtol=1e-5, atol=1e-7)


def test_posterior_embedding_shrinks_with_the_noise_and_interpolates_without_it():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    s = 0.5
    empirical = np.exp(-cdist(X, X, "sqeuclidean") / (2 * s * s)).mean(axis=1)
    # nearly noiseless: the posterior mean passes through the empirical embedding at the sample
    np.testing.assert_allclose(posterior_embedding(X, X, s, 1e-9).mean, empirical, rtol=1e-4)
    norms = [np.linalg.norm(posterior_embedding(X, X, s, tau2).mean) for tau2 in (1e-2, 1.0, 100.0, 1e4)]
    assert np.all(np.diff(norms) < 0), norms
    assert norms[-1] < 0.8 * norms[0]  # the empirical embedding is smooth: it takes a large tau^2


def test_posterior_embedding_errors():
    X = np.zeros((10, 2))
    with pytest.raises(ValueError, match="points"):
        posterior_embedding(X, np.zeros((3, 3)), 1.0, 0.1)
    with pytest.raises(ValueError, match="noise"):
        posterior_embedding(X, X, 1.0, 0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        posterior_embedding(X, X, -1.0, 0.1)


def test_a_pseudolikelihood_that_is_minus_infinity_everywhere_is_refused_not_maximised():
    """With fewer held-out points than dimensions the feature map's Jacobian is singular, the
    pseudolikelihood is -inf at every bandwidth, and the search returned an arbitrary grid point
    (0.41 for a median of 42 on this sample) as if it were the maximum."""
    rng = np.random.default_rng(0)
    X = 3.0 * rng.normal(size=(200, 100))
    with pytest.raises(ValueError, match=r"n_inducing: the default, .* expected at least as many points as X has "
                                         r"dimensions \(100\), got 40"):
        bayesian_bandwidth(X, random_state=0)
    with pytest.raises(ValueError, match=r"n_inducing: expected at least as many points as X has dimensions \(100\), "
                                         r"got 60"):
        bayesian_bandwidth(X, n_inducing=60, random_state=0)
    with pytest.raises(ValueError, match=r"inducing: expected at least as many points as X has dimensions \(100\)"):
        log_pseudolikelihood(X, X[:10], 1.0)
    # enough points in few dimensions, but a grid so narrow that every observation's Jacobian is
    # numerically singular: no value to maximise either
    X = rng.normal(size=(200, 3))
    with pytest.raises(ValueError, match=r"X: the pseudolikelihood is -inf at every bandwidth from 0.0001 to 0.002"):
        bayesian_bandwidth(X, min_ratio=1e-4, max_ratio=2e-3, random_state=0)
    # the same sample on the default grid has a finite maximum, inside it
    fit = bayesian_bandwidth(X, random_state=0)
    assert np.isfinite(fit.log_pseudolikelihood) and 0.005 * fit.median <= fit.bandwidth <= fit.median


@pytest.mark.parametrize("bandwidth", [1e-300, 1e300])
def test_a_bandwidth_whose_prior_scale_overflows_is_named_not_a_nan(bandwidth):
    """``(pi s^2)^(d/2)`` out of float64's range gave a NaN pseudolikelihood (or an ``OverflowError``
    from Python's power in the posterior) with nothing said about why."""
    X = np.random.default_rng(1).normal(size=(40, 2))
    with pytest.raises(ValueError, match=r"bandwidth: the prior's scale \(pi s\^2\)\^\(d/2\) over- or underflows"):
        log_pseudolikelihood(X, X[:5], bandwidth)
    with pytest.raises(ValueError, match=r"bandwidth: the prior's scale \(pi s\^2\)\^\(d/2\) over- or underflows"):
        posterior_embedding(X, X[:3], bandwidth, 0.1)
    # in many dimensions an ordinary bandwidth overflows it too
    X = np.random.default_rng(1).normal(size=(40, 300))
    with pytest.raises(ValueError, match=r"bandwidth: the prior's scale .* for s = 100 in d = 300 dimensions"):
        posterior_embedding(X, X[:3], 100.0, 0.1)
