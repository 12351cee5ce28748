import warnings

import numpy as np
import pytest
from scipy.linalg import cho_factor, lu_factor
from scipy.sparse.linalg import LinearOperator

from kbfilter.linalg import (NumericalWarning, Woodbury, pivoted_cholesky, ridge_factor, ridge_solve_iterative, solve_spd,
                             spd_factor)
from kbfilter import GaussianKernel


def test_spd_solve_matches_dense_solve():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(30, 30))
    A = M @ M.T + np.eye(30)
    B = rng.normal(size=(30, 4))
    np.testing.assert_allclose(A @ solve_spd(A, B), B, atol=1e-9)
    assert spd_factor(A).jitter == 0.0


def test_singular_psd_matrix_gets_stated_jitter_and_warning():
    v = np.arange(1.0, 6.0)
    A = np.outer(v, v)  # rank one: Cholesky fails
    with pytest.warns(NumericalWarning, match="jitter"):
        f = spd_factor(A, name="test matrix")
    assert f.method == "cholesky" and f.jitter > 0
    x = f.solve(v)
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose((A + f.jitter * np.eye(5)) @ x, v, rtol=1e-6)


def test_indefinite_matrix_falls_back_to_lu():
    A = np.array([[1.0, 0.0], [0.0, -1.0]])
    with pytest.warns(NumericalWarning, match="LU"):
        f = spd_factor(A)
    assert f.method == "lu"
    np.testing.assert_allclose(A @ f.solve(np.array([2.0, 3.0])), [2.0, 3.0])


def test_the_factor_is_scipys_and_the_callers_matrix_is_left_alone():
    rng = np.random.default_rng(1)
    M = rng.normal(size=(40, 40))
    # not quite symmetric: the factor is of the symmetric part
    A = M @ M.T + 40 * np.eye(40) + 0.1 * rng.normal(size=(40, 40))
    before = A.copy()
    f = spd_factor(A)
    np.testing.assert_array_equal(A, before)
    expected = cho_factor(0.5 * (A + A.T), lower=True)[0]
    # to round-off: scipy 1.18 reaches LAPACK another way than the factor's direct call, and differs
    # from it by 2e-15 (bit for bit up to scipy 1.17)
    np.testing.assert_allclose(np.tril(f.factor), np.tril(expected), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("last", [0.0, -1.0])
def test_a_cholesky_that_fails_late_leaves_the_fallbacks_the_whole_matrix(last):
    # the factorisation gets through 39 of 40 columns before it fails; the jitter (a zero pivot)
    # and LU (a negative one) rules must see the matrix as it was, not as the failed attempt left it
    rng = np.random.default_rng(2)
    M = rng.normal(size=(40, 39))
    A = M @ M.T
    A[-1, :] = A[:, -1] = 0.0
    A[-1, -1] = last
    with pytest.warns(NumericalWarning):
        f = spd_factor(A)
    if last == 0.0:
        assert f.method == "cholesky" and f.jitter > 0
        expected = cho_factor(A + f.jitter * np.eye(40), lower=True)[0]
        np.testing.assert_array_equal(np.tril(f.factor), np.tril(expected))
    else:
        assert f.method == "lu"
        lu, pivots = lu_factor(A)
        np.testing.assert_array_equal(f.factor, lu)
        np.testing.assert_array_equal(f.pivots, pivots)


def test_woodbury_matches_direct_solve():
    rng = np.random.default_rng(1)
    L = rng.normal(size=(50, 5))
    B = rng.normal(size=(50, 3))
    direct = np.linalg.solve(L @ L.T + 0.3 * np.eye(50), B)
    np.testing.assert_allclose(Woodbury(L, 0.3).solve(B), direct, atol=1e-10)
    with pytest.raises(ValueError, match="c:"):
        Woodbury(L, 0.0)
    with pytest.raises(ValueError, match=r"Woodbury.solve: expected a right-hand side of 50 rows, got shape \(49, 3\)"):
        Woodbury(L, 0.3).solve(B[:49])
    with pytest.raises(ValueError, match=r"G: expected a square matrix, got shape \(50, 5\)"):
        spd_factor(L, name="G")
    with pytest.raises(ValueError, match=r"matrix: expected a square matrix, got shape \(3,\)"):
        spd_factor(np.ones(3))


def test_pivoted_cholesky_exact_at_full_rank_and_improves_with_rank():
    X = np.random.default_rng(2).normal(size=(80, 2))
    k = GaussianKernel(1.0)
    G = k(X)
    errors = []
    for r in (5, 10, 20, 80):
        L, piv = pivoted_cholesky(np.diag(G).copy(), lambda i: G[:, i], r)
        errors.append(np.abs(G - L @ L.T).max())
        assert len(set(piv.tolist())) == len(piv)
    assert errors[-1] < 1e-8
    assert errors[0] > errors[1] > errors[2]
    # a NaN on the diagonal or in a column was carried into the factor, unseen
    with pytest.raises(ValueError, match="diag: contains NaN"):
        pivoted_cholesky(np.r_[np.nan, np.diag(G)[1:]], lambda i: G[:, i], 5)
    with pytest.raises(FloatingPointError, match=r"column: column\(\d+\) contains NaN"):
        pivoted_cholesky(np.diag(G).copy(), lambda i: np.where(np.arange(80) == 3, np.nan, G[:, i]), 5)
    with pytest.raises(ValueError, match=r"column: expected column\(\d+\) of shape \(80,\)"):
        pivoted_cholesky(np.diag(G).copy(), lambda i: G[:-1, i], 5)
    with pytest.raises(ValueError, match="max_rank: expected an integer >= 0"):
        pivoted_cholesky(np.diag(G).copy(), lambda i: G[:, i], -1)
    # no Gram matrix has a negative diagonal: the greedy search returned a factor without columns
    with pytest.raises(ValueError, match=r"diag: expected the diagonal of a positive semi-definite G .* got -1 at "
                                         r"row 0"):
        pivoted_cholesky(-np.diag(G), lambda i: -G[:, i], 5)
    # ... but round-off below zero on an exact factor's residual is not refused
    L, _ = pivoted_cholesky(np.r_[-1e-17, np.diag(G)[1:]], lambda i: G[:, i], 5)
    assert L.shape == (80, 5)
    # a complex column lost its imaginary part with only numpy's warning
    with pytest.raises(ValueError, match="column: expected real values, got an array of dtype complex128"):
        pivoted_cholesky(np.diag(G).copy(), lambda i: G[:, i] + 1j, 5)


def test_a_negative_ridge_is_refused_not_subtracted():
    from kbfilter.linalg import ridge_factor

    G = np.array([[3.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(ridge_factor(G.copy(), 0.0).solve(np.array([5.0, 4.0])), [1.0, 1.0])
    with pytest.raises(ValueError, match="ridge: expected a non-negative"):
        ridge_factor(G.copy(), -0.1)
    for bad in (np.ones(3), np.ones((3, 2))):
        with pytest.raises(ValueError, match="G: expected a square matrix"):
            ridge_factor(bad, 1.0)


def test_a_matrix_built_symmetric_is_factored_without_averaging_to_rounding():
    from kbfilter.linalg import ridge_factor

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    sq = np.sqrt(rng.uniform(0.1, 2.0, size=60))
    G = GaussianKernel(1.0)(X)
    M = sq[:, None] * G * sq[None, :]  # D G D, whose triangles differ by rounding at most
    b = rng.normal(size=60)
    exact = np.linalg.solve(0.5 * (M + M.T) + 1e-3 * np.eye(60), b)
    for symmetrize in (True, False):
        x = ridge_factor(M.copy(), 1e-3, symmetrize=symmetrize).solve(b)
        np.testing.assert_allclose(x, exact, rtol=1e-9, atol=1e-9 * np.abs(exact).max())
    # the fallbacks read the matrix too: a rank-one G needs the jitter, with or without the averaging
    v = np.arange(1.0, 6.0)
    for symmetrize in (True, False):
        with pytest.warns(NumericalWarning, match="jitter"):
            f = ridge_factor(np.outer(v, v), 0.0, symmetrize=symmetrize)
        np.testing.assert_allclose((np.outer(v, v) + f.jitter * np.eye(5)) @ f.solve(v), v, rtol=1e-6)
    # by default a matrix that is not symmetric is averaged with its transpose, as documented
    A = np.array([[3.0, 1.0], [3.0, 2.0]])
    np.testing.assert_allclose(ridge_factor(A.copy(), 0.0).solve(np.array([5.0, 4.0])),
                               np.linalg.solve(0.5 * (A + A.T), [5.0, 4.0]))


def test_a_factor_refuses_a_right_hand_side_of_other_rows_before_lapack_sees_it():
    from kbfilter.linalg import SPDFactor

    factor = spd_factor(np.array([[4.0, 2.0], [2.0, 3.0]]))
    np.testing.assert_allclose(factor.solve(np.array([6.0, 5.0])), [1.0, 1.0])
    for B in (np.ones(3), np.ones((1, 2))):
        with pytest.raises(ValueError, match=r"expected a right-hand side of 2 rows"):
            factor.solve(B)
    with pytest.raises(ValueError, match="factor: expected a square float matrix"):
        SPDFactor("cholesky", np.zeros((0, 0)))
    for B in (np.ones((2, 1, 1)), np.array([1.0, 2.0]) * 1j):  # a complex one would lose its imaginary part
        with pytest.raises(ValueError, match=r"right-hand side of 2 rows \(real, 1-D or 2-D\)"):
            factor.solve(B)


def test_a_singular_matrix_is_an_error_not_an_infinite_solve():
    from scipy.linalg import LinAlgError

    # a zero matrix gives the jitter ladder no scale; a singular indefinite one defeats every rung
    for A in (np.zeros((3, 3)), np.diag([1.0, -1.0, 0.0])):
        with pytest.raises(LinAlgError, match="matrix: singular"):
            spd_factor(A)
    # a zero diagonal alone is not singular: the largest entry scales the ladder, and LU solves it
    A = np.array([[0.0, 2.0], [2.0, 0.0]])
    with pytest.warns(NumericalWarning, match="LU"):
        f = spd_factor(A)
    np.testing.assert_allclose(A @ f.solve(np.array([2.0, 4.0])), [2.0, 4.0])


def test_a_factor_refuses_what_no_factorisation_gives():
    from kbfilter.linalg import SPDFactor

    for method, diagonal in (("cholesky", [1.0, 0.0]), ("cholesky", [1.0, -1.0]), ("cholesky", [1.0, np.nan]),
                             ("lu", [1.0, 0.0])):
        with pytest.raises(ValueError, match=f"factor: expected a .* finite diagonal for method '{method}'"):
            SPDFactor(method, np.diag(diagonal), pivots=np.arange(2))
    for jitter in (-1.0, np.nan):
        with pytest.raises(ValueError, match="jitter: expected a non-negative finite number"):
            SPDFactor("cholesky", np.eye(2), jitter=jitter)
    for c in (0.0, np.inf, "1"):
        with pytest.raises(ValueError, match="c: expected a positive"):
            Woodbury(np.ones((3, 1)), c)


def _gaussian_gram(n, bandwidth, seed=0):
    points = np.random.default_rng(seed).uniform(0.0, 10.0, size=(n, 2))
    return GaussianKernel(bandwidth=bandwidth)(points), np.random.default_rng(seed + 1).normal(size=n)


def test_the_iterative_ridge_solve_is_the_factors_solve_when_the_ridge_is_strong():
    G, b = _gaussian_gram(400, 0.5)
    expected = ridge_factor(G.copy(), 40.0).solve(b)
    x = ridge_solve_iterative(G, 40.0, b, 60)
    np.testing.assert_allclose(x, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_array_equal(G, _gaussian_gram(400, 0.5)[0])  # the matrix is left as it was
    # an operator in place of the matrix gives the same answer
    operator = LinearOperator(G.shape, matvec=lambda v: G @ v, dtype=float)
    np.testing.assert_allclose(ridge_solve_iterative(operator, 40.0, b, 60), x, rtol=0, atol=1e-12 * np.abs(x).max())
    assert np.array_equal(ridge_solve_iterative(G, 40.0, np.zeros(400), 60), np.zeros(400))


def test_the_iterative_ridge_solve_leaves_a_slow_system_to_the_factor():
    # a weak ridge on a wide kernel's Gram matrix: condition number about 1e9
    G, b = _gaussian_gram(400, 3.0)
    assert ridge_solve_iterative(G, 1e-6, b, 60) is None
    # and a budget smaller than the pilot is not started
    assert ridge_solve_iterative(_gaussian_gram(400, 0.5)[0], 40.0, b, 6) is None


def test_the_iterative_ridge_solve_gives_no_answer_where_the_iterations_break_down():
    # G + I = diag(1, -1): the first search direction has p^T A p = 0, and the step is infinite
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and says nothing: the caller's factor takes over
        assert ridge_solve_iterative(np.diag([0.0, -2.0]), 1.0, np.ones(2), 20) is None


def test_the_iterative_ridge_solve_refuses_bad_input_by_name():
    G = np.eye(3)
    for args, name in [((np.ones((3, 2)), 1.0, np.ones(3), 10), "G"), ((G, -1.0, np.ones(3), 10), "ridge"),
                       ((G, 1.0, np.ones(2), 10), "b"), ((G, 1.0, [1.0, np.nan, 1.0], 10), "b"),
                       ((G, 1.0, np.ones(3), 2.5), "max_matvecs")]:
        with pytest.raises(ValueError, match=name):
            ridge_solve_iterative(*args)
