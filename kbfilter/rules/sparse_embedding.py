"""Sparse conditional embeddings (Grünewälder et al. (2012) §5).

The conditional embedding learned from pairs ``(a_i, b_i)`` is
``mu(a) = sum_ij W_ij k_a(a_i, a) k_b(b_j, .)`` with ``W = (K + n eps I)^{-1}``: every training
pair takes part in every query. A sparse ``M`` close to ``W`` in the norm of the product RKHS
answers the same queries with few parameters and, when whole rows of ``M`` vanish, with fewer
kernel evaluations. It solves the lasso-like problem

    min_M  tr((M - W)^T K (M - W) L) + g sum_ij abs(M_ij)

(``K``, ``L``: input and output Gram matrices) by monotone FISTA (Beck and Teboulle 2009): a
proximal gradient step (soft thresholding) with Nesterov momentum, in which an iterate that would
raise the objective is not taken, so the objective never increases.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .._validation import COVARIANCE_RTOL, check_int, check_matrix, check_positive
from .._warnings import warn_user

__all__ = ["SparseSolution", "sparse_coefficients", "largest_useful_penalty"]


class SparseSolution(NamedTuple):
    """What :func:`sparse_coefficients` returns.

    Attributes
    ----------
    coef : scipy.sparse.csr_matrix of shape (n, n)
        ``M``.
    objectives : ndarray
        The objective after each iteration (the first entry is the starting point's).
    n_iter : int
        Iterations run.
    converged : bool
        Whether the stopping rule was met before ``max_iter``.
    """

    coef: sp.csr_matrix
    objectives: np.ndarray
    n_iter: int
    converged: bool


def largest_useful_penalty(gram_in, gram_out, dense):
    """The smallest penalty ``g`` at which ``M = 0`` solves the sparse problem, ``2 max abs(K W L)``.

    Parameters
    ----------
    gram_in, gram_out : ndarray of shape (n, n)
        ``K`` and ``L``.
    dense : ndarray of shape (n, n)
        ``W``.

    Returns
    -------
    float
        ``g_max``: the gradient of the smooth part at ``M = 0`` is ``-2 K W L``.
    """
    K, L, W = _checked_problem(gram_in, gram_out, dense)
    return _largest_penalty(K @ W @ L)


def _checked_problem(gram_in, gram_out, dense):
    """``K, L, W``: three finite (n, n) arrays, n >= 1."""
    K, L, W = (check_matrix(a, name, allow_1d=False)
               for a, name in ((gram_in, "gram_in"), (gram_out, "gram_out"), (dense, "dense")))
    n = K.shape[0]
    if not (K.shape == L.shape == W.shape == (n, n)):
        raise ValueError(f"gram_in, gram_out, dense: expected three (n, n) arrays, got shapes "
                         f"{K.shape}, {L.shape}, {W.shape}")
    return K, L, W


def _largest_eigenvalue(G, name):
    """The largest eigenvalue of a Gram matrix, which must be symmetric and positive semi-definite
    (within ``COVARIANCE_RTOL`` of its largest entry): the step size and the convexity rest on it."""
    tol = COVARIANCE_RTOL * max(1.0, float(np.max(np.abs(G))))
    eigenvalues = np.linalg.eigvalsh(G)
    if np.max(np.abs(G - G.T)) > tol or eigenvalues[0] < -tol:
        raise ValueError(f"{name}: expected a symmetric positive semi-definite Gram matrix; its smallest eigenvalue "
                         f"is {eigenvalues[0]:.3g} and it differs from its transpose by {np.max(np.abs(G - G.T)):.3g}")
    return float(eigenvalues[-1])


def _largest_penalty(KWL):
    return 2.0 * float(np.max(np.abs(KWL)))


def sparse_coefficients(gram_in, gram_out, dense, gamma, max_iter=5000, tol=1e-7):
    """Solve ``min_M tr((M - W)^T K (M - W) L) + gamma g_max sum_ij abs(M_ij)`` by monotone FISTA.

    Parameters
    ----------
    gram_in, gram_out : ndarray of shape (n, n)
        ``K`` (inputs) and ``L`` (outputs), symmetric positive semi-definite.
    dense : ndarray of shape (n, n)
        ``W``, the dense coefficients.
    gamma : float
        The penalty as a fraction of :func:`largest_useful_penalty`, in ``[0, 1]``: 0 returns
        ``W`` itself, 1 (or more) returns 0; in between, larger is sparser.
    max_iter : int, default=5000
        The most iterations; a :class:`~sklearn.exceptions.ConvergenceWarning` says when they
        ran out.
    tol : float, default=1e-7
        Stop when an iteration lowers the objective by less than ``tol`` times its value.

    Returns
    -------
    SparseSolution
        ``M`` and the objective path.

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> W = np.linalg.inv(K + 0.2 * np.eye(2))
    >>> sparse_coefficients(K, K, W, 0.0).coef.toarray().round(3).tolist() == W.round(3).tolist()
    True
    >>> sparse_coefficients(K, K, W, 1.0).coef.nnz
    0
    """
    K, L, W = _checked_problem(gram_in, gram_out, dense)
    n = K.shape[0]
    gamma = check_positive(gamma, "gamma", allow_zero=True)
    max_iter = check_int(max_iter, "max_iter")
    tol = check_positive(tol, "tol")
    # the gradient 2 K (M - W) L is Lipschitz with constant 2 ||K|| ||L|| (spectral norms)
    lipschitz = 2.0 * _largest_eigenvalue(K, "gram_in") * _largest_eigenvalue(L, "gram_out")
    KWL = K @ W @ L
    penalty = gamma * _largest_penalty(KWL)
    if gamma == 0.0:
        return SparseSolution(sp.csr_matrix(W), np.array([0.0]), 0, True)
    if not lipschitz > 0:  # K or L is zero: the smooth part is constant and M = 0 is optimal
        return SparseSolution(sp.csr_matrix((n, n)), np.array([0.0]), 0, True)
    step, threshold = 1.0 / lipschitz, penalty / lipschitz
    constant = float(np.sum(W * KWL))  # tr(W^T K W L)

    def product(M):
        """``K M L``, touching only the rows of ``M`` that are not zero."""
        rows = np.flatnonzero(np.any(M != 0.0, axis=1))
        return K[:, rows] @ (M[rows] @ L) if 2 * rows.size < n else K @ M @ L

    def objective(M, KML):
        return float(np.sum(M * KML) - 2.0 * np.sum(M * KWL)) + constant + penalty * float(np.sum(np.abs(M)))

    # from 0, as Grünewälder et al. do: the first steps build M along the leading eigenvectors of
    # K and L, which carry the embedding, whereas from W every entry must be shrunk step by step.
    # Each iterate x, extrapolated point y and candidate z carries its product K . L: the
    # candidate's is the one computed an iteration, the others are linear combinations of it.
    x = y = np.zeros_like(W)
    Kx = Ky = np.zeros_like(W)
    value = constant
    t = 1.0
    path = [value]
    converged = False
    for it in range(1, max_iter + 1):
        v = y - (2.0 * step) * (Ky - KWL)
        z = np.sign(v) * np.maximum(np.abs(v) - threshold, 0.0)
        Kz = product(z)
        z_value = objective(z, Kz)
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        # monotone FISTA: a candidate that would raise the objective is not taken
        accepted = z_value <= value
        x_next, Kx_next, next_value = (z, Kz, z_value) if accepted else (x, Kx, value)
        a, b = t / t_next, (t - 1.0) / t_next
        y = x_next + a * (z - x_next) + b * (x_next - x)
        Ky = Kx_next + a * (Kz - Kx_next) + b * (Kx_next - Kx)
        decrease = value - next_value
        x, Kx, value, t = x_next, Kx_next, next_value, t_next
        path.append(value)
        if accepted and decrease <= tol * max(abs(value), np.finfo(float).tiny):
            converged = True
            break
    if not converged:
        warn_user(f"sparse_coefficients: FISTA stopped at max_iter={max_iter} before the objective "
                  f"settled to tol={tol}; raise max_iter", ConvergenceWarning)
    return SparseSolution(sp.csr_matrix(x), np.array(path), it, converged)
