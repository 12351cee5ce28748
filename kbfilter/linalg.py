"""Regularised solves, the Woodbury identity and pivoted Cholesky (ALGORITHMS §3, §8).

Every symmetric positive definite system in the library goes through :func:`spd_factor`:
Cholesky first; on failure a stated jitter ladder (``1e-10, 1e-8, ..., 1e-2`` times the mean
diagonal) with a :class:`NumericalWarning`; if even that fails, an LU factorisation with a
warning. The factor records which rule was used, so callers can report it.
"""

import warnings

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, lu_factor, lu_solve

__all__ = ["NumericalWarning", "SPDFactor", "spd_factor", "solve_spd", "Woodbury", "pivoted_cholesky"]

JITTER_LADDER = (1e-10, 1e-8, 1e-6, 1e-4, 1e-2)


class NumericalWarning(RuntimeWarning):
    """Numerical trouble was detected and handled by a stated fallback rule."""


class SPDFactor:
    """A factorisation of a (nearly) symmetric positive definite matrix.

    Attributes
    ----------
    method : {"cholesky", "lu"}
        How the matrix was factored.
    jitter : float
        What was added to the diagonal before factoring (0 when Cholesky succeeded at once).
    """

    def __init__(self, A, name="matrix", warn=True):
        A = np.asarray(A, dtype=np.float64)
        A = 0.5 * (A + A.T)
        self.jitter = 0.0
        self.method = "cholesky"
        try:
            self._factor = cho_factor(A, lower=True, check_finite=True)
            return
        except LinAlgError:
            pass
        if not np.all(np.isfinite(A)):
            raise FloatingPointError(f"{name}: contains NaN or infinite values; cannot factor")
        base = max(float(np.mean(np.abs(np.diag(A)))), np.finfo(float).tiny)
        for rel in JITTER_LADDER:
            try:
                self._factor = cho_factor(A + rel * base * np.eye(A.shape[0]), lower=True)
            except LinAlgError:
                continue
            self.jitter = rel * base
            if warn:
                warnings.warn(self.describe(name), NumericalWarning, stacklevel=3)
            return
        self.method = "lu"
        self._factor = lu_factor(A)
        if warn:
            warnings.warn(self.describe(name), NumericalWarning, stacklevel=3)

    @property
    def event(self):
        """``None``, ``"jitter"`` or ``"lu"``: which fallback rule was used."""
        return "lu" if self.method == "lu" else ("jitter" if self.jitter > 0 else None)

    def describe(self, name):
        if self.method == "lu":
            return f"{name}: Cholesky failed even with jitter; solved by LU factorisation instead"
        return f"{name}: Cholesky failed; added jitter {self.jitter:.3g} to the diagonal"

    def solve(self, B):
        """Solve ``A X = B``."""
        if self.method == "cholesky":
            return cho_solve(self._factor, B, check_finite=False)
        return lu_solve(self._factor, B, check_finite=False)


def spd_factor(A, name="matrix", warn=True):
    """Factor an SPD matrix with the fallback rules of this module; see :class:`SPDFactor`.

    With ``warn=False`` the caller reports :attr:`SPDFactor.event` itself.

    Examples
    --------
    >>> import numpy as np
    >>> f = spd_factor(np.array([[4.0, 2.0], [2.0, 3.0]]))
    >>> f.solve(np.array([6.0, 5.0]))
    array([1., 1.])
    """
    return SPDFactor(A, name=name, warn=warn)


def solve_spd(A, B, name="matrix"):
    """Solve ``A X = B`` for SPD ``A`` (Cholesky, with the stated fallbacks)."""
    return spd_factor(A, name=name).solve(B)


class Woodbury:
    """Solver for ``(L L^T + c I) X = B`` with ``L`` of shape (n, r), in O(n r^2) (ALGORITHMS §3).

    ``(L L^T + c I)^{-1} = (I - L (c I_r + L^T L)^{-1} L^T) / c``.

    Examples
    --------
    >>> import numpy as np
    >>> L = np.array([[1.0], [2.0]])
    >>> b = np.array([1.0, 0.0])
    >>> np.allclose(Woodbury(L, 0.5).solve(b), np.linalg.solve(L @ L.T + 0.5 * np.eye(2), b))
    True
    """

    def __init__(self, L, c):
        self.L = np.asarray(L, dtype=np.float64)
        self.c = float(c)
        if not self.c > 0:
            raise ValueError(f"c: expected a positive number, got {c!r}")
        r = self.L.shape[1]
        self._inner = spd_factor(self.c * np.eye(r) + self.L.T @ self.L, name="Woodbury inner matrix")

    def solve(self, B):
        return (B - self.L @ self._inner.solve(self.L.T @ B)) / self.c


def pivoted_cholesky(diag, column, max_rank, tol=1e-12):
    """Incomplete (pivoted) Cholesky factorisation ``G ~ L L^T`` (Fine & Scheinberg; seed 000 §4.1).

    Greedily picks the pivot with the largest residual diagonal; stops at ``max_rank`` columns
    or when the largest residual falls below ``tol`` times the largest diagonal. O(n r^2) time,
    O(n r) memory, and ``G`` is never formed.

    Parameters
    ----------
    diag : ndarray of shape (n,)
        The diagonal of ``G``.
    column : callable
        ``column(i)`` returns column ``i`` of ``G`` as an array of shape (n,).
    max_rank : int
    tol : float

    Returns
    -------
    L : ndarray of shape (n, r)
    pivots : ndarray of shape (r,)

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> L, piv = pivoted_cholesky(np.diag(G).copy(), lambda i: G[:, i], 2)
    >>> np.allclose(L @ L.T, G)
    True
    """
    residual = np.array(diag, dtype=np.float64)
    n = residual.shape[0]
    max_rank = min(int(max_rank), n)
    L = np.zeros((n, max_rank))
    pivots = []
    threshold = tol * max(float(residual.max()), 0.0)
    for j in range(max_rank):
        i = int(np.argmax(residual))
        pivot = residual[i]
        if pivot <= threshold or pivot <= 0:
            break
        col = np.asarray(column(i), dtype=np.float64) - L[:, :j] @ L[i, :j]
        L[:, j] = col / np.sqrt(pivot)
        residual -= L[:, j] ** 2
        residual[i] = 0.0  # exact by construction; avoid re-picking through round-off
        pivots.append(i)
    r = len(pivots)
    return L[:, :r].copy(), np.asarray(pivots, dtype=np.intp)


def batched_pivoted_cholesky(kernel, X, tol, max_rank):
    """Pivoted Cholesky of a stack of Gram matrices ``G_q = kernel(X[q])``, X of shape (q, m, d).

    Each factor stops growing once its residual trace ``tr(G_q - L_q L_q^T)`` is at most
    ``tol``; all stop at ``max_rank`` columns. Returns ``L`` of shape (q, m, r) (columns beyond a
    factor's own rank are 0) and a mask of the factors that met ``tol``.
    """
    q, m, _ = X.shape
    rows = np.arange(q)
    residual = kernel.paired(X, X)
    L = np.zeros((q, m, max(int(max_rank), 0)))
    done = residual.sum(axis=1) <= tol
    rank = 0
    for j in range(L.shape[2]):
        if done.all():
            break
        piv = residual.argmax(axis=1)
        pivot = residual[rows, piv]
        active = ~done & (pivot > 0)
        col = kernel.paired(X, X[rows, piv][:, None, :])
        col -= np.einsum("qmr,qr->qm", L[:, :, :j], L[rows, piv, :j])
        col *= np.where(active, 1.0 / np.sqrt(np.where(active, pivot, 1.0)), 0.0)[:, None]
        L[:, :, j] = col
        residual -= col**2
        residual[rows[active], piv[active]] = 0.0
        rank = j + 1
        done |= np.maximum(residual, 0.0).sum(axis=1) <= tol
    return L[:, :, :rank], done
