"""How a conditional embedding computes its weights ``w(a) = (G_a + n eps I)^{-1} k_a(a)``: one
class per method, chosen once when the embedding is fitted.

Each class is registered under the name :class:`~kbfilter.ConditionalEmbedding` takes as
``method`` (:func:`weight_method`), takes the embedding's hyperparameters it uses, fits what it
needs from the training inputs, and answers queries with the training inputs and the fitted input
kernel handed to it (the embedding owns those; they are saved once). So the embedding never
branches on its method after ``fit``, and a saved embedding holds only its own method's fields.
"""

from collections import Counter

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.neighbors import NearestNeighbors

from .._validation import check_choice, check_indices, check_int, check_positive, check_rng, check_saved_matrix
from .._warnings import warn_user
from ..linalg import (NumericalWarning, Woodbury, batched_pivoted_cholesky, check_order, pivoted_cholesky,
                      ridge_factor, spd_factor)
from ..operators import DenseOperator, LowRankOperator, SparseOperator
from ..persistence import Persistent, persistent, saved_before_fit
from ..progress import progress_bar
from .sparse_embedding import sparse_coefficients

__all__ = ["WEIGHT_METHODS", "weight_method", "ConditionalWeights", "neighbourhood_weights", "warn_local_fallbacks",
           "QUERY_BLOCK"]

#: method name -> the class that computes its weights
WEIGHT_METHODS = {}

# Bound on the entries of a dense (n_train x chunk) block built while answering queries.
BLOCK_ENTRIES = 2**22

#: queries the localized (``knn``) method answers between two updates of its progress bar
QUERY_BLOCK = 20_000

# Relative accuracy of the low-rank local solve: residual trace of the pivoted Cholesky at most
# this times the ridge, which bounds the relative error of the solution by the same number.
_LOCAL_RTOL = 1e-12


def chunks(n_items, chunk):
    """Consecutive slices of at most ``chunk`` items covering ``range(n_items)``."""
    for start in range(0, n_items, chunk):
        yield slice(start, min(start + chunk, n_items))


def weight_method(name):
    """Class decorator: register a :class:`ConditionalWeights` subclass as method ``name``.

    Parameters
    ----------
    name : str
        The value of :class:`~kbfilter.ConditionalEmbedding`'s ``method`` that chooses the class.

    Returns
    -------
    callable
        The decorator, which returns the class unchanged.
    """
    def register(cls):
        WEIGHT_METHODS[name] = cls
        return cls

    return register


def _ridge_factor(G, ridge, name, diagnostics):
    """:func:`~kbfilter.linalg.ridge_factor`, its fallback counted in ``diagnostics``."""
    factor = ridge_factor(G, ridge, name)
    if factor.event is not None:
        diagnostics[factor.event] += 1
    return factor


class ConditionalWeights(Persistent, BaseEstimator):
    """The weights of one method: fitted once, then asked for the weights of queries.

    Subclasses take as parameters the embedding's hyperparameters they use (:meth:`configured`
    picks them) and implement :meth:`fit` and :meth:`weights`.
    """

    #: the weights are sparse (a few training inputs a query), so queries go in large chunks
    sparse = False
    #: the n x n float arrays the fit holds at its peak (measured with tracemalloc), which
    #: :class:`~kbfilter.ConditionalEmbedding` checks against the machine's memory before it
    dense_arrays = 0

    @classmethod
    def configured(cls, params, kernel):
        """The method's weights, built from the embedding's hyperparameters.

        Parameters
        ----------
        params : dict
            The embedding's ``get_params()``.
        kernel : Kernel
            The fitted input kernel (a method may choose its form by it).

        Returns
        -------
        ConditionalWeights
            Unfitted.
        """
        return cls(**{k: params[k] for k in cls._get_param_names()})

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        """Fit on the training pairs.

        Parameters
        ----------
        A, B : ndarray of shape (n, d_in), (n, d_out)
            The training inputs and outputs.
        kernel_in, kernel_out : Kernel
            The fitted kernels.
        reg : float
            The checked regulariser.
        diagnostics : collections.Counter
            Where fallbacks are counted.

        Returns
        -------
        self : ConditionalWeights
            Fitted.
        """
        return self

    def weights(self, Q, A, kernel, diagnostics=None):
        """The weight matrix of the queries.

        Parameters
        ----------
        Q : ndarray of shape (q, d_in)
            Checked queries.
        A : ndarray of shape (n, d_in)
            The training inputs.
        kernel : Kernel
            The fitted input kernel.
        diagnostics : collections.Counter or None
            Where fallbacks taken while answering are counted (the localized method solves its
            systems here, not at fit); None counts nothing.

        Returns
        -------
        ndarray or scipy.sparse.csc_matrix of shape (n, q)
            Column ``j`` embeds ``P(b | q_j)``.
        """
        raise NotImplementedError

    def operator(self, Q, A, kernel, diagnostics=None):
        """The weight matrix of :meth:`weights` as an operator (low rank where it is).

        Parameters
        ----------
        Q, A, kernel, diagnostics
            As for :meth:`weights`.

        Returns
        -------
        Operator
            Of shape (n, q).
        """
        W = self.weights(Q, A, kernel, diagnostics)
        return SparseOperator(W) if sp.issparse(W) else DenseOperator(W)

    def query_chunk(self, n_train):
        """How many queries to answer at once, so that a dense block stays bounded.

        Parameters
        ----------
        n_train : int
            Training pairs.

        Returns
        -------
        int
            Queries a chunk.
        """
        return 4096 if self.sparse else max(1, BLOCK_ENTRIES // n_train)

    def restore(self, A, kernel):
        """After a load, check the fitted fields against the training inputs and rebuild what is
        derived from them.

        A saved file is untrusted, and a method's weights may be loaded on their own: each method
        checks its fields against each other when it is loaded, and here against the inputs its
        holder keeps.

        Parameters
        ----------
        A : ndarray of shape (n, d_in)
            The training inputs.
        kernel : Kernel
            The fitted input kernel.
        """


def _check_columns(Phi, count, what):
    if Phi.shape[1] != count:
        raise ValueError(f"features_: expected {what} ({count}) columns, got {Phi.shape[1]}")


def _check_rows(value, name, n):
    """A fitted array has one row per training input."""
    if value.shape[0] != n:
        raise ValueError(f"{name}: expected one row per training input ({n}), got {value.shape[0]}")


@weight_method("exact")
@persistent("factor_", holds={"factor_": "SPDFactor"})
class ExactWeights(ConditionalWeights):
    """``exact``: the Cholesky factor of ``G_a + n eps I``; O(n^3) once, O(n^2) a query.

    A kernel with explicit features (a Nyström kernel) takes :class:`KernelFeatureWeights`
    instead: the same weights through the push-through identity, with no n x n matrix.
    """

    dense_arrays = 2  # the Gram matrix and its factor

    @classmethod
    def configured(cls, params, kernel):
        return KernelFeatureWeights() if kernel.has_features else cls()

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        self.factor_ = _ridge_factor(kernel_in(A), A.shape[0] * reg, "G_a + n reg I", diagnostics)
        return self

    def weights(self, Q, A, kernel, diagnostics=None):
        return self.factor_.solve(kernel(A, Q))

    def restore(self, A, kernel):
        check_order(self.factor_, A.shape[0], "factor_", "one row per training input")


class _FeatureWeights(ConditionalWeights):
    """``G_a = Phi Phi^T``: ``w = Phi (Phi^T Phi + n eps I)^{-1} phi(a)``, no n x n matrix."""

    def _fit_features(self, Phi, reg, diagnostics):
        self.features_ = Phi
        self.factor_ = _ridge_factor(Phi.T @ Phi, Phi.shape[0] * reg, "Phi^T Phi + n reg I", diagnostics)
        return self

    def _after_load(self):
        if saved_before_fit(self, "factor_"):
            return
        Phi = check_saved_matrix(getattr(self, "features_", None), "features_", allow_1d=False)
        _check_columns(Phi, self.factor_.order, "factor_'s order")

    def restore(self, A, kernel):
        _check_rows(self.features_, "features_", A.shape[0])
        # a query goes through the map the training inputs went through at fit: the first one's
        # features, mapped again, are the saved ones (to rounding)
        first, saved = self._query_features(A[:1], kernel)[0], self.features_[0]
        _check_columns(self.features_, first.shape[0], "a query's features")
        if not np.allclose(first, saved, rtol=1e-6, atol=1e-9 * max(1.0, float(np.abs(saved).max()))):
            raise ValueError("features_: the first training input's saved features are not the ones its map gives now "
                             "(the map or the features were changed)")

    def _query_features(self, Q, kernel):
        raise NotImplementedError

    def _coefficients(self, Q, kernel):
        # (Phi^T Phi + n eps I)^{-1} phi(Q)^T: the weights are Phi times these
        return self.factor_.solve(self._query_features(Q, kernel).T)

    def weights(self, Q, A, kernel, diagnostics=None):
        return self.features_ @ self._coefficients(Q, kernel)

    def operator(self, Q, A, kernel, diagnostics=None):
        return LowRankOperator(self.features_, self._coefficients(Q, kernel).T)


@persistent("features_", "factor_", holds={"factor_": "SPDFactor"})
class KernelFeatureWeights(_FeatureWeights):
    """``exact`` with a kernel that has explicit features: the push-through formula on them."""

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        return self._fit_features(kernel_in.features(A), reg, diagnostics)

    def _query_features(self, Q, kernel):
        return kernel.features(Q)


def _seed(random_state):
    return int(check_rng(random_state).integers(2**31 - 1))


@weight_method("nystrom")
@persistent("nystroem_", "features_", "factor_", holds={"nystroem_": "Nystroem", "factor_": "SPDFactor"})
class NystromWeights(_FeatureWeights):
    """``nystrom``: scikit-learn's ``Nystroem`` features of rank ``rank`` in the push-through formula."""

    def __init__(self, rank=200, random_state=None):
        self.rank = rank
        self.random_state = random_state

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        rank = min(check_int(self.rank, "rank"), A.shape[0])
        metric = kernel_in.sklearn_metric()
        if metric is None:
            raise ValueError(
                f"kernel_in: method='nystrom' needs a kernel scikit-learn's Nystroem knows "
                f"(Gaussian or linear), got {type(kernel_in).__name__}; use method='icf'"
            )
        name, params = metric
        self.nystroem_ = Nystroem(kernel=name, kernel_params=params or None, n_components=rank,
                                  random_state=_seed(self.random_state))
        self._measure_from(A, kernel_in)
        return self._fit_features(self.nystroem_.fit_transform(self._centred(A, kernel_in)), reg, diagnostics)

    def _measure_from(self, A, kernel):
        # scikit-learn measures distances from ||a||^2 + ||b||^2 - 2 a.b, which loses every digit for
        # points far from the origin: a radial kernel, which only sees differences, is handed the
        # points measured from the first training input (a linear kernel is not, as it sees the origin)
        self.origin_ = kernel.coordinates(A[:1])[0] if kernel.is_radial else 0.0

    def restore(self, A, kernel):
        self._measure_from(A, kernel)
        super().restore(A, kernel)

    def _centred(self, X, kernel):
        return kernel.coordinates(X) - self.origin_

    def _query_features(self, Q, kernel):
        return self.nystroem_.transform(self._centred(Q, kernel))


@weight_method("rff")
@persistent("sampler_", "features_", "factor_", holds={"sampler_": "RBFSampler", "factor_": "SPDFactor"})
class FourierWeights(_FeatureWeights):
    """``rff``: ``rank`` random Fourier features of a Gaussian kernel in the push-through formula."""

    def __init__(self, rank=200, random_state=None):
        self.rank = rank
        self.random_state = random_state

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        metric = kernel_in.sklearn_metric()
        if metric is None or metric[0] != "rbf":
            raise ValueError(f"kernel_in: method='rff' needs a Gaussian kernel (random Fourier features sample "
                             f"its spectrum), got {type(kernel_in).__name__}")
        self.sampler_ = RBFSampler(gamma=metric[1]["gamma"], n_components=check_int(self.rank, "rank"),
                                   random_state=_seed(self.random_state))
        return self._fit_features(self.sampler_.fit_transform(kernel_in.coordinates(A)), reg, diagnostics)

    def _query_features(self, Q, kernel):
        return self.sampler_.transform(kernel.coordinates(Q))


@weight_method("knn")
@persistent("n_neighbors_")
class LocalWeights(ConditionalWeights):
    """``knn``: the exact formula on each query's ``n_neighbors`` nearest training inputs."""

    sparse = True

    def __init__(self, n_neighbors=50, reg=1e-3, solver="auto"):
        self.n_neighbors = n_neighbors
        self.reg = reg
        self.solver = solver

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        self.n_neighbors_ = check_int(self.n_neighbors, "n_neighbors", maximum=A.shape[0])
        if not kernel_in.is_radial:
            raise ValueError(
                "kernel_in: method='knn' needs a radial kernel (Gaussian or Laplace), whose "
                "similarity ranks neighbours like Euclidean distance"
            )
        self._index(A, kernel_in)
        return self

    def _index(self, A, kernel):
        # the neighbour index is derived from the training inputs, so it is rebuilt, not saved
        self.neighbors_ = NearestNeighbors(n_neighbors=self.n_neighbors_).fit(kernel.coordinates(A))

    def _after_load(self):
        if saved_before_fit(self, "n_neighbors_"):
            return
        check_int(self.n_neighbors_, "n_neighbors_")
        # the parameters each query's solve reads (fit took them checked from the embedding)
        check_positive(self.reg, "reg")
        check_choice(self.solver, "solver", ("auto", "dense"))

    def restore(self, A, kernel):
        check_int(self.n_neighbors_, "n_neighbors_", maximum=A.shape[0])
        self._index(A, kernel)

    def local_weights(self, Q, A, kernel, return_distance=False, diagnostics=None):
        """Each query's neighbourhood and its weights on it (see
        :meth:`~kbfilter.ConditionalEmbedding.local_weights`).

        Parameters
        ----------
        Q, A, kernel, diagnostics
            As for :meth:`weights`.
        return_distance : bool, default=False
            Also return each query's distance to its farthest neighbour.

        Returns
        -------
        idx, vals[, reach]
        """
        parts = []
        # each query's neighbourhood is its own: answered a block at a time, with a progress bar on
        # long work (a transition learned at every one of 10^6 training states)
        with progress_bar(Q.shape[0], "localized conditional embedding", unit="query") as bar:
            for rows in chunks(Q.shape[0], QUERY_BLOCK):
                found = self.neighbors_.kneighbors(kernel.coordinates(Q[rows]), return_distance=return_distance)
                dist, idx = found if return_distance else (None, found)
                vals = neighbourhood_weights(kernel, Q[rows], A, idx, self.reg, low_rank=self.solver == "auto",
                                             diagnostics=diagnostics)
                parts.append((idx, vals, dist[:, -1]) if return_distance else (idx, vals))
                bar.update(len(idx))
        return tuple(np.concatenate(column) for column in zip(*parts))

    def weights(self, Q, A, kernel, diagnostics=None):
        idx, vals = self.local_weights(Q, A, kernel, diagnostics=diagnostics)
        q, m = idx.shape
        return sp.csc_matrix((vals.ravel(), idx.ravel(), np.arange(0, q * m + 1, m)), shape=(A.shape[0], q))


@weight_method("nw")
@persistent()
class NadarayaWatsonWeights(ConditionalWeights):
    """``nw``: Nadaraya-Watson, ``w = k_a(a) / sum_i k_a(a_i, a)``; nothing to fit."""

    def weights(self, Q, A, kernel, diagnostics=None):
        K = kernel(A, Q)
        total = K.sum(axis=0)
        # A query far from every training input has all similarities underflow to 0: fall back
        # to the nearest training input's output instead of dividing by zero (counted, and warned
        # once a call).
        empty = ~(total > 0)
        if np.any(empty):
            count = int(np.count_nonzero(empty))
            if diagnostics is not None:
                diagnostics["nearest_input"] += count
            warn_user(f"Nadaraya-Watson: every similarity underflowed to 0 for {count:,} of {len(empty):,} queries "
                      f"(far from all training inputs); each takes its nearest training input's output",
                      NumericalWarning)
            coords = kernel.coordinates
            nearest = NearestNeighbors(n_neighbors=1).fit(coords(A)).kneighbors(coords(Q[empty]),
                                                                                 return_distance=False)
            K[:, empty] = 0.0
            K[nearest[:, 0], np.flatnonzero(empty)] = 1.0
            total = K.sum(axis=0)
        return K / total


@weight_method("random")
@persistent("subsample_", "factor_", holds={"factor_": "SPDFactor"})
class SubsampleWeights(ConditionalWeights):
    """``random``: the exact formula on ``rank`` training pairs drawn once at fit."""

    sparse = True

    def __init__(self, rank=200, random_state=None):
        self.rank = rank
        self.random_state = random_state

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        n = A.shape[0]
        m = min(check_int(self.rank, "rank"), n)
        self.subsample_ = np.sort(check_rng(self.random_state).choice(n, m, replace=False))
        self.factor_ = _ridge_factor(kernel_in(A[self.subsample_]), m * reg, "G_sub + m reg I", diagnostics)
        return self

    def _after_load(self):
        if saved_before_fit(self, "factor_"):
            return
        # the indices go into a sparse matrix unchecked: a negative one corrupts memory
        sub, m = getattr(self, "subsample_", None), self.factor_.order
        if not (isinstance(sub, np.ndarray) and sub.dtype.kind in "iu" and sub.shape == (m,) and sub[0] >= 0
                and np.all(np.diff(sub) > 0)):
            raise ValueError(f"subsample_: expected {m} increasing non-negative indices (the training inputs "
                             f"drawn at fit, as many as factor_'s order)")

    def restore(self, A, kernel):
        check_indices(self.subsample_, "subsample_", A.shape[0])

    def weights(self, Q, A, kernel, diagnostics=None):
        sub = self.subsample_
        local = self.factor_.solve(kernel(A[sub], Q))  # (m, q)
        m, q = local.shape
        return sp.csc_matrix((local.T.ravel(), np.tile(sub, q), np.arange(0, q * m + 1, m)), shape=(A.shape[0], q))


@weight_method("icf")
@persistent("L_", "pivots_", "woodbury_", holds={"woodbury_": "Woodbury"})
class IncompleteCholeskyWeights(ConditionalWeights):
    """``icf``: pivoted Cholesky ``G_a ~ L L^T`` of rank ``rank`` and a Woodbury solve."""

    def __init__(self, rank=200):
        self.rank = rank

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        rank = check_int(self.rank, "rank")
        k = kernel_in
        self.L_, self.pivots_ = pivoted_cholesky(k.diag(A), lambda i: k(A, A[i : i + 1])[:, 0], rank, name="rank")
        self.woodbury_ = Woodbury(self.L_, A.shape[0] * reg)
        return self

    def weights(self, Q, A, kernel, diagnostics=None):
        return self.woodbury_.solve(kernel(A, Q))

    def _after_load(self):
        if saved_before_fit(self, "woodbury_"):
            return
        L = check_saved_matrix(getattr(self, "L_", None), "L_", allow_1d=False)
        check_indices(getattr(self, "pivots_", None), "pivots_", L.shape[0], length=L.shape[1], distinct=True)
        if not np.array_equal(self.woodbury_.L, L):
            raise ValueError("woodbury_: expected the solver of the factor L_")

    def restore(self, A, kernel):
        _check_rows(self.L_, "L_", A.shape[0])


@weight_method("sparse")
@persistent("coef_", "n_iter_")
class SparseWeights(ConditionalWeights):
    """``sparse``: the sparse coefficients ``M`` of Grünewälder et al. (2012), ``w(a) = M^T k_a(a)``."""

    dense_arrays = 14  # the Gram matrices, the dense solution and the proximal gradient's iterates

    def __init__(self, gamma=1e-2, max_iter=5000):
        self.gamma = gamma
        self.max_iter = max_iter

    def fit(self, A, B, kernel_in, kernel_out, reg, diagnostics):
        gamma = check_positive(self.gamma, "gamma", allow_zero=True)
        max_iter = check_int(self.max_iter, "max_iter")
        n = A.shape[0]
        K = kernel_in(A)
        dense = _ridge_factor(K.copy(), n * reg, "G_a + n reg I", diagnostics).solve(np.eye(n))
        # sparse_coefficients warns (ConvergenceWarning) when it runs out of iterations
        solution = sparse_coefficients(K, kernel_out(B), dense, gamma, max_iter=max_iter)
        if not solution.converged:
            diagnostics["max_iter"] += 1
        self.coef_, self.n_iter_ = solution.coef, solution.n_iter
        return self

    def _after_load(self):
        if saved_before_fit(self, "coef_"):
            return
        M = self.coef_
        if not (sp.issparse(M) and M.format == "csr" and M.shape[0] == M.shape[1] and M.dtype == np.float64):
            raise ValueError("coef_: expected a square sparse matrix (CSR) of float64")
        if M.nnz:  # (a large gamma may leave no coefficient)
            check_saved_matrix(M.data, "coef_")
        check_int(self.n_iter_, "n_iter_", minimum=0)

    def restore(self, A, kernel):
        _check_rows(self.coef_, "coef_", A.shape[0])

    def weights(self, Q, A, kernel, diagnostics=None):
        rows = np.flatnonzero(np.diff(self.coef_.indptr))  # the inputs M uses
        if rows.size == 0:
            return np.zeros((A.shape[0], Q.shape[0]))
        return np.asarray(self.coef_[rows].T @ kernel(A[rows], Q))


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


def warn_local_fallbacks(events, total):
    """One warning for the neighbourhoods of a call that needed a fallback rule, with their counts.

    Parameters
    ----------
    events : collections.Counter
        The neighbourhoods that needed each rule.
    total : int
        The neighbourhoods solved.
    """
    if events:
        # one warning for the call, not one a neighbourhood (a transition at 10^5 states)
        rules = ", ".join(f"{kind} {count:,}" for kind, count in sorted(events.items()))
        warn_user(f"local Gram: Cholesky failed on {sum(events.values()):,} of {total:,} neighbourhoods, solved by "
                  f"the fallback rules of kbfilter.linalg.spd_factor ({rules})", NumericalWarning)


def neighbourhood_weights(kernel, Q, A, idx, reg, low_rank=True, diagnostics=None, warn=True):
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
    diagnostics : collections.Counter or None, default=None
        Where the neighbourhoods that needed a fallback rule are counted, by rule.
    warn : bool, default=True
        Warn about them (:func:`warn_local_fallbacks`); a caller that solves the neighbourhoods in
        parts warns once for all of them instead.

    Returns
    -------
    ndarray of shape (n_queries, m)
        The weights, row by row in the order of ``idx``.

    Warns
    -----
    NumericalWarning
        Once, with the counts, when some neighbourhoods' ``G_N + m reg I`` needed the library's
        jitter or LU rule (:func:`~kbfilter.linalg.spd_factor`).
    """
    m = idx.shape[1]
    vals = np.empty(idx.shape)
    events = Counter()
    # memory per query is O(m r) on the low-rank path; the dense path sub-chunks itself
    for rows in chunks(Q.shape[0], max(1, BLOCK_ENTRIES // (64 * m))):
        local = A[idx[rows]]
        kq = kernel.paired(local, Q[rows][:, None, :], False)
        vals[rows] = _local_solve(kernel, local, kq, m * reg, events, low_rank=low_rank)
    if diagnostics is not None:
        diagnostics.update(events)
    if warn:
        warn_local_fallbacks(events, len(idx))
    return vals


def _local_solve(kernel, local, kq, ridge, events, low_rank=True):
    """Solve ``(G_N + ridge I) w = k_N(q)`` for a stack of neighbourhoods (algorithms §3, kNN).

    Neighbourhoods are small next to the bandwidth, so their Gram matrices are numerically of low
    rank: a batched pivoted Cholesky with residual trace <= 1e-12 * ridge, then Woodbury, gives the
    exact solution to ~1e-12 relative in O(m r^2) instead of O(m^3). Neighbourhoods whose Gram is
    not of low rank (r > m/4) are solved by a dense batched Cholesky instead. The fallbacks a
    neighbourhood needs are counted in ``events``.
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
    for rows in chunks(np.count_nonzero(dense), max(1, BLOCK_ENTRIES // (m * m))):
        sel = np.flatnonzero(dense)[rows]
        G = kernel.gram_batched(local[sel])
        G[:, np.arange(m), np.arange(m)] += ridge
        try:
            # numpy's batched Cholesky factors the whole stack in one call (scipy's loops over it
            # in Python: 100,000 calls at T = 10^5)
            out[sel] = _batched_cho_solve(np.linalg.cholesky(G), kq[sel])
        except np.linalg.LinAlgError:
            # one of the local systems is not numerically SPD: solve them one by one with the
            # library's jitter/LU rule, counted (the caller warns once)
            factors = [spd_factor(g, name="local Gram", warn=False) for g in G]
            out[sel] = [f.solve(k) for f, k in zip(factors, kq[sel])]
            events.update(f.event for f in factors if f.event is not None)
    return out
