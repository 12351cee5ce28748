"""Sparse conditional embeddings: the lasso-like problem solved by monotone FISTA."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Lasso

import kbfilter as kb
from kbfilter.persistence import load, save
from kbfilter.rules.sparse_embedding import largest_useful_penalty, sparse_coefficients


def _problem(n=6, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 2))
    B = np.sin(A) + 0.1 * rng.normal(size=(n, 2))
    K = kb.GaussianKernel(1.0)(A)
    L = kb.GaussianKernel(1.0)(B)
    W = np.linalg.inv(K + n * 0.05 * np.eye(n))
    return K, L, W


def _objective(M, K, L, W, penalty):
    D = M - W
    return np.trace(D.T @ K @ D @ L) + penalty * np.abs(M).sum()


def test_fista_agrees_with_a_lasso_on_the_vectorised_problem():
    # tr(D^T K D L) = vec(D)^T (L kron K) vec(D) = ||C vec(D)||^2 with C^T C = L kron K: a lasso in n^2 unknowns
    K, L, W = _problem()
    n = K.shape[0]
    gamma = 0.05
    penalty = gamma * largest_useful_penalty(K, L, W)
    M = sparse_coefficients(K, L, W, gamma, max_iter=100_000, tol=1e-14).coef.toarray()
    H = np.kron(L, K)
    evals, evecs = np.linalg.eigh(H)
    C = (evecs * np.sqrt(np.maximum(evals, 0))) @ evecs.T
    y = C @ W.ravel(order="F")
    lasso = Lasso(alpha=penalty / (2 * n * n), fit_intercept=False, tol=1e-12, max_iter=1_000_000).fit(C, y)
    reference = lasso.coef_.reshape((n, n), order="F")
    assert _objective(M, K, L, W, penalty) == pytest.approx(_objective(reference, K, L, W, penalty), rel=1e-6)
    np.testing.assert_allclose(M, reference, atol=2e-3)


def test_objective_never_increases_and_the_penalty_sets_sparsity():
    K, L, W = _problem(n=30, seed=1)
    nnz = []
    for gamma in (1e-3, 1e-2, 1e-1, 0.5):
        sol = sparse_coefficients(K, L, W, gamma, max_iter=3000)
        assert np.all(np.diff(sol.objectives) <= 1e-12 * abs(sol.objectives[0]))
        assert sol.objectives[-1] < sol.objectives[0]
        nnz.append(sol.coef.nnz)
    assert nnz == sorted(nnz, reverse=True) and nnz[0] > nnz[-1]
    np.testing.assert_array_equal(sparse_coefficients(K, L, W, 0.0).coef.toarray(), W)
    assert sparse_coefficients(K, L, W, 1.0).coef.nnz == 0


def test_sparse_method_answers_with_its_coefficients_and_approaches_exact_as_gamma_falls():
    rng = np.random.default_rng(0)
    A = rng.uniform(-2, 2, size=(120, 1))
    B = np.sin(A) + 0.05 * rng.normal(size=(120, 1))
    Q = np.linspace(-1.5, 1.5, 7)[:, None]
    exact = kb.ConditionalEmbedding(reg=1e-2).fit(A, B)
    errors = []
    for gamma in (1e-1, 1e-2, 1e-3):
        cme = kb.ConditionalEmbedding(reg=1e-2, method="sparse", gamma=gamma, max_iter=20000).fit(A, B)
        np.testing.assert_allclose(cme.weights(Q), cme.coef_.T @ cme.kernel_in_(A, Q), atol=1e-12)
        errors.append(np.abs(cme.predict_mean(Q) - exact.predict_mean(Q)).max())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.02
    # another method learns no coefficients: said so, where the getter named an internal class
    with pytest.raises(AttributeError, match=r"^coef_: only a fit with method='sparse' learns it"):
        exact.coef_
    with pytest.raises(NotFittedError):
        kb.ConditionalEmbedding(method="sparse").n_iter_


def test_sparse_transition_in_the_filter_and_saved(tmp_path):
    states, obs = kb.systems.Rotation().simulate(200, rng=0)
    test_states, test_obs = kb.systems.Rotation().simulate(30, rng=1)
    template = kb.ConditionalEmbedding(method="sparse", gamma=1e-3, max_iter=500)
    with pytest.warns(Warning):  # 500 iterations are not enough to settle; the filter still runs
        kbf = kb.KernelBayesFilter(transition=template, reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    assert kbf.diagnostics["transition_max_iter"] == 1
    assert template.get_params()["kernel_in"] is None  # the template is cloned, not changed
    assert kbf.transition_.coef_.nnz < 199 * 199
    save(kbf, tmp_path / "f.npz")
    loaded = load(tmp_path / "f.npz")
    means = kbf.batch_filter(test_obs)[0]
    assert np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.1
    np.testing.assert_allclose(loaded.batch_filter(test_obs)[0], means)
    Q = test_states[:5]
    np.testing.assert_allclose(loaded.transition_.weights(Q), kbf.transition_.weights(Q))


@pytest.mark.parametrize("gamma", [-0.1, float("nan"), "big"])
def test_sparse_gamma_errors(gamma):
    A = np.random.default_rng(0).normal(size=(20, 1))
    with pytest.raises(ValueError, match="gamma: expected a non-negative (finite )?number"):
        kb.ConditionalEmbedding(method="sparse", gamma=gamma).fit(A, A)


def test_a_problem_that_is_not_one_is_refused_rather_than_solved_by_zero():
    # a NaN or an indefinite Gram matrix made the Lipschitz constant NaN or negative, and the solver
    # returned M = 0 as if the penalty had removed everything
    K = np.array([[1.0, 0.5], [0.5, 1.0]])
    W = np.linalg.inv(K + 0.2 * np.eye(2))
    for gram_in, match in ((np.full((2, 2), np.nan), "gram_in: contains NaN"),
                           (-K, "gram_in: expected a symmetric positive semi-definite Gram matrix; its smallest "
                                "eigenvalue is -1.5"),
                           (np.array([[1.0, 0.9], [0.0, 1.0]]), "differs from its transpose by 0.9")):
        with pytest.raises(ValueError, match=match):
            sparse_coefficients(gram_in, K, W, 0.5)
    with pytest.raises(ValueError, match="dense: contains NaN"):
        largest_useful_penalty(K, K, np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match=r"expected three \(n, n\) arrays, got shapes \(2, 2\), \(3, 3\), \(2, 2\)"):
        largest_useful_penalty(K, np.eye(3), W)
    # a zero Gram matrix is one: the smooth part is constant and M = 0 is the answer
    assert sparse_coefficients(np.zeros((2, 2)), K, W, 0.5).coef.nnz == 0
