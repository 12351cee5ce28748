import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_ridge import KernelRidge

from kbfilter import (ConditionalEmbedding, GaussianKernel, LaplaceKernel, LinearKernel, NumericalWarning, loo_loss,
                      select_conditional_embedding)
from kbfilter.closed_forms import gaussian_conditional, rkhs_error_to_gaussian


def linear_data(n, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 2))
    B = A @ np.array([[1.0, 0.5], [-0.3, 1.0]]) + 0.3 * rng.normal(size=(n, 2))
    return A, B, rng.normal(size=(25, 2))


def dense(W):
    return W.toarray() if sp.issparse(W) else W


def test_exact_mean_equals_kernel_ridge():
    A, B, Q = linear_data(300)
    reg = 1e-3
    cme = ConditionalEmbedding(GaussianKernel(0.9), GaussianKernel(1.0), reg=reg).fit(A, B)
    krr = KernelRidge(alpha=300 * reg, kernel="rbf", gamma=1 / (2 * 0.9**2)).fit(A, B)
    np.testing.assert_allclose(cme.predict_mean(Q), krr.predict(Q), atol=1e-8)


@pytest.mark.parametrize(
    "method, params",
    [("knn", {"n_neighbors": 200}), ("nystrom", {"rank": 200}), ("icf", {"rank": 200}), ("random", {"rank": 200})],
)
def test_full_size_approximations_equal_exact(method, params):
    A, B, Q = linear_data(200)
    kw = dict(kernel_in=GaussianKernel(1.0), kernel_out=GaussianKernel(1.0), reg=1e-2)
    exact = ConditionalEmbedding(**kw).fit(A, B)
    approx = ConditionalEmbedding(method=method, random_state=0, **kw, **params).fit(A, B)
    np.testing.assert_allclose(dense(approx.weights(Q)), exact.weights(Q), atol=1e-6)
    np.testing.assert_allclose(approx.predict_mean(Q), exact.predict_mean(Q), atol=1e-6)


def test_random_fourier_features_approach_exact_as_they_grow():
    A, B, Q = linear_data(300)
    kw = dict(kernel_in=GaussianKernel(1.0), kernel_out=GaussianKernel(1.0), reg=1e-2)
    exact = ConditionalEmbedding(**kw).fit(A, B).predict_mean(Q)
    errors = []
    for rank in (20, 200, 5000):
        gaps = [np.abs(ConditionalEmbedding(method="rff", rank=rank, random_state=seed, **kw).fit(A, B)
                       .predict_mean(Q) - exact).max() for seed in range(3)]
        errors.append(np.mean(gaps))
    # measured: 0.76, 0.16, 0.030 against predictions up to 1.9: a Monte Carlo error, ~ 1 / sqrt(rank)
    assert errors[2] < errors[1] < errors[0]
    assert errors[1] > 3 * errors[2]
    assert errors[2] < 0.025 * np.abs(exact).max()
    with pytest.raises(ValueError, match="Gaussian"):
        ConditionalEmbedding(LaplaceKernel("median"), method="rff").fit(A, B)


def test_knn_weights_are_sparse_with_m_entries_per_column():
    A, B, Q = linear_data(500)
    cme = ConditionalEmbedding(reg=1e-3, method="knn", n_neighbors=30).fit(A, B)
    W = cme.weights(Q)
    assert sp.issparse(W) and W.shape == (500, 25)
    assert np.all(np.diff(W.indptr) == 30)
    # each column is the exact CKME on its neighbourhood (the localized CKME paper eq. 4)
    idx = np.flatnonzero(dense(W[:, 3]))
    sub = ConditionalEmbedding(GaussianKernel(cme.kernel_in_.bandwidth_), reg=1e-3).fit(A[idx], B[idx])
    np.testing.assert_allclose(dense(W[:, 3])[idx, 0], sub.weights(Q[3:4])[:, 0], atol=1e-10)


def test_knn_with_laplace_kernel_and_linear_kernel_rejected():
    A, B, Q = linear_data(100)
    ConditionalEmbedding(LaplaceKernel("median"), method="knn", n_neighbors=10).fit(A, B).predict_mean(Q)
    with pytest.raises(ValueError, match="radial"):
        ConditionalEmbedding(LinearKernel(), method="knn", n_neighbors=10).fit(A, B)
    with pytest.raises(ValueError, match="Nystroem"):
        ConditionalEmbedding(LaplaceKernel("median"), method="nystrom").fit(A, B)


def test_nadaraya_watson_weights_are_normalised_similarities():
    A, B, Q = linear_data(100)
    cme = ConditionalEmbedding(GaussianKernel(0.5), method="nw").fit(A, B)
    W = cme.weights(Q)
    np.testing.assert_allclose(W.sum(axis=0), 1.0)
    K = GaussianKernel(0.5)(A, Q)
    np.testing.assert_allclose(W, K / K.sum(axis=0))
    # every similarity underflows: the nearest training input's output is used, counted and warned about
    # (it had been neither)
    with pytest.warns(NumericalWarning, match=r"^Nadaraya-Watson: every similarity underflowed to 0 for 1 of 2 "):
        far = cme.predict_mean([[1e3, 1e3], [0.0, 0.0]])
    nearest = np.argmin(np.sum((A - 1e3) ** 2, axis=1))
    np.testing.assert_allclose(far[0], B[nearest])
    assert cme.diagnostics_["nearest_input"] == 1


def gaussian_model(seed):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(4, 4))
    V = M.T @ M
    return rng, V


def mean_rkhs_error(n, seed, n_queries=30):
    rng, V = gaussian_model(seed)
    XY = rng.multivariate_normal(np.zeros(4), V, size=n)
    A, B = XY[:, :2], XY[:, 2:]
    s_out = 1.0
    cme = ConditionalEmbedding(GaussianKernel("median"), GaussianKernel(s_out), reg=1e-3 / np.sqrt(n)).fit(A, B)
    gain, offset, cov = gaussian_conditional(np.zeros(4), V, [0, 1], [2, 3])
    Q = rng.multivariate_normal(np.zeros(2), V[:2, :2], size=n_queries)
    W = cme.weights(Q)
    G = GaussianKernel(s_out)(B)
    errs = [rkhs_error_to_gaussian(B, W[:, j], offset + gain @ q, cov, s_out, W[:, j] @ G @ W[:, j])
            for j, q in enumerate(Q)]
    return np.mean(errs)


def test_rkhs_error_of_exact_falls_with_n():
    small = np.mean([mean_rkhs_error(100, s) for s in range(3)])
    large = np.mean([mean_rkhs_error(2000, s) for s in range(3)])
    assert large < 0.7 * small


def test_closed_form_loo_equals_brute_force():
    A, B, _ = linear_data(40, seed=5)
    kin, kout = GaussianKernel(0.8), GaussianKernel(1.2)
    reg = 1e-2
    n = len(A)
    brute = []
    for j in range(n):
        keep = np.arange(n) != j
        # same ridge n*reg in the (n-1)-point fit
        cme = ConditionalEmbedding(kin, kout, reg=reg * n / (n - 1)).fit(A[keep], B[keep])
        brute.append(cme.held_out_loss(A[j : j + 1], B[j : j + 1]))
    assert loo_loss(kin(A), kout(B), reg) == pytest.approx(np.mean(brute), rel=1e-8)


def test_loo_loss_with_a_vanishing_reg_reaches_its_limit_not_zero_over_zero():
    """As reg -> 0, (I - H) -> n reg G_in^{-1}, and the loss -> mean_j (A G_out A)_jj / A_jj^2 with
    A = G_in^{-1}; at reg = 1e-200 both quadratics of the closed form underflowed, giving NaN."""
    A_in, B, _ = linear_data(6, seed=2)
    G_in, G_out = GaussianKernel(0.3)(A_in), GaussianKernel(1.0)(B)
    A = np.linalg.inv(G_in)
    limit = np.mean(np.diag(A @ G_out @ A) / np.diag(A) ** 2)
    assert loo_loss(G_in, G_out, 1e-200) == pytest.approx(limit, rel=1e-6)
    assert loo_loss(G_in, G_out, 1e-12) == pytest.approx(limit, rel=1e-6)


@pytest.mark.parametrize("G_in, G_out, message", [
    (np.eye(3), np.eye(4), r"G_out: expected shape \(3, 3\) \(G_in's"),
    (np.ones((3, 4)), np.eye(3), r"G_in: expected a square Gram matrix, got shape \(3, 4\)"),
    (np.full((3, 3), np.nan), np.eye(3), "G_in: contains NaN"),
    (np.eye(3), np.ones(3), "G_out: expected a 2-D array"),
    # a cross-Gram matrix of two samples is square but not a Gram matrix; nor is an indefinite similarity
    (GaussianKernel(1.0)(np.arange(3.0)[:, None], np.arange(3.0)[:, None] + 0.5), np.eye(3),
     "G_in: expected a symmetric Gram matrix; it differs from its transpose by 0.558"),
    (np.array([[1.0, 2.0], [2.0, 1.0]]), np.eye(2), "G_in: expected a positive semi-definite Gram matrix; its smallest "
     "eigenvalue is -1"),
])
def test_loo_loss_refuses_gram_matrices_that_do_not_fit_by_name(G_in, G_out, message):
    with pytest.raises(ValueError, match=message):
        loo_loss(G_in, G_out, 0.1)


def test_grid_selection_prefers_sensible_parameters():
    A, B, Q = linear_data(200, seed=6)
    cme, table = select_conditional_embedding(A, B, scales=(0.02, 1.0), regs=(1e-3, 1e3))
    assert len(table) == 4
    best = min(table, key=lambda r: r["loo"])
    assert best["scale"] == 1.0 and best["reg"] == 1e-3
    assert cme.reg == 1e-3 and cme.kernel_in_.bandwidth_ == pytest.approx(cme.kernel_in.fit(A).bandwidth_)
    # the candidate lists are checked before any fit: a lone value (a TypeError), none, a bad value
    for kwargs, expected in [(dict(scales=0.5), "scales: expected a list of positive numbers, got 0.5"),
                             (dict(regs=()), "regs: expected a list of positive numbers, got an empty one"),
                             (dict(regs=(1e-3, -1.0)), "regs: expected a positive finite number, got -1.0")]:
        with pytest.raises(ValueError, match=re.escape(expected)):
            select_conditional_embedding(A, B, **kwargs)


def test_held_out_loss_same_for_sparse_and_dense_weights():
    A, B, Q = linear_data(150)
    kw = dict(kernel_in=GaussianKernel(1.0), kernel_out=GaussianKernel(1.0), reg=1e-2)
    Bq = Q @ np.array([[1.0, 0.5], [-0.3, 1.0]])
    exact = ConditionalEmbedding(**kw).fit(A, B).held_out_loss(Q, Bq)
    knn = ConditionalEmbedding(method="knn", n_neighbors=150, **kw).fit(A, B).held_out_loss(Q, Bq)
    assert knn == pytest.approx(exact, rel=1e-8)


def test_mode_prediction_on_bimodal_conditional():
    rng = np.random.default_rng(7)
    A = rng.uniform(-1, 1, size=(600, 1))
    sign = np.where(rng.uniform(size=(600, 1)) < 0.8, 1.0, -1.0)
    B = sign * 2.0 + 0.2 * rng.normal(size=(600, 1))
    cme = ConditionalEmbedding(GaussianKernel(0.5), GaussianKernel(0.3), reg=1e-3).fit(A, B)
    np.testing.assert_allclose(cme.predict_mode([[0.0]]), [[2.0]], atol=0.15)
    assert abs(cme.predict_mean([[0.0]])[0, 0] - 1.2) < 0.3  # 0.8*2 - 0.2*2
    # far from every input the embedding is 0, which has no mode: the first training output was
    # returned as if it were one
    with pytest.raises(ValueError, match=r"^Q\[1\]: the conditional embedding there has no positive weight"):
        cme.predict_mode([[0.0], [100.0]])


def test_embed_returns_kernel_means_on_support():
    A, B, Q = linear_data(100)
    means = ConditionalEmbedding(method="knn", n_neighbors=10).fit(A, B).embed(Q[:3])
    assert len(means) == 3 and all(len(m) == 10 for m in means)


def test_random_subsample_is_reproducible():
    A, B, Q = linear_data(300)
    a = ConditionalEmbedding(method="random", rank=50, random_state=3).fit(A, B).predict_mean(Q)
    b = ConditionalEmbedding(method="random", rank=50, random_state=3).fit(A, B).predict_mean(Q)
    c = ConditionalEmbedding(method="random", rank=50, random_state=4).fit(A, B).predict_mean(Q)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize(
    "kwargs, A_mod, B_mod, match",
    [
        ({}, lambda A: A[:-1], None, "same number of samples"),
        ({}, lambda A: np.where(np.arange(A.size).reshape(A.shape) == 0, np.nan, A), None, "A: contains NaN"),
        ({}, None, lambda B: np.where(B == B[0, 0], np.inf, B), "B: contains NaN or infinite"),
        ({}, lambda A: A[:, :, None], None, "A: expected a 2-D array"),
        ({"method": "knn", "n_neighbors": 1000}, None, None, "n_neighbors"),
        ({"reg": 0.0}, None, None, "reg"),
        ({"reg": -1.0}, None, None, "reg"),
        ({"kernel_in": GaussianKernel(-1.0)}, None, None, "bandwidth"),
        ({"method": "lowrank"}, None, None, "method"),
    ],
)
def test_bad_input_names_argument(kwargs, A_mod, B_mod, match):
    A, B, _ = linear_data(50)
    A = A_mod(A) if A_mod else A
    B = B_mod(B) if B_mod else B
    with pytest.raises(ValueError, match=match):
        ConditionalEmbedding(**kwargs).fit(A, B)


def test_query_dimension_checked():
    A, B, _ = linear_data(50)
    cme = ConditionalEmbedding().fit(A, B)
    with pytest.raises(ValueError, match=r"Q: expected 2 columns \(features per sample\)"):
        cme.predict_mean(np.zeros((3, 3)))


def test_a_local_gram_that_is_not_numerically_spd_is_solved_by_the_jitter_rule_and_warned_about():
    """Each training input three times and a regulariser of 1e-300: the neighbourhoods' Grams plus
    the ridge are singular, the batched Cholesky fails, and each neighbourhood is solved by the
    library's rule (the first jitter of the ladder that factors), with one warning that counts
    them (there had been one a neighbourhood)."""
    from kbfilter.linalg import JITTER_LADDER

    rng = np.random.default_rng(3)
    A = np.repeat(rng.normal(size=(20, 2)), 3, axis=0)
    B = A + 0.1 * rng.normal(size=A.shape)
    Q = A[:5] + 0.01
    cme = ConditionalEmbedding(GaussianKernel(1.0), reg=1e-300, method="knn", n_neighbors=6, solver="dense").fit(A, B)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idx, vals = cme.local_weights(Q)
    assert [(w.category, str(w.message)) for w in caught] == [
        (NumericalWarning, "local Gram: Cholesky failed on 5 of 5 neighbourhoods, solved by the fallback rules of "
                           "kbfilter.linalg.spd_factor (jitter 5)")]
    assert cme.diagnostics_ == {"jitter": 5}  # counted where the solves happen, at the queries
    kernel = cme.kernel_in_
    for q, rows, w in zip(Q, idx, vals):
        G = kernel(A[rows]) + 6 * 1e-300 * np.eye(6)
        jitter = JITTER_LADDER[0] * np.mean(np.diag(G))   # duplicated points: the first rung factors
        k = kernel(A[rows], q[None, :])[:, 0]
        # the jittered system is ill-conditioned (1e10): its solution is checked by its residual
        np.testing.assert_allclose((G + jitter * np.eye(6)) @ w, k, rtol=0, atol=1e-12 * np.abs(k).max())
        # duplicated inputs share their weight equally
        np.testing.assert_allclose(w[A[rows][:, 0] == A[rows][0, 0]], w[0], rtol=1e-6)
    with pytest.warns(NumericalWarning, match="local Gram: Cholesky failed on 5 of 5"):
        assert np.all(np.isfinite(cme.predict_mean(Q)))
    assert cme.diagnostics_ == {"jitter": 10}


def test_low_rank_local_solve_equals_dense_local_solve():
    from kbfilter.linalg import batched_pivoted_cholesky

    rng = np.random.default_rng(8)
    A = rng.normal(size=(20000, 2))
    B = A + rng.normal(size=A.shape)
    Q = rng.normal(size=(40, 2))
    for bandwidth, low_rank_expected in ((2.0, True), (0.001, False)):
        auto, dense = (ConditionalEmbedding(GaussianKernel(bandwidth), reg=1e-3, method="knn", n_neighbors=300,
                                            solver=solver).fit(A, B) for solver in ("auto", "dense"))
        idx, vals = auto.local_weights(Q)
        idx_dense, vals_dense = dense.local_weights(Q)
        assert np.array_equal(idx, idx_dense)
        local = A[idx]
        # wide: the neighbourhoods are small against the bandwidth and the low-rank path is taken;
        # narrow: the local Grams are of full rank and "auto" falls back to the dense solve
        L, done = batched_pivoted_cholesky(auto.kernel_in_, local, 1e-12 * 0.3, 75)
        assert done.all() == low_rank_expected
        kq = auto.kernel_in_.paired(local, Q[:, None, :])
        G = auto.kernel_in_.gram_batched(local) + 0.3 * np.eye(300)
        formula = np.linalg.solve(G, kq[..., None])[..., 0]
        np.testing.assert_allclose(vals_dense, formula, rtol=1e-7, atol=1e-10 * np.abs(formula).max())
        np.testing.assert_allclose(vals, formula, rtol=1e-7, atol=1e-9 * np.abs(formula).max())
