"""Regularised solves, the Woodbury identity and pivoted Cholesky (algorithms §3, §8).

Every regularised system ``G + ridge I`` of the library (a Gram matrix, or the inner product
``F^T F`` of explicit features, in the rules, the conditional embeddings and the transitions) is
factored by :func:`ridge_factor`, and every symmetric positive definite system goes through
:func:`spd_factor`:
Cholesky first; on failure a stated jitter ladder (``1e-10, 1e-8, ..., 1e-2`` times the mean
diagonal) with a :class:`NumericalWarning`; if even that fails, an LU factorisation with a
warning, and a ``LinAlgError`` when LU finds the matrix singular (a solve would be infinite).
The factor records which rule was used, so callers can report it.
"""


import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, LinAlgWarning, cho_factor, lu_factor
from scipy.linalg.lapack import dgetrs as getrs, dpotrf as potrf, dpotrs as potrs
from scipy.sparse.linalg import LinearOperator, cg

from ._validation import (check_array, check_indices, check_int, check_matrix, check_memory, check_positive,
                          check_real_output, check_square, check_vector)
from ._warnings import ignored, warn_user
from .persistence import persistent
from .progress import progress_bar

__all__ = ["NumericalWarning", "SPDFactor", "spd_factor", "ridge_factor", "ridge_solve_iterative", "solve_spd",
           "psd_solve", "Woodbury",
           "check_order", "pivoted_cholesky", "batched_pivoted_cholesky", "column_entries"]

JITTER_LADDER = (1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
#: :func:`ridge_solve_iterative` stops at a residual this small relative to the right-hand side
CG_RTOL = 1e-12
#: ... and after this many iterations extrapolates the rate at which its residual falls
CG_PILOT = 6


class NumericalWarning(RuntimeWarning):
    """Numerical trouble was detected and handled by a stated fallback rule."""


@persistent("method", "factor", "pivots", "jitter")
class SPDFactor:
    """A factorisation of a (nearly) symmetric positive definite matrix; made by :func:`spd_factor`.

    Parameters
    ----------
    method : {"cholesky", "lu"}
        How the matrix was factored.
    factor : ndarray
        The lower Cholesky factor, or the packed LU factors.
    pivots : ndarray or None
        The LU pivots (None for Cholesky).
    jitter : float
        What was added to the diagonal before factoring (0 when Cholesky succeeded at once).
    """

    def __init__(self, method, factor, pivots=None, jitter=0.0):
        if method not in ("cholesky", "lu"):
            raise ValueError(f"method: expected 'cholesky' or 'lu', got {method!r}")
        factor = np.asarray(factor)
        if factor.ndim != 2 or factor.shape[0] != factor.shape[1] or factor.shape[0] == 0 or factor.dtype.kind != "f":
            raise ValueError(f"factor: expected a square float matrix, got shape {factor.shape} of {factor.dtype}")
        n = factor.shape[0]
        # what the factorisations always give: a solve with anything else is infinite or NaN
        pivot = np.diagonal(factor)
        if not (np.all(pivot > 0) if method == "cholesky" else np.all(pivot != 0)) or not np.all(np.isfinite(pivot)):
            raise ValueError(f"factor: expected a {'positive' if method == 'cholesky' else 'non-zero'} finite "
                             f"diagonal for method {method!r}")
        if method == "lu":
            # LAPACK's getrs trusts its pivots: out of range, they are a crash, not an error
            pivots = check_indices(pivots, "pivots", n, length=n)
        self.method = method
        self.factor = factor
        self.pivots = pivots
        self.jitter = check_positive(jitter, "jitter", allow_zero=True)

    def _after_load(self):
        # a saved file is untrusted and a factor may be loaded on its own: the constructor checked
        # the diagonal, and LAPACK's solve reads the rest (the factorisations leave the matrix's own
        # finite entries in the triangle they do not use); checked in blocks of rows, as the factor
        # of an exact filter is gigabytes
        for start in range(0, self.order, 1024):
            if not np.all(np.isfinite(self.factor[start : start + 1024])):
                raise ValueError("factor: expected finite values")
        # finite entries can still overflow in the substitutions
        if not np.all(np.isfinite(self.solve(np.ones(self.order)))):
            raise ValueError("factor: the loaded factor does not solve (its solve of a vector of ones is not finite)")

    @property
    def order(self):
        """The order ``n`` of the matrix it solves with: the rows a right-hand side must have."""
        return self.factor.shape[0]

    @property
    def event(self):
        """``None``, ``"jitter"`` or ``"lu"``: which fallback rule was used."""
        return "lu" if self.method == "lu" else ("jitter" if self.jitter > 0 else None)

    def describe(self, name):
        """A sentence saying which fallback was used.

        Parameters
        ----------
        name : str
            What the sentence calls the matrix.

        Returns
        -------
        str
            The sentence.
        """
        if self.method == "lu":
            return f"{name}: Cholesky failed even with jitter; solved by LU factorisation instead"
        return f"{name}: Cholesky failed; added jitter {self.jitter:.3g} to the diagonal"

    def solve(self, B):
        """Solve ``A X = B``.

        Parameters
        ----------
        B : ndarray of shape (n,) or (n, k)
            The right-hand side.

        Returns
        -------
        ndarray
            ``X``, of the shape of ``B``.
        """
        # LAPACK's potrs/getrs directly: what cho_solve/lu_solve call, without their per-call
        # checks, which cost more than the solve itself on the small systems of a filtering step;
        # the checks kept are of the shape (LAPACK would report it itself, on stderr) and the dtype
        # (the wrapper would drop an imaginary part)
        if np.ndim(B) not in (1, 2) or np.shape(B)[0] != self.factor.shape[0] or np.iscomplexobj(B):
            raise ValueError(f"SPDFactor.solve: expected a right-hand side of {self.factor.shape[0]} rows (real, 1-D "
                             f"or 2-D), got shape {np.shape(B)} of {np.asarray(B).dtype}")
        if self.method == "cholesky":
            X, info = potrs(self.factor, B, lower=1)
        else:
            X, info = getrs(self.factor, self.pivots, B)
        if info != 0:
            raise ValueError(f"SPDFactor.solve: LAPACK reported error {info} (bad argument shapes)")
        return X


def spd_factor(A, name="matrix", warn=True):
    """Factor an SPD matrix with the fallback rules of this module.

    Cholesky first; on failure the jitter ladder, then LU (see the module docstring). With
    ``warn=False`` the caller reports :attr:`SPDFactor.event` itself.

    Parameters
    ----------
    A : ndarray of shape (n, n)
        The matrix; it is symmetrised first.
    name : str
        How messages call the matrix.
    warn : bool
        Warn with a :class:`NumericalWarning` when a fallback is used.

    Returns
    -------
    SPDFactor
        The factorisation, with the fallback it needed (``method``, ``jitter``).

    Examples
    --------
    >>> import numpy as np
    >>> f = spd_factor(np.array([[4.0, 2.0], [2.0, 3.0]]))
    >>> f.solve(np.array([6.0, 5.0]))
    array([1., 1.])
    """
    A = check_square(A, name)
    return _factor_symmetric(0.5 * (A + A.T), name, warn)


def _factor_symmetric(A, name, warn):
    """:func:`spd_factor` of an exactly symmetric array that may be overwritten."""
    if not np.all(np.isfinite(A)):
        raise FloatingPointError(f"{name}: contains NaN or infinite values; cannot factor")
    # LAPACK's potrf directly: what cho_factor calls, without its per-call overhead. A.T is the same
    # matrix in Fortran order, which potrf factors in place without another copy (in a filter step
    # at T = 1,000, copying T x T arrays had taken as long as factoring them); it overwrites A's
    # upper triangle and diagonal only, which the fallbacks below restore
    diagonal = A.diagonal().copy()
    factor, info = potrf(A.T, lower=1, clean=0, overwrite_a=1)
    if info == 0:
        return SPDFactor("cholesky", factor)
    A = np.tril(A, -1)
    A += A.T
    A[np.diag_indices(A.shape[0])] = diagonal
    # the ladder's scale; a zero diagonal has none, so the largest entry gives it (all zero: no jitter
    # can make a zero matrix's solve mean anything, and LU below says it is singular)
    base = float(np.mean(np.abs(np.diag(A)))) or float(np.max(np.abs(A)))
    for rel in JITTER_LADDER if base > 0 else ():
        try:
            factor = SPDFactor("cholesky", cho_factor(A + rel * base * np.eye(A.shape[0]), lower=True)[0],
                               jitter=rel * base)
        except LinAlgError:
            continue
        break
    else:
        with ignored(LinAlgWarning):  # scipy's warning of a zero pivot; raised below
            lu, pivots = lu_factor(A, check_finite=False)
        if not np.all(np.diag(lu)):
            raise LinAlgError(f"{name}: singular (Cholesky failed and LU found a zero pivot); cannot factor")
        factor = SPDFactor("lu", lu, pivots)
    if warn:
        warn_user(factor.describe(name), NumericalWarning)
    return factor


def ridge_factor(G, ridge, name="matrix", warn=True, symmetrize=True):
    """The factor of ``G + ridge I``: the regularised solve of every kernel method here, whether
    ``G`` is a Gram matrix or the inner product ``F^T F`` of explicit features.

    Parameters
    ----------
    G : ndarray of shape (n, n)
        The symmetric matrix; overwritten (build it for this call).
    ridge : float
        What is added to the diagonal (0 or more).
    name : str
        How messages call the matrix.
    warn : bool
        As for :func:`spd_factor`.
    symmetrize : bool, default=True
        Factor ``(G + G^T) / 2``. False factors ``G`` as given, for a ``G`` built symmetric (a Gram
        matrix, ``F^T F``, ``D G D`` for a diagonal ``D``): the Cholesky reads one triangle and a
        fallback the other, so triangles that differ by rounding give the factor to rounding, and
        the averaging, a transposed pass over ``n^2`` entries, is skipped (in an exact filter step at
        ``T = 1,000`` it took about a fifth of the time).

    Returns
    -------
    SPDFactor
        The factorisation, with the fallback it needed.

    Examples
    --------
    >>> import numpy as np
    >>> ridge_factor(np.array([[3.0, 2.0], [2.0, 2.0]]), 1.0).solve(np.array([6.0, 5.0]))
    array([1., 1.])
    """
    G = np.asarray(G, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:  # a shape check alone: this runs inside every filter step
        raise ValueError(f"G: expected a square matrix, got shape {G.shape}")
    # a negative ridge would be subtracted from the diagonal: another matrix, perhaps indefinite
    G[np.diag_indices(G.shape[0])] += check_positive(ridge, "ridge", allow_zero=True)
    if symmetrize:
        G += G.T  # in place, as spd_factor would into a new array (numpy buffers the transpose)
        G *= 0.5
    return _factor_symmetric(G, name, warn)


def ridge_solve_iterative(G, ridge, b, max_matvecs):
    """``(G + ridge I)^{-1} b`` by conjugate gradients, or None when they would not converge within
    ``max_matvecs`` products with ``G``: the caller then factors (:func:`ridge_factor`).

    A well-conditioned system (a strong ridge) converges in a few products, each ``O(n^2)``,
    where a factorisation costs ``O(n^3)``. The rule: after ``CG_PILOT`` iterations the rate at
    which the residual has fallen is extrapolated to ``CG_RTOL``; if that would take more than
    ``max_matvecs`` products, or the iterations do not get there within them, or the residual
    recomputed from the answer is not below ``10 CG_RTOL ||b||``, the answer is None (and at most
    ``max_matvecs + 1`` products were spent).

    Parameters
    ----------
    G : ndarray of shape (n, n) or LinearOperator
        Symmetric positive semi-definite; not modified (an operator: only its ``matvec`` is called).
    ridge : float
        Added to the diagonal (0 or more).
    b : ndarray of shape (n,)
        The right-hand side (finite).
    max_matvecs : int
        The products with ``G`` worth spending (about what a factorisation of ``G`` costs).

    Returns
    -------
    ndarray of shape (n,) or None
        The solution, to a relative residual of about ``CG_RTOL``.

    Examples
    --------
    >>> import numpy as np
    >>> x = ridge_solve_iterative(np.array([[3.0, 2.0], [2.0, 2.0]]), 1.0, np.array([6.0, 5.0]), 10)
    >>> np.allclose(x, [1.0, 1.0])
    True
    """
    n = G.shape[0]
    if len(G.shape) != 2 or G.shape[1] != n:  # shapes and scalars alone: this runs inside filter steps
        raise ValueError(f"G: expected a square matrix or operator, got shape {G.shape}")
    b = check_vector(b, "b", length=n)
    ridge = check_positive(ridge, "ridge", allow_zero=True)
    max_matvecs = check_int(max_matvecs, "max_matvecs", minimum=0)
    norm = float(np.linalg.norm(b))
    if norm == 0.0:
        return np.zeros(n)
    if max_matvecs <= CG_PILOT:
        return None
    product = G.matvec if isinstance(G, LinearOperator) else G.dot
    A = LinearOperator((n, n), matvec=lambda v: product(v) + ridge * v, dtype=np.float64)
    iterations = []

    def pilot(x):
        # one run of the iterations (a restart would lose what they have learnt of the spectrum),
        # left once, at the pilot, if its rate says the factor would be cheaper
        iterations.append(None)
        if len(iterations) == CG_PILOT:
            fallen = float(np.linalg.norm(b - A.matvec(x))) / norm
            if not 0.0 < fallen < 1.0 or CG_PILOT * np.log(CG_RTOL) / np.log(fallen) + 1 > max_matvecs:
                raise _SlowConvergence

    # a breakdown (a matrix not positive definite to working precision) makes an infinite step: it
    # is caught below, by the status or the residual, and the factor takes over, so it is not warned of
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            x, status = cg(A, b, rtol=CG_RTOL, atol=0.0, maxiter=max_matvecs - 1, callback=pilot)
        except _SlowConvergence:
            return None
        # status > 0: not converged within the budget. And the iterations' residual is a recurrence
        # that can drift from the true one: the answer's is checked
        if status != 0 or not np.linalg.norm(b - A.matvec(x)) <= 10.0 * CG_RTOL * norm:
            return None
    return x


class _SlowConvergence(Exception):
    """Conjugate gradients would cost more than the factor."""


def solve_spd(A, B, name="matrix"):
    """Solve ``A X = B`` for SPD ``A`` (Cholesky, with the stated fallbacks)."""
    return spd_factor(A, name=name).solve(B)


def psd_solve(A, B):
    """``A^{-1} B`` for a positive semi-definite ``A``, or ``A^+ B`` when ``A`` is singular.

    The Gaussian updates solve with a covariance: the innovation covariance ``S`` in a Kalman gain
    ``P H^T S^{-1}``, the predicted covariance in a smoother's gain. Either is singular when a
    component is both certain in the belief and observed (or moved) without noise. Conditioning a
    Gaussian with a singular covariance is still exact with its pseudo-inverse (the observation then
    lies in the range of ``S``, which is all the update reads), so that is the rule here; the caller
    reports it.

    Parameters
    ----------
    A : ndarray of shape (n, n)
        The symmetric positive semi-definite matrix.
    B : ndarray of shape (n,) or (n, k)
        The right-hand side.

    Returns
    -------
    X : ndarray of the shape of ``B``
        ``A^{-1} B`` (LAPACK's LU solve), or the minimum-norm ``A^+ B`` when LU finds ``A`` singular.
    singular : bool
        Whether the pseudo-inverse was used.

    Examples
    --------
    >>> import numpy as np
    >>> psd_solve(np.array([[2.0, 0.0], [0.0, 0.0]]), np.array([4.0, 0.0]))
    (array([2., 0.]), True)
    """
    try:
        return np.linalg.solve(A, B), False
    except LinAlgError:
        return np.linalg.pinv(A, hermitian=True) @ B, True


@persistent("L", "c")
class Woodbury:
    """Solver for ``(L L^T + c I) X = B`` with ``L`` of shape (n, r), in O(n r^2) (algorithms §3).

    ``(L L^T + c I)^{-1} = (I - L (c I_r + L^T L)^{-1} L^T) / c``.

    Examples
    --------
    >>> import numpy as np
    >>> L = np.array([[1.0], [2.0]])
    >>> b = np.array([1.0, 0.0])
    >>> np.allclose(Woodbury(L, 0.5).solve(b), np.linalg.solve(L @ L.T + 0.5 * np.eye(2), b))
    True
    """

    #: the most columns of a factor with more columns than rows (the inner matrix is r x r)
    MAX_WIDE_RANK = 16384

    def __init__(self, L, c):
        self.L = check_matrix(L, "L", allow_1d=False)
        self.c = check_positive(c, "c")
        n, r = self.L.shape
        if r > max(n, self.MAX_WIDE_RANK):
            raise ValueError(f"L: expected at most {self.MAX_WIDE_RANK} columns when it has more columns than rows, "
                             f"got shape {self.L.shape}")
        #: the factor of ``c I_r + L^T L``
        self.inner = ridge_factor(self.L.T @ self.L, self.c, "Woodbury inner matrix")

    @property
    def order(self):
        """The order ``n`` of the matrix it solves with: the rows a right-hand side must have."""
        return self.L.shape[0]

    def solve(self, B):
        """Solve ``(L L^T + c I) X = B`` for ``B`` of shape (n,) or (n, k)."""
        B = np.asarray(B, dtype=np.float64)
        if B.ndim not in (1, 2) or B.shape[0] != self.L.shape[0]:
            raise ValueError(f"Woodbury.solve: expected a right-hand side of {self.L.shape[0]} rows, got shape "
                             f"{B.shape}")
        return (B - self.L @ self.inner.solve(self.L.T @ B)) / self.c


#: :func:`pivoted_cholesky` checks the machine's memory each time its factor grows by this many columns
MEMORY_CHECK_COLUMNS = 64


def check_order(factor, n, name, what):
    """Refuse a factor (:class:`SPDFactor` or :class:`Woodbury`) read from a file that does not solve
    with a matrix of order ``n``, naming it ``name``; ``what`` says what its rows stand for.

    Parameters
    ----------
    factor : SPDFactor or Woodbury
        The factor.
    n : int
        The order expected.
    name : str
        What the message calls the factor.
    what : str
        What the expected order is, e.g. ``"one row per training state"``.
    """
    if factor.order != n:
        raise ValueError(f"{name}: solves with a matrix of order {factor.order}, expected {what} ({n})")


def pivoted_cholesky(diag, column, max_rank, tol=1e-12, trace_tol=None, name="max_rank"):
    """Incomplete (pivoted) Cholesky factorisation ``G ~ L L^T`` (Fine & Scheinberg; the localized CKME paper §4.1).

    Greedily picks the pivot with the largest residual diagonal; stops at ``max_rank`` columns,
    when the largest residual falls below ``tol`` times the largest diagonal, or, once it has a
    column, when the residual trace ``tr(G - L L^T)`` is at most ``trace_tol``. O(n r^2) time,
    O(n r) memory, and ``G`` is never formed.

    Parameters
    ----------
    diag : ndarray of shape (n,)
        The diagonal of ``G`` (finite).
    column : callable
        ``column(i)`` returns column ``i`` of ``G`` as an array of shape (n,) (a non-finite entry
        is a ``FloatingPointError``).
    max_rank : int
        The most columns (0 or more).
    tol : float, default=1e-12
        Stop when the largest residual diagonal is below ``tol`` times the largest diagonal.
    trace_tol : float or None, default=None
        Stop when the residual trace is at most this (checked from the second column on: only a
        ``G`` that is 0 gives a factor without columns).
    name : str, default="max_rank"
        The caller's name for ``max_rank``, for the message when the factor outgrows the
        machine's memory (checked every ``MEMORY_CHECK_COLUMNS`` columns, for the factor and the
        copy it is returned as: only the columns reached are ever paged in).

    Returns
    -------
    L : ndarray of shape (n, r)
        The factor.
    pivots : ndarray of shape (r,)
        The rows picked, in order.

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> L, piv = pivoted_cholesky(np.diag(G).copy(), lambda i: G[:, i], 2)
    >>> np.allclose(L @ L.T, G)
    True
    """
    residual = check_vector(diag, "diag").copy()
    n = residual.shape[0]
    if n and residual.min() < -1e-8 * max(float(np.abs(residual).max()), np.finfo(float).tiny):
        # a Gram matrix's diagonal is not negative: this G has no Cholesky factor, and the greedy
        # search, which takes the largest residual first, would return one without columns
        raise ValueError(f"diag: expected the diagonal of a positive semi-definite G (no negative entry beyond "
                         f"round-off), got {residual.min():g} at row {int(np.argmin(residual))}")
    max_rank = min(check_int(max_rank, "max_rank", minimum=0), n)
    # the factor grows a block of columns at a time (column-major, so a block's first columns are
    # contiguous), and each block is checked against the machine's memory first: a large max_rank
    # that the tolerance stops early costs nothing, and one the data reach is refused by name
    # instead of an allocation of n x max_rank up front (671 GB for 300,000 rows and max_rank=n)
    blocks = []
    pivots = []
    threshold = tol * max(float(residual.max()), 0.0)
    # the bar counts columns up to max_rank; a tolerance usually stops it earlier
    with progress_bar(max_rank, "pivoted Cholesky", unit="column") as bar:
        for j in range(max_rank):
            i = int(np.argmax(residual))
            pivot = residual[i]
            if pivot <= threshold or pivot <= 0:
                break
            # a tolerance as large as the trace itself would accept no column at all, and a factor without
            # columns is no approximation a solve can use: the first column is always taken
            if j > 0 and trace_tol is not None and np.sum(np.maximum(residual, 0.0)) <= trace_tol:
                break
            k = j % MEMORY_CHECK_COLUMNS
            if k == 0:
                reach = min(j + MEMORY_CHECK_COLUMNS, max_rank)
                check_memory(16.0 * n * reach, name, f"a pivoted Cholesky factor of {n:,} rows reaching {reach:,} "
                             f"columns (and its returned copy)", f"lower {name} or its tolerance")
                blocks.append(np.empty((n, reach - j), order="F"))
            col = check_real_output(column(i), "column", "values")
            if col.shape != (n,):
                raise ValueError(f"column: expected column({i}) of shape ({n},), got shape {col.shape}")
            if not np.all(np.isfinite(col)):
                # a NaN would spread through every later column of the factor, unseen
                raise FloatingPointError(f"column: column({i}) contains NaN or infinite values; cannot factor")
            col = col - sum(B @ B[i] for B in blocks[:-1]) - blocks[-1][:, :k] @ blocks[-1][i, :k]
            blocks[-1][:, k] = col / np.sqrt(pivot)
            residual -= blocks[-1][:, k] ** 2
            residual[i] = 0.0  # exact by construction; avoid re-picking through round-off
            pivots.append(i)
            bar.update()
    r = len(pivots)
    if not blocks:
        return np.zeros((n, 0)), np.zeros(0, dtype=np.intp)
    blocks[-1] = blocks[-1][:, : r - MEMORY_CHECK_COLUMNS * (len(blocks) - 1)]
    return np.concatenate(blocks, axis=1), np.asarray(pivots, dtype=np.intp)


def batched_pivoted_cholesky(kernel, X, tol, max_rank):
    """Pivoted Cholesky of a stack of Gram matrices ``G_q = kernel(X[q])``, X of shape (q, m, d).

    Each factor stops growing once its residual trace ``tr(G_q - L_q L_q^T)`` is at most
    ``tol``; all stop at ``max_rank`` columns. Returns ``L`` of shape (q, m, r) (columns beyond a
    factor's own rank are 0) and a mask of the factors that met ``tol``.
    """
    X = check_array(X, "X")
    if X.ndim != 3 or not np.all(np.isfinite(X)):
        raise ValueError(f"X: expected finite points of shape (q, m, d), got "
                         f"{'shape ' + str(X.shape) if X.ndim != 3 else 'NaN or infinite values'}")
    q, m, _ = X.shape
    rows = np.arange(q)
    residual = kernel.paired(X, X, False)
    L = np.zeros((q, m, max(int(max_rank), 0)))
    done = residual.sum(axis=1) <= tol
    rank = 0
    for j in range(L.shape[2]):
        if done.all():
            break
        piv = residual.argmax(axis=1)
        pivot = residual[rows, piv]
        active = ~done & (pivot > 0)
        col = kernel.paired(X, X[rows, piv][:, None, :], False)
        col -= np.einsum("qmr,qr->qm", L[:, :, :j], L[rows, piv, :j])
        col *= np.where(active, 1.0 / np.sqrt(np.where(active, pivot, 1.0)), 0.0)[:, None]
        L[:, :, j] = col
        residual -= col**2
        residual[rows[active], piv[active]] = 0.0
        rank = j + 1
        done |= np.maximum(residual, 0.0).sum(axis=1) <= tol
    return L[:, :, :rank], done


def column_entries(W):
    """The columns of a weight matrix as ``(rows, values)`` pairs, one per column.

    For a sparse matrix, each column's stored row indices and values (in CSC order); for a dense
    one, ``slice(None)`` and the whole column.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> W = sp.csc_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]]))
    >>> [(rows.tolist(), vals.tolist()) for rows, vals in column_entries(W)]
    [([0, 2], [1.0, 3.0]), ([1], [2.0])]
    """
    if not sp.issparse(W):
        W = np.asarray(W)
        for j in range(W.shape[1]):
            yield slice(None), W[:, j]
        return
    W = sp.csc_matrix(W)
    for j in range(W.shape[1]):
        lo, hi = W.indptr[j], W.indptr[j + 1]
        yield W.indices[lo:hi], W.data[lo:hi]
