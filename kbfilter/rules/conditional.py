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
from sklearn.utils.validation import check_is_fitted

from .._validation import (check_choice, check_int, check_matrix, check_positive, check_same_length, check_saved_matrix,
                           check_square_memory, check_within_magnitude)
from ..embedding import KernelMean
from ..kernels import fitted_kernel
from ..linalg import column_entries
from ..persistence import Persistent, persistent, saved_before_fit
from ..threads import limited_blas
from .conditional_weights import BLOCK_ENTRIES, WEIGHT_METHODS, LocalWeights, chunks

__all__ = ["ConditionalEmbedding", "weighted_sq_norms"]

METHODS = tuple(WEIGHT_METHODS)


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
            for rows in chunks(q, max(1, BLOCK_ENTRIES // idx.shape[1] ** 2)):
                G = kernel.gram_batched(points[idx[rows]])
                out[rows] = np.einsum("qi,qij,qj->q", vals[rows], G, vals[rows])
            return out
        return np.array([w @ kernel(points[idx]) @ w if idx.size else 0.0 for idx, w in column_entries(W)])
    W = np.asarray(W)
    out = np.zeros(q)
    block = max(1, BLOCK_ENTRIES // max(n, 1))
    for rows in chunks(n, block):
        out += np.einsum("iq,iq->q", W[rows], kernel(points[rows], points) @ W)
    return out


def _column_inner(W, points, targets, kernel):
    """``sum_i W[i, j] k(points_i, targets_j)`` for each column ``j``."""
    if sp.issparse(W):
        regular = _regular_columns(W)
        if regular is not None:
            idx, vals = regular
            return np.einsum("qm,qm->q", vals, kernel.paired(points[idx], targets[:, None, :], False))
        return np.array([w @ kernel(points[idx], targets[j : j + 1])[:, 0]
                         for j, (idx, w) in enumerate(column_entries(W))])
    return np.einsum("iq,iq->q", W, kernel(points, targets))


@persistent("A_", "B_", "n_train_", "kernel_in_", "kernel_out_", "diagnostics_", "weights_",
            holds={"kernel_in": "Kernel", "kernel_out": "Kernel", "kernel_in_": "Kernel", "kernel_out_": "Kernel",
                   "weights_": "ConditionalWeights"})
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
          ``w = Phi (Phi^T Phi + n eps I)^{-1} phi(a)``. A Gaussian ``kernel_in`` is handed the inputs
          measured from the first training input, as scikit-learn computes kernel values from squared
          norms, which lose digits far from the origin.
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
    weights_ : ConditionalWeights
        The method's own part, chosen at fit (:mod:`kbfilter.rules.conditional_weights`): what
        it fitted, and how it answers queries.
    diagnostics_ : collections.Counter
        Fallbacks taken while fitting: ``"jitter"`` or ``"lu"`` when the regularised Gram matrix
        could not be factored by plain Cholesky (each also warned about); ``"max_iter"`` when the
        sparse method's FISTA ran out of iterations (warned about too). The localized method
        (``knn``) solves its systems when it answers queries, and counts there the neighbourhoods
        that needed ``"jitter"`` or ``"lu"``; Nadaraya-Watson (``nw``) counts as ``"nearest_input"``
        the queries far enough from every training input that all their similarities underflow
        (each takes its nearest training input's output; warned about).
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
        # the filters' bound on training values: beyond it, squared distances overflow and a
        # neighbour's local solve turned to NaN
        A = check_within_magnitude(check_matrix(A, "A", min_samples=2), "A")
        B = check_within_magnitude(check_matrix(B, "B", min_samples=2), "B")
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
        weights = WEIGHT_METHODS[self.method].configured(self.get_params(deep=False), self.kernel_in_)
        if weights.dense_arrays:
            check_square_memory(n, weights.dense_arrays, "A",
                                f"the {self.method!r} conditional embedding of {n:,} pairs",
                                "use method='nystrom', 'icf', 'rff' or 'knn', or fewer pairs")
        self.weights_ = weights.fit(A, B, self.kernel_in_, self.kernel_out_, reg, self.diagnostics_)
        return self

    @property
    def coef_(self):
        """``sparse``: the coefficients ``M`` (see the class's attributes)."""
        return self._sparse_fit("coef_")

    @property
    def n_iter_(self):
        """``sparse``: the FISTA iterations run."""
        return self._sparse_fit("n_iter_")

    def _sparse_fit(self, name):
        check_is_fitted(self, "weights_")
        if not hasattr(self.weights_, name):
            # an AttributeError, as for any attribute an estimator does not have (hasattr reads it)
            raise AttributeError(f"{name}: only a fit with method='sparse' learns it; this embedding was fitted "
                                 f"with another method")
        return getattr(self.weights_, name)

    def _after_load(self):
        # a saved file is untrusted: the training pairs must be ones fit could have taken, and the
        # embedding must predict (a tampered part may fail, or give NaN, only when used)
        if saved_before_fit(self, "weights_"):
            return
        check_choice(self.method, "method", METHODS)
        A = check_saved_matrix(getattr(self, "A_", None), "A_", min_samples=2, allow_1d=False)
        B = check_saved_matrix(getattr(self, "B_", None), "B_", min_samples=2, allow_1d=False)
        n = self.n_train_
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n == len(A) == len(B)):
            raise ValueError(f"n_train_: expected the number of training inputs ({len(A)}) and outputs ({len(B)}), "
                             f"got {n!r}")
        self.n_features_in_ = A.shape[1]
        self.weights_.restore(A, self.kernel_in_)
        if not np.all(np.isfinite(self.predict_mean(A[:1]))):
            raise ValueError("the loaded embedding does not run (its prediction at the first training input is "
                             "not finite)")

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
        return self.weights_.operator(Q, self.A_, self.kernel_in_, self.diagnostics_)

    def _weights(self, Q):
        return self.weights_.weights(Q, self.A_, self.kernel_in_, self.diagnostics_)

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
        check_is_fitted(self, "weights_")
        if not isinstance(self.weights_, LocalWeights):
            raise ValueError(f"local_weights: only the localized method (method='knn') has neighbourhoods; this "
                             f"embedding's method is {self.method!r}")
        Q = check_matrix(Q, "Q", n_features=self.A_.shape[1])
        return self.weights_.local_weights(Q, self.A_, self.kernel_in_, return_distance=return_distance,
                                           diagnostics=self.diagnostics_)

    # -- predictions -------------------------------------------------------------------------------
    def _query_chunk(self):
        return self.weights_.query_chunk(self.n_train_)

    @limited_blas
    def predict_mean(self, Q):
        """Conditional mean ``sum_i w_i(q) b_i`` for each query (raw, unnormalised; the localized CKME paper §5).

        The weights of a regularised method sum to less than one, as in kernel ridge regression
        without an intercept: the estimate is pulled towards zero by ``1 - sum_i w_i(q)`` times the
        outputs' level, which is large for outputs far from zero (with the default method and
        outputs near 5e6, a pull of about 3e4 was measured). Centre the outputs
        before :meth:`fit` and add their mean back, or use ``method="nw"``, whose weights sum to
        one. The filters normalise their weights and are not affected.

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
        for rows in chunks(Q.shape[0], self._query_chunk()):
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
        for rows in chunks(Q.shape[0], self._query_chunk()):
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

        Raises
        ------
        ValueError
            Naming the first query whose embedding has no positive weight: far from every
            training input the embedding is 0, and 0 has no mode.
        """
        max_iter = check_int(max_iter, "max_iter")
        modes = []
        for j, embedding in enumerate(self.embed(Q)):
            if not np.any(embedding.weights > 0):
                raise ValueError(f"Q[{j}]: the conditional embedding there has no positive weight (the query is far "
                                 f"from every training input, where the embedding is 0), so it has no mode")
            modes.append(embedding.mode(max_iter=max_iter))
        return np.array(modes)

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
        for rows in chunks(A.shape[0], self._query_chunk()):
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
