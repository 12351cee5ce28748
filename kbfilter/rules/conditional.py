"""Conditional kernel mean embedding, CKME (algorithms §3; Song et al. 2009; Grünewälder et al. 2012; the localized CKME paper).

From pairs ``(a_i, b_i)`` the embedding of ``P(b | a)`` is ``sum_i w_i(a) k_b(., b_i)`` with
``w(a) = (G_a + n eps I)^{-1} k_a(a)``. :class:`ConditionalEmbedding` computes ``w`` exactly or
by one of the approximations of the localized CKME paper (localized kNN, Nadaraya-Watson, random subsample,
Nyström, incomplete Cholesky), random Fourier features, or the sparse embedding of Grünewälder et al. (2012).
"""

from collections import Counter

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    check_choice,
    check_int,
    check_matrix,
    check_positive,
    check_rng,
    check_same_length,
)
from ..embedding import KernelMean
from ..kernels import fitted_kernel
from ..linalg import Woodbury, batched_pivoted_cholesky, column_entries, pivoted_cholesky, spd_factor
from ..operators import DenseOperator, LowRankOperator, SparseOperator
from ..persistence import Persistent, persistent
from ..threads import limited_blas
from .sparse_embedding import sparse_coefficients

__all__ = ["ConditionalEmbedding", "neighbourhood_weights", "weighted_sq_norms"]

METHODS = ("exact", "knn", "nw", "random", "nystrom", "icf", "rff", "sparse")

# Bound on the entries of a dense (n_train x chunk) block built while answering queries.
_BLOCK_ENTRIES = 2**22


def _chunks(n_items, chunk):
    for start in range(0, n_items, chunk):
        yield slice(start, min(start + chunk, n_items))


def _regular_columns(W):
    """For a CSC matrix whose columns all hold the same number ``m`` of entries (knn, random):
    its row indices and values as (q, m) arrays; otherwise ``None``."""
    W = sp.csc_matrix(W)
    counts = np.diff(W.indptr)
    if counts.size == 0 or np.any(counts != counts[0]) or counts[0] == 0:
        return None
    m = counts[0]
    return W.indices.reshape(-1, m), W.data.reshape(-1, m)


def weighted_sq_norms(W, points, kernel):
    """``diag(W^T G W)`` with ``G = kernel(points)``: squared RKHS norms of the columns' embeddings.

    Sparse columns cost O(nnz^2) each; dense columns are handled in row blocks of ``G`` so memory
    stays bounded (O(n^2) time per column is unavoidable for them).
    """
    n, q = W.shape
    if sp.issparse(W):
        regular = _regular_columns(W)
        if regular is not None:
            idx, vals = regular
            out = np.empty(q)
            for rows in _chunks(q, max(1, _BLOCK_ENTRIES // idx.shape[1] ** 2)):
                G = kernel.gram_batched(points[idx[rows]])
                out[rows] = np.einsum("qi,qij,qj->q", vals[rows], G, vals[rows])
            return out
        return np.array([w @ kernel(points[idx]) @ w if idx.size else 0.0 for idx, w in column_entries(W)])
    W = np.asarray(W)
    out = np.zeros(q)
    block = max(1, _BLOCK_ENTRIES // max(n, 1))
    for rows in _chunks(n, block):
        out += np.einsum("iq,iq->q", W[rows], kernel(points[rows], points) @ W)
    return out


def _column_inner(W, points, targets, kernel):
    """``sum_i W[i, j] k(points_i, targets_j)`` for each column ``j``."""
    if sp.issparse(W):
        regular = _regular_columns(W)
        if regular is not None:
            idx, vals = regular
            return np.einsum("qm,qm->q", vals, kernel.paired(points[idx], targets[:, None, :]))
        return np.array([w @ kernel(points[idx], targets[j : j + 1])[:, 0]
                         for j, (idx, w) in enumerate(column_entries(W))])
    return np.einsum("iq,iq->q", W, kernel(points, targets))


# Relative accuracy of the low-rank local solve: residual trace of the pivoted Cholesky at most
# this times the ridge, which bounds the relative error of the solution by the same number.
_LOCAL_RTOL = 1e-12


def _batched_cho_solve(L, b):
    """Solve ``L L^T x = b`` for a stack of lower-triangular factors ``L`` (q, m, m) and right-hand
    sides ``b`` (q, m): forward and back substitution, one column of every system at a time."""
    m = b.shape[1]
    y = np.empty_like(b)
    for i in range(m):
        y[:, i] = (b[:, i] - np.einsum("qj,qj->q", L[:, i, :i], y[:, :i])) / L[:, i, i]
    x = np.empty_like(b)
    for i in range(m - 1, -1, -1):
        x[:, i] = (y[:, i] - np.einsum("qj,qj->q", L[:, i + 1:, i], x[:, i + 1:])) / L[:, i, i]
    return x


def neighbourhood_weights(kernel, Q, A, idx, reg, low_rank=True):
    """The localized embedding's weights of each query on its own neighbourhood (algorithms §3, kNN):
    ``(G_N + m reg I)^{-1} k_N(q)`` with ``N`` the ``m`` training inputs ``A[idx[q]]``.

    Parameters
    ----------
    kernel : Kernel
        The fitted input kernel.
    Q : ndarray of shape (n_queries, d)
        The queries.
    A : ndarray of shape (n, d)
        The training inputs.
    idx : ndarray of int, shape (n_queries, m)
        Each query's neighbourhood among them.
    reg : float
        The regulariser (``m reg`` is added to the diagonal).
    low_rank : bool, default=True
        Solve numerically low-rank neighbourhoods through their pivoted Cholesky factor.

    Returns
    -------
    ndarray of shape (n_queries, m)
        The weights, row by row in the order of ``idx``.
    """
    m = idx.shape[1]
    vals = np.empty(idx.shape)
    # memory per query is O(m r) on the low-rank path; the dense path sub-chunks itself
    for rows in _chunks(Q.shape[0], max(1, _BLOCK_ENTRIES // (64 * m))):
        local = A[idx[rows]]
        kq = kernel.paired(local, Q[rows][:, None, :])
        vals[rows] = _local_solve(kernel, local, kq, m * reg, low_rank=low_rank)
    return vals


def _local_solve(kernel, local, kq, ridge, low_rank=True):
    """Solve ``(G_N + ridge I) w = k_N(q)`` for a stack of neighbourhoods (algorithms §3, kNN).

    Neighbourhoods are small next to the bandwidth, so their Gram matrices are numerically of low
    rank: a batched pivoted Cholesky with residual trace <= 1e-12 * ridge, then Woodbury, gives the
    exact solution to ~1e-12 relative in O(m r^2) instead of O(m^3). Neighbourhoods whose Gram is
    not of low rank (r > m/4) are solved by a dense batched Cholesky instead.
    """
    q, m = kq.shape
    out = np.empty((q, m))
    dense = np.ones(q, dtype=bool)
    if low_rank and m >= 32:
        L, done = batched_pivoted_cholesky(kernel, local, _LOCAL_RTOL * ridge, m // 4)
        if np.any(done):
            Ld, kd = L[done], kq[done]
            inner = np.swapaxes(Ld, 1, 2) @ Ld
            inner[:, np.arange(inner.shape[1]), np.arange(inner.shape[1])] += ridge
            proj = np.linalg.solve(inner, np.einsum("qmr,qm->qr", Ld, kd)[..., None])[..., 0]
            out[done] = (kd - np.einsum("qmr,qr->qm", Ld, proj)) / ridge
        dense = ~done
    for rows in _chunks(np.count_nonzero(dense), max(1, _BLOCK_ENTRIES // (m * m))):
        sel = np.flatnonzero(dense)[rows]
        G = kernel.gram_batched(local[sel])
        G[:, np.arange(m), np.arange(m)] += ridge
        try:
            # numpy's batched Cholesky factors the whole stack in one call (scipy's loops over it
            # in Python: 100,000 calls at T = 10^5)
            out[sel] = _batched_cho_solve(np.linalg.cholesky(G), kq[sel])
        except np.linalg.LinAlgError:
            # one of the local systems is not numerically SPD: solve them one by one with the
            # library's jitter/LU rule (which warns)
            out[sel] = [spd_factor(g, name="local Gram").solve(k) for g, k in zip(G, kq[sel])]
    return out


@persistent("A_", "B_", "n_train_", "kernel_in_", "kernel_out_", "diagnostics_", "factor_", "n_neighbors_",
            "subsample_", "nystroem_", "sampler_", "features_", "L_", "pivots_", "woodbury_", "coef_", "n_iter_",
            holds={"kernel_in": "Kernel", "kernel_out": "Kernel", "kernel_in_": "Kernel", "kernel_out_": "Kernel",
                   "factor_": "SPDFactor", "nystroem_": "Nystroem", "sampler_": "RBFSampler", "woodbury_": "Woodbury"})
class ConditionalEmbedding(Persistent, BaseEstimator):
    """Conditional kernel mean embedding ``P(b | a)`` learned from pairs (algorithms §3).

    Parameters
    ----------
    kernel_in, kernel_out : Kernel, optional
        Kernels on inputs ``a`` and outputs ``b``; Gaussian with the median heuristic by default.
        They are cloned and fitted on the training data (``kernel_in_``, ``kernel_out_``).
    reg : float
        ``eps`` in ``(G_a + n eps I)^{-1}``; the localized method uses ``m eps`` on ``m`` points.
    method : {"exact", "knn", "nw", "random", "nystrom", "icf", "rff", "sparse"}
        - ``exact``: Cholesky of ``G_a + n eps I``; O(n^3) once, O(n^2) a query.
        - ``knn``: localized CKME (the localized CKME paper Algorithm 1) on the ``n_neighbors`` nearest training
          inputs of each query (found with ``sklearn.neighbors.NearestNeighbors``); sparse weights.
        - ``nw``: Nadaraya-Watson, ``w = k_a(a) / sum_i k_a(a_i, a)``.
        - ``random``: the exact formula on ``rank`` training pairs drawn once at fit time.
        - ``nystrom``: ``sklearn.kernel_approximation.Nystroem`` features ``Phi`` of rank ``rank``,
          ``w = Phi (Phi^T Phi + n eps I)^{-1} phi(a)``.
        - ``icf``: pivoted Cholesky ``G_a ~ L L^T`` of rank ``rank``, Woodbury solve (the localized CKME paper eq. 5).
        - ``rff``: random Fourier features (Rahimi and Recht 2007; ``sklearn.kernel_approximation.RBFSampler``)
          of a Gaussian ``kernel_in``, ``rank`` of them, in the same formula as ``nystrom``. Data-independent
          features: they need more of them than Nyström needs landmarks for the same accuracy.
        - ``sparse``: the sparse embedding of Grünewälder et al. (2012) §5,
          ``mu(a) = sum_ij M_ij k_a(a_i, a) k_b(b_j, .)`` with ``M`` the lasso-like approximation of
          ``W = (G_a + n eps I)^{-1}`` in the norm of the product RKHS
          (:func:`~kbfilter.rules.sparse_embedding.sparse_coefficients`, monotone FISTA); ``w(a) =
          M^T k_a(a)`` needs the kernel only at the training inputs whose row of ``M`` is not
          zero. O(n^3) an iteration at fit: for a few thousand pairs at most.
    n_neighbors : int
        Neighbourhood size ``m`` for ``knn``.
    rank : int
        Points kept by ``random``; rank of ``nystrom`` and ``icf``; number of features of ``rff``.
    random_state : int, Generator or None
        For ``random``, ``nystrom`` and ``rff``.
    gamma : float
        For ``sparse``: the penalty as a fraction, in ``[0, 1]``, of the smallest penalty at
        which ``M = 0`` (:func:`~kbfilter.rules.sparse_embedding.largest_useful_penalty`); 0 is the
        exact embedding, larger is sparser.
    max_iter : int
        For ``sparse``: the most FISTA iterations.
    solver : {"auto", "dense"}
        For ``knn``: ``"auto"`` solves each neighbourhood through a pivoted Cholesky factor of
        its Gram matrix when that is numerically of low rank (exact to ~1e-12 relative, O(m r^2)),
        densely otherwise; ``"dense"`` always solves densely, O(m^3).

    Attributes
    ----------
    diagnostics_ : collections.Counter
        Fallbacks taken while fitting: ``"jitter"`` or ``"lu"`` when the regularised Gram matrix
        could not be factored by plain Cholesky (each also warned about); ``"max_iter"`` when the
        sparse method's FISTA ran out of iterations (warned about too).
    coef_ : scipy.sparse.csr_matrix of shape (n, n)
        ``sparse``: the coefficients ``M``; ``coef_.nnz`` counts the parameters kept.
    n_iter_ : int
        ``sparse``: the FISTA iterations run.

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter import ConditionalEmbedding
    >>> rng = np.random.default_rng(0)
    >>> A = rng.uniform(-2, 2, size=(300, 1))
    >>> B = np.sin(A) + 0.05 * rng.standard_normal((300, 1))
    >>> cme = ConditionalEmbedding(reg=1e-4).fit(A, B)
    >>> np.round(cme.predict_mean([[1.0]]), 1)
    array([[0.8]])
    """

    def __init__(
        self,
        kernel_in=None,
        kernel_out=None,
        reg=1e-3,
        method="exact",
        n_neighbors=50,
        rank=200,
        random_state=None,
        solver="auto",
        gamma=1e-2,
        max_iter=5000,
    ):
        self.gamma = gamma
        self.max_iter = max_iter
        self.kernel_in = kernel_in
        self.kernel_out = kernel_out
        self.reg = reg
        self.method = method
        self.n_neighbors = n_neighbors
        self.rank = rank
        self.random_state = random_state
        self.solver = solver

    # -- fitting -------------------------------------------------------------------------------
    @limited_blas
    def fit(self, A, B):
        """Learn the embedding from input-output pairs.

        Parameters
        ----------
        A : array-like of shape (n, d_in)
            Inputs ``a_i``.
        B : array-like of shape (n, d_out)
            Outputs ``b_i``, row for row.

        Returns
        -------
        self : ConditionalEmbedding
            The fitted embedding.
        """
        A = check_matrix(A, "A", min_samples=2)
        B = check_matrix(B, "B", min_samples=2)
        check_same_length("A", A, "B", B)
        self.n_features_in_ = A.shape[1]
        check_choice(self.method, "method", METHODS)
        check_choice(self.solver, "solver", ("auto", "dense"))
        reg = check_positive(self.reg, "reg")
        n = A.shape[0]
        self.A_, self.B_ = A, B
        self.n_train_ = n
        self.kernel_in_ = fitted_kernel(self.kernel_in, "kernel_in", A)
        self.kernel_out_ = fitted_kernel(self.kernel_out, "kernel_out", B)
        self.diagnostics_ = Counter()
        getattr(self, f"_fit_{self.method}")(A, reg)
        return self

    def _factor(self, G, name):
        """``spd_factor`` with its fallback counted in ``diagnostics_``."""
        factor = spd_factor(G, name=name)
        if factor.event is not None:
            self.diagnostics_[factor.event] += 1
        return factor

    def _ridge_factor(self, G, ridge, name):
        """The factor of ``G + ridge I``; ``G`` is overwritten (a Gram matrix built for this)."""
        G[np.diag_indices(G.shape[0])] += ridge
        return self._factor(G, name)

    def _index_neighbours(self):
        self.neighbors_ = NearestNeighbors(n_neighbors=self.n_neighbors_).fit(self.kernel_in_.coordinates(self.A_))

    def _after_load(self):
        # the neighbour index is derived from the training inputs, so it is rebuilt, not saved
        if self.method == "knn" and hasattr(self, "A_"):
            self._index_neighbours()

    def _fit_exact(self, A, reg):
        n = A.shape[0]
        if self.kernel_in_.has_features:
            self._fit_features(self.kernel_in_.features(A), reg)
            return
        self.factor_ = self._ridge_factor(self.kernel_in_(A), n * reg, "G_a + n reg I")

    def _fit_knn(self, A, reg):
        n = A.shape[0]
        self.n_neighbors_ = check_int(self.n_neighbors, "n_neighbors", maximum=n)
        if not self.kernel_in_.is_radial:
            raise ValueError(
                "kernel_in: method='knn' needs a radial kernel (Gaussian or Laplace), whose "
                "similarity ranks neighbours like Euclidean distance"
            )
        self._index_neighbours()

    def _fit_nw(self, A, reg):
        pass

    def _fit_random(self, A, reg):
        n = A.shape[0]
        m = min(check_int(self.rank, "rank"), n)
        rng = check_rng(self.random_state)
        self.subsample_ = np.sort(rng.choice(n, m, replace=False))
        self.factor_ = self._ridge_factor(self.kernel_in_(A[self.subsample_]), m * reg, "G_sub + m reg I")

    def _fit_nystrom(self, A, reg):
        n = A.shape[0]
        rank = min(check_int(self.rank, "rank"), n)
        metric = self.kernel_in_.sklearn_metric()
        if metric is None:
            raise ValueError(
                f"kernel_in: method='nystrom' needs a kernel scikit-learn's Nystroem knows "
                f"(Gaussian or linear), got {type(self.kernel_in_).__name__}; use method='icf'"
            )
        name, params = metric
        seed = check_rng(self.random_state).integers(2**31 - 1)
        self.nystroem_ = Nystroem(kernel=name, kernel_params=params or None, n_components=rank,
                                  random_state=int(seed))
        self._fit_features(self.nystroem_.fit_transform(self.kernel_in_.coordinates(A)), reg)

    def _fit_rff(self, A, reg):
        metric = self.kernel_in_.sklearn_metric()
        if metric is None or metric[0] != "rbf":
            raise ValueError(f"kernel_in: method='rff' needs a Gaussian kernel (random Fourier features sample "
                             f"its spectrum), got {type(self.kernel_in_).__name__}")
        seed = check_rng(self.random_state).integers(2**31 - 1)
        self.sampler_ = RBFSampler(gamma=metric[1]["gamma"], n_components=check_int(self.rank, "rank"),
                                   random_state=int(seed))
        self._fit_features(self.sampler_.fit_transform(self.kernel_in_.coordinates(A)), reg)

    def _fit_features(self, Phi, reg):
        """``G_a = Phi Phi^T``: ``w = Phi (Phi^T Phi + n eps I)^{-1} phi(a)``, no n x n matrix."""
        self.features_ = Phi
        self.factor_ = self._ridge_factor(Phi.T @ Phi, Phi.shape[0] * reg, "Phi^T Phi + n reg I")

    def _fit_sparse(self, A, reg):
        gamma = check_positive(self.gamma, "gamma", allow_zero=True)
        max_iter = check_int(self.max_iter, "max_iter")
        n = A.shape[0]
        K = self.kernel_in_(A)
        dense = self._ridge_factor(K.copy(), n * reg, "G_a + n reg I").solve(np.eye(n))
        # sparse_coefficients warns (ConvergenceWarning) when it runs out of iterations
        solution = sparse_coefficients(K, self.kernel_out_(self.B_), dense, gamma, max_iter=max_iter)
        if not solution.converged:
            self.diagnostics_["max_iter"] += 1
        self.coef_, self.n_iter_ = solution.coef, solution.n_iter

    def _fit_icf(self, A, reg):
        n = A.shape[0]
        rank = check_int(self.rank, "rank")
        k = self.kernel_in_
        self.L_, self.pivots_ = pivoted_cholesky(k.diag(A), lambda i: k(A, A[i : i + 1])[:, 0], rank)
        self.woodbury_ = Woodbury(self.L_, n * reg)

    # -- weights ---------------------------------------------------------------------------------
    @limited_blas
    def weights(self, Q):
        """Weight matrix ``W`` of shape (n_train, n_queries): column ``j`` embeds ``P(b | q_j)``.

        Sparse (CSC) for ``knn`` and ``random``, dense otherwise. For very large training sets
        prefer :meth:`predict_mean`, which works through the queries in memory-bounded chunks.

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.

        Returns
        -------
        ndarray or scipy.sparse.csc_matrix of shape (n_train, n_queries)
            The weights.
        """
        check_is_fitted(self, "kernel_in_")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        return self._weights(Q)

    @limited_blas
    def weights_operator(self, Q):
        """The weight matrix of :meth:`weights` as an operator, without forming it when it is of
        low rank.

        Dense for ``exact`` (with a kernel that has no explicit features), ``nw`` and ``icf``;
        sparse for ``knn`` and ``random``; low rank ``Phi (Phi^T Phi + n eps I)^{-1} phi(Q)^T`` for
        ``nystrom``, ``rff`` and for ``exact`` with a feature kernel (e.g.
        :class:`~kbfilter.kernel_approximation.NystromKernel`): O((n + q) r) memory.

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.

        Returns
        -------
        Operator
            Of shape (n_train, n_queries).
        """
        check_is_fitted(self, "kernel_in_")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        if self.method in ("nystrom", "rff") or (self.method == "exact" and self.kernel_in_.has_features):
            return LowRankOperator(self.features_, self.factor_.solve(self._query_features(Q).T).T)
        W = self._weights(Q)
        return SparseOperator(W) if sp.issparse(W) else DenseOperator(W)

    def _query_features(self, Q):
        if self.method == "nystrom":
            return self.nystroem_.transform(self.kernel_in_.coordinates(Q))
        if self.method == "rff":
            return self.sampler_.transform(self.kernel_in_.coordinates(Q))
        return self.kernel_in_.features(Q)

    def _weights(self, Q):
        return getattr(self, f"_weights_{self.method}")(Q)

    def _weights_exact(self, Q):
        if self.kernel_in_.has_features:  # the same push-through formula as the Nystroem method
            return self._weights_nystrom(Q)
        return self.factor_.solve(self.kernel_in_(self.A_, Q))

    def _weights_nw(self, Q):
        K = self.kernel_in_(self.A_, Q)
        total = K.sum(axis=0)
        # A query far from every training input has all similarities underflow to 0: fall back
        # to the nearest training input's output instead of dividing by zero.
        empty = ~(total > 0)
        if np.any(empty):
            coords = self.kernel_in_.coordinates
            nearest = NearestNeighbors(n_neighbors=1).fit(coords(self.A_)).kneighbors(coords(Q[empty]),
                                                                                      return_distance=False)
            K[:, empty] = 0.0
            K[nearest[:, 0], np.flatnonzero(empty)] = 1.0
            total = K.sum(axis=0)
        return K / total

    def _weights_random(self, Q):
        sub = self.subsample_
        local = self.factor_.solve(self.kernel_in_(self.A_[sub], Q))  # (m, q)
        m, q = local.shape
        return sp.csc_matrix((local.T.ravel(), np.tile(sub, q), np.arange(0, q * m + 1, m)),
                             shape=(self.n_train_, q))

    def _weights_nystrom(self, Q):
        return self.features_ @ self.factor_.solve(self._query_features(Q).T)

    _weights_rff = _weights_nystrom

    def _weights_sparse(self, Q):
        rows = np.flatnonzero(np.diff(self.coef_.indptr))  # the inputs M uses
        if rows.size == 0:
            return np.zeros((self.n_train_, Q.shape[0]))
        return np.asarray(self.coef_[rows].T @ self.kernel_in_(self.A_[rows], Q))

    def _weights_icf(self, Q):
        return self.woodbury_.solve(self.kernel_in_(self.A_, Q))

    def _weights_knn(self, Q):
        idx, vals = self.local_weights(Q)
        q, m = idx.shape
        return sp.csc_matrix(
            (vals.ravel(), idx.ravel(), np.arange(0, q * m + 1, m)), shape=(self.n_train_, q)
        )

    def local_weights(self, Q, return_distance=False):
        """The localized method's weights, neighbourhood by neighbourhood (``method='knn'`` only).

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.
        return_distance : bool, default=False
            Also return each query's distance to its farthest neighbour (in the coordinates the
            neighbours are ranked in, :meth:`~kbfilter.kernels.Kernel.coordinates`).

        Returns
        -------
        idx : ndarray of int, shape (n_queries, m)
            The training inputs nearest to each query.
        vals : ndarray of shape (n_queries, m)
            Their weights.
        reach : ndarray of shape (n_queries,)
            With ``return_distance``: the distance to the ``m``-th neighbour.
        """
        check_is_fitted(self, "neighbors_")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        found = self.neighbors_.kneighbors(self.kernel_in_.coordinates(Q), return_distance=return_distance)
        dist, idx = found if return_distance else (None, found)
        vals = neighbourhood_weights(self.kernel_in_, Q, self.A_, idx, self.reg, low_rank=self.solver == "auto")
        return (idx, vals, dist[:, -1]) if return_distance else (idx, vals)

    # -- predictions -------------------------------------------------------------------------------
    def _query_chunk(self):
        if self.method in ("knn", "random"):
            return 4096
        return max(1, _BLOCK_ENTRIES // self.n_train_)

    @limited_blas
    def predict_mean(self, Q):
        """Conditional mean ``sum_i w_i(q) b_i`` for each query (raw, unnormalised; the localized CKME paper §5).

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.

        Returns
        -------
        ndarray of shape (n_queries, d_out)
            The weighted sums of the training outputs.
        """
        check_is_fitted(self, "kernel_in_")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        out = np.empty((Q.shape[0], self.B_.shape[1]))
        for rows in _chunks(Q.shape[0], self._query_chunk()):
            out[rows] = self._weights(Q[rows]).T @ self.B_
        return out

    @limited_blas
    def embed(self, Q):
        """The conditional embeddings as a list of :class:`~kbfilter.KernelMean`, one per query.

        Each is expressed on the training outputs its weights touch (all for dense methods).

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.

        Returns
        -------
        list of KernelMean
            One embedding per query, with the fitted ``kernel_out_``.
        """
        check_is_fitted(self, "kernel_in_")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        means = []
        for rows in _chunks(Q.shape[0], self._query_chunk()):
            means.extend(KernelMean(self.B_[idx], w, self.kernel_out_)
                         for idx, w in column_entries(self._weights(Q[rows])))
        return means

    def predict(self, Q):
        """The conditional mean ``E[b | a = q]`` for each query, as a regressor predicts.

        The same as :meth:`predict_mean`; it lets scikit-learn's regression scorers (e.g.
        ``GridSearchCV(..., scoring="neg_mean_squared_error")``) evaluate the embedding.

        Parameters
        ----------
        Q : array-like of shape (n_queries, dim_a)
            Query inputs.

        Returns
        -------
        ndarray of shape (n_queries, dim_b)
            The conditional means.
        """
        return self.predict_mean(Q)

    def predict_mode(self, Q, max_iter=200):
        """Mode (pre-image) of each conditional embedding (algorithms §2; Gaussian ``kernel_out``).

        Parameters
        ----------
        Q : array-like of shape (n_queries, d_in)
            Query inputs.
        max_iter : int, default=200
            The most fixed-point iterations (:meth:`KernelMean.mode`).

        Returns
        -------
        ndarray of shape (n_queries, d_out)
            The modes.
        """
        return np.array([m.mode(max_iter=max_iter) for m in self.embed(Q)])

    @limited_blas
    def held_out_loss(self, A, B):
        """Mean held-out CKME loss ``||k_b(., b_j) - mu(a_j)||^2`` (algorithms §3, Grünewälder et al. (2012) §3.2).

        ``k_b(b_j, b_j) - 2 w(a_j)^T k_b(b_j) + w(a_j)^T G_b w(a_j)``, averaged over the pairs.

        Parameters
        ----------
        A : array-like of shape (n, d_in)
            Held-out inputs.
        B : array-like of shape (n, d_out)
            Their outputs.

        Returns
        -------
        float
            The mean loss.
        """
        check_is_fitted(self, "kernel_in_")
        A = check_matrix(A, "A", n_features=self.A_.shape[1])
        B = check_matrix(B, "B", n_features=self.B_.shape[1])
        check_same_length("A", A, "B", B)
        total = 0.0
        k = self.kernel_out_
        for rows in _chunks(A.shape[0], self._query_chunk()):
            W = self._weights(A[rows])
            cross = _column_inner(W, self.B_, B[rows], k)
            total += np.sum(k.diag(B[rows]) - 2 * cross + weighted_sq_norms(W, self.B_, k))
        return total / A.shape[0]

    def score(self, A, B):
        """Negative :meth:`held_out_loss` (larger is better, as scikit-learn expects).

        Parameters
        ----------
        A : array-like of shape (n, d_in)
            Held-out inputs.
        B : array-like of shape (n, d_out)
            Their outputs.

        Returns
        -------
        float
            Minus the mean loss.
        """
        return -self.held_out_loss(A, B)
