"""Low-rank kernels: a kernel replaced by an explicit finite feature map ``k(a, b) ~ phi(a) . phi(b)``.

With ``r`` features, a Gram matrix on ``n`` points is ``Phi Phi^T`` (``Phi`` of shape (n, r)), and
every regularised solve the library makes with it, ``(Phi Phi^T + c I)^{-1}``, takes the
push-through (Woodbury) form at O(n r^2) once and O(n r) a product. This is how a kernel Bayes
filter trains on 10^5 states.

- :class:`NystromKernel`: the Nyström approximation ``k(a, P) k(P, P)^{-1} k(P, b)`` on landmarks
  ``P`` picked from the data greedily by pivoted Cholesky (each landmark is the point that the
  landmarks so far explain worst). Deterministic; it stops at a rank or once the neglected trace
  ``tr(G - Phi Phi^T)`` is small enough, and with every point a landmark it is the kernel itself.
- :class:`RandomFourierKernel`: random Fourier features of a Gaussian kernel (Rahimi & Recht 2007,
  through scikit-learn's ``RBFSampler``): unbiased, but its error only falls as ``1 / sqrt(r)``.

Both are kernels like the others: fit them on data (which resolves the base kernel's bandwidth
first), call them on two arrays for their Gram matrix, and pass them wherever a kernel goes.

Examples
--------
>>> import numpy as np
>>> from kbfilter import GaussianKernel
>>> X = np.random.default_rng(0).normal(size=(200, 2))
>>> k = NystromKernel(GaussianKernel(), rank=200, tol=0.0).fit(X)
>>> bool(np.allclose(k(X), GaussianKernel().fit(X)(X), atol=1e-8))
True
"""

import numpy as np
from scipy.linalg.lapack import dtrtrs as trtrs
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.validation import check_is_fitted

from ._validation import check_int, check_matrix, check_memory, check_positive, check_rng
from .kernels import Kernel, fitted_kernel
from .linalg import pivoted_cholesky
from .persistence import persistent
from .threads import limited_blas

__all__ = ["NystromKernel", "RandomFourierKernel"]

# entries of the largest temporary array built while computing features
_BLOCK = 2**22


class _FeatureKernel(Kernel):
    """A kernel that is the inner product of an explicit feature map (``features``)."""

    has_features = True

    def __call__(self, A, B=None, check_input=True):
        FA = self.features(A, check_input)
        if B is None:
            G = FA @ FA.T
            return 0.5 * (G + G.T)
        return FA @ self.features(B, check_input).T

    def diag(self, A):
        F = self.features(A)
        return np.einsum("nr,nr->n", F, F)

    def _stacked_features(self, X):
        X = np.asarray(X, dtype=np.float64)
        return self.features(X.reshape(-1, X.shape[-1])).reshape(X.shape[:-1] + (-1,))

    def gram_batched(self, X):
        F = self._stacked_features(X)
        return F @ np.swapaxes(F, 1, 2)

    def paired(self, A, B):
        FA, FB = self._stacked_features(A), self._stacked_features(B)
        return np.einsum("...r,...r->...", FA, FB)


@persistent("kernel_", "landmarks_", "factor_", "residual_trace_", "converged_", "frozen_",
            holds={"kernel": "Kernel", "kernel_": "Kernel"})
class NystromKernel(_FeatureKernel):
    """Nyström approximation of ``kernel`` on landmarks chosen by pivoted Cholesky.

    ``phi(a) = R^{-1} k(P, a)`` with ``R`` the lower Cholesky factor of ``k(P, P)`` (in pivot
    order), so that ``phi(a) . phi(b) = k(a, P) k(P, P)^{-1} k(P, b)``. On the training points the
    features are the pivoted Cholesky factor itself.

    Parameters
    ----------
    kernel : Kernel, optional
        The kernel to approximate (Gaussian with the median heuristic by default); fitted on the
        data given to :meth:`fit` first.
    rank : int
        At most this many landmarks.
    tol : float
        Stop adding landmarks once the neglected trace ``tr(G - Phi Phi^T)`` is at most
        ``tol * tr(G)`` (0: only ``rank`` and round-off stop it). For a solve regularised by
        ``n reg I``, the relative change of ``(G + n reg I)^{-1} G`` is at most
        ``tr(G - Phi Phi^T) / (n reg)``: with the normalised Gaussian kernel (``tr(G) = n``),
        ``tol = 1e-3 * reg`` keeps it below 1e-3.

    Attributes
    ----------
    kernel_ : Kernel
        The fitted base kernel.
    landmarks_ : ndarray of shape (r, d)
    factor_ : ndarray of shape (r, r)
        ``R``, lower triangular.
    residual_trace_ : float
        ``tr(G - Phi Phi^T)`` on the data given to :meth:`fit`.
    converged_ : bool
        False when ``rank`` landmarks were not enough to bring the neglected trace to ``tol``.
    """

    def __init__(self, kernel=None, rank=500, tol=1e-8):
        self.kernel = kernel
        self.rank = rank
        self.tol = tol

    @limited_blas
    def fit(self, X):
        """Fit the base kernel on ``X`` and pick the landmarks among its rows.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The data: the base kernel's bandwidth and the landmark candidates.

        Returns
        -------
        self : NystromKernel
            The fitted kernel.
        """
        X = check_matrix(X, "X", min_samples=1)
        rank = check_int(self.rank, "rank")
        tol = check_positive(self.tol, "tol", allow_zero=True)
        k = fitted_kernel(self.kernel, "kernel", X)
        diag = k.diag(X)
        trace = float(diag.sum())
        L, pivots = pivoted_cholesky(diag, lambda i: k(X, X[i : i + 1])[:, 0], rank, trace_tol=tol * trace, name="rank")
        if L.shape[1] == 0:
            raise ValueError("X: the kernel's Gram matrix is 0 on these points; nothing to approximate")
        self.kernel_ = k
        self.landmarks_ = X[pivots]
        self.factor_ = np.tril(L[pivots])
        self.residual_trace_ = max(trace - float(np.einsum("ij,ij->", L, L)), 0.0)  # no T x r temporary
        self.converged_ = bool(self.residual_trace_ <= tol * trace or L.shape[1] < rank)
        return self

    def __sklearn_is_fitted__(self):
        return hasattr(self, "factor_")

    def _after_load(self):
        # a saved file is untrusted, and the factor goes to LAPACK's triangular solve unchecked
        # every step: it must be the r x r lower-triangular factor of the r landmarks, nonsingular
        if hasattr(self, "factor_"):
            P = check_matrix(self.landmarks_, "landmarks_", allow_1d=False)
            R = check_matrix(self.factor_, "factor_", allow_1d=False)
            if R.shape != (len(P), len(P)) or np.any(np.triu(R, 1)) or not np.all(np.diag(R) > 0):
                raise ValueError(f"factor_: expected the {len(P)} x {len(P)} lower-triangular Cholesky factor of "
                                 f"the landmarks, with a positive diagonal (got shape {R.shape})")
        super()._after_load()

    @property
    def rank_(self):
        """The number of landmarks (features)."""
        check_is_fitted(self)
        return self.factor_.shape[0]

    def features(self, X, check_input=True):
        """The Nyström features, ``k(a, b) ~ phi(a) . phi(b)``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The points.
        check_input : bool, default=True
            False skips the input checks, for points a caller has already checked.

        Returns
        -------
        Phi : ndarray of shape (n, r)
            The base kernel against the landmarks, whitened by the landmarks' Cholesky factor.
        """
        if check_input:
            check_is_fitted(self)
            X = check_matrix(X, "X", n_features=self.landmarks_.shape[1])
        P = self.landmarks_
        K = np.empty((P.shape[0], X.shape[0]))
        # k(P, X) elementwise in blocks: no (r, n, d) array beyond _BLOCK entries, and none of the
        # per-call input checks of a pairwise kernel (this runs once per filtering step)
        step = max(1, _BLOCK // P.size)
        for start in range(0, X.shape[0], step):
            K[:, start : start + step] = self.kernel_.paired(P[:, None, :], X[None, start : start + step, :], False)
        Phi, info = trtrs(self.factor_, K, lower=1)  # LAPACK directly: this runs every filtering step
        if info != 0:
            raise FloatingPointError(f"NystromKernel: the landmarks' Cholesky factor is singular (LAPACK info {info})")
        return Phi.T


@persistent("kernel_", "sampler_", "frozen_", holds={"kernel": "Kernel", "kernel_": "Kernel", "sampler_": "RBFSampler"})
class RandomFourierKernel(_FeatureKernel):
    """Random Fourier features of a Gaussian ``kernel``: ``sqrt(2 / r) cos(W^T a + b)``.

    Parameters
    ----------
    kernel : GaussianKernel, optional
        The Gaussian kernel to approximate (median heuristic by default); fitted on the data
        given to :meth:`fit` first.
    rank : int
        Number of features ``r``; the Gram matrix's error falls as ``1 / sqrt(r)``.
    random_state : int, Generator or None
        Seeds the frequencies.

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter import GaussianKernel
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> k = RandomFourierKernel(GaussianKernel(), rank=20000, random_state=0).fit(X)
    >>> bool(np.max(np.abs(k(X) - GaussianKernel().fit(X)(X))) < 0.05)
    True
    """

    def __init__(self, kernel=None, rank=1000, random_state=None):
        self.kernel = kernel
        self.rank = rank
        self.random_state = random_state

    @limited_blas
    def fit(self, X):
        """Fit the base kernel on ``X`` and draw the frequencies.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The data the base kernel's bandwidth is resolved on.

        Returns
        -------
        self : RandomFourierKernel
            The fitted kernel.
        """
        X = check_matrix(X, "X", min_samples=1)
        rank = check_int(self.rank, "rank")
        k = fitted_kernel(self.kernel, "kernel", X)
        metric = k.sklearn_metric()
        if metric is None or metric[0] != "rbf":
            raise ValueError(f"kernel: random Fourier features need a Gaussian kernel, got {type(k).__name__}")
        seed = int(check_rng(self.random_state).integers(2**31 - 1))
        self.kernel_ = k
        coordinates = k.coordinates(X)
        n, d = coordinates.shape
        # the frequencies (drawn, then scaled: twice d x rank at the peak) and the features of the points
        check_memory(8.0 * rank * (2 * d + 1 + n), "rank", f"{rank:,} random features of {n:,} {d}-dimensional points")
        try:
            self.sampler_ = RBFSampler(gamma=metric[1]["gamma"], n_components=rank, random_state=seed).fit(coordinates)
        except MemoryError:  # where the platform does not say how much memory it has
            raise ValueError(f"rank: {rank} random features of {d}-dimensional points need "
                             f"{8.0 * rank * (d + 1):.3g} bytes of frequencies, more than this "
                             "machine can hold") from None
        return self

    def __sklearn_is_fitted__(self):
        return hasattr(self, "sampler_")

    @property
    def rank_(self):
        """The number of features."""
        check_is_fitted(self)
        return self.sampler_.n_components

    def features(self, X, check_input=True):
        """The random Fourier features, ``k(a, b) ~ phi(a) . phi(b)``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The points.
        check_input : bool, default=True
            False skips kbfilter's input checks (scikit-learn's sampler still checks its own).

        Returns
        -------
        Phi : ndarray of shape (n, r)
            ``sqrt(2 / r) cos(W^T a + b)`` for each point.
        """
        if check_input:
            check_is_fitted(self)
            X = check_matrix(X, "X", n_features=self.sampler_.random_weights_.shape[0])
        return self.sampler_.transform(self.kernel_.coordinates(X))
