"""Kernels and bandwidths (algorithms §1).

Each kernel is a small scikit-learn estimator: hyperparameters in ``__init__``, ``fit(data)``
resolves a ``"median"`` bandwidth, and calling the kernel on two arrays returns their Gram
matrix (:func:`squared_distances`: scikit-learn's Euclidean distances, their arithmetic to the
bit, without the checks it repeats on every call).

Examples
--------
>>> import numpy as np
>>> from kbfilter.kernels import GaussianKernel
>>> X = np.array([[0.0], [1.0], [3.0]])
>>> k = GaussianKernel(bandwidth="median").fit(X)
>>> k.bandwidth_
2.0
>>> np.round(k(X[:1], X), 4)
array([[1.    , 0.8825, 0.3247]])
"""

import copy

import numpy as np
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._validation import check_bool, check_int, check_matrix, check_positive, check_rng, check_vector
from .bandwidth_learning import bayesian_bandwidth
from .persistence import persistent

__all__ = ["Kernel", "GaussianKernel", "LaplaceKernel", "LinearKernel", "median_distance", "median_rows", "as_kernel",
           "fitted_kernel", "squared_distances"]


def squared_distances(A, B):
    """Squared Euclidean distances, as :func:`sklearn.metrics.pairwise.euclidean_distances`
    computes them for float64 arrays (``-2 A B^T + ||a||^2 + ||b||^2``, clipped at 0, in that
    order, so the bits are the same), for arrays already checked. Unlike scikit-learn, it leaves the
    diagonal as computed when ``B`` is ``A`` (scikit-learn sets it to 0); the kernels never pass one
    array twice, so their Gram matrices are scikit-learn's to the bit.

    scikit-learn checks and converts both arrays, and looks up their array namespace, on every
    call: on the few hundred points of a filter step that costs ten times the arithmetic
    (scikit-learn 1.9, 800 points against one: 0.8 ms against 0.06 ms), and a filter calls it
    every step.

    Parameters
    ----------
    A : ndarray of shape (n, d)
    B : ndarray of shape (m, d)

    Returns
    -------
    ndarray of shape (n, m)
        ``||a_i - b_j||^2``.

    Examples
    --------
    >>> squared_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([[25.,  1.]])
    """
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    sq = -2 * (A @ B.T)
    sq += np.einsum("ij,ij->i", A, A)[:, None]
    sq += np.einsum("ij,ij->i", B, B)[None, :]
    return np.maximum(sq, 0.0, out=sq)


def median_distance(X, max_points=1000, random_state=0):
    """Median pairwise Euclidean distance (the median heuristic, algorithms §1).

    For more than ``max_points`` rows the median is taken on a seeded random subsample, so the
    cost is bounded and the result reproducible.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The points, at least two.
    max_points : int, default=1000
        The largest number of points the median looks at.
    random_state : int or None, default=0
        Seed of the subsample.

    Returns
    -------
    float
        The median of the pairwise distances.

    Examples
    --------
    >>> median_distance([[0.0], [1.0], [3.0]])
    2.0
    """
    X = check_matrix(X, "X", min_samples=2)
    return float(np.median(pdist(X[median_rows(X.shape[0], max_points, random_state)])))


def median_rows(n, max_points=1000, random_state=0):
    """The rows :func:`median_distance` looks at among ``n``: all of them, or a seeded subsample.

    Data too large to pass whole (a dask array) give the median heuristic these rows alone (see
    ``fit_summary`` of the radial kernels), with the same result.

    Parameters
    ----------
    n : int
        The number of rows.
    max_points : int, default=1000
        The most rows.
    random_state : int or None, default=0
        Seed of the subsample.

    Returns
    -------
    ndarray of int
        The rows, in the order the subsample draws them.

    Examples
    --------
    >>> median_rows(3).tolist()
    [0, 1, 2]
    >>> len(median_rows(10**6, max_points=100))
    100
    """
    max_points = check_int(max_points, "max_points", minimum=2)
    if n > max_points:
        return check_rng(random_state).choice(n, max_points, replace=False)
    return np.arange(n)


def _check_pairs(A, B):
    """Refuse points :meth:`Kernel.paired` cannot pair: not finite, no coordinate axis, another
    number of coordinates, or leading shapes that do not broadcast."""
    for X, name in ((A, "A"), (B, "B")):
        if X.ndim == 0 or not np.all(np.isfinite(X)):
            raise ValueError(f"{name}: expected finite points of shape (..., d), got "
                             f"{'a scalar' if X.ndim == 0 else 'NaN or infinite values'}")
    try:
        np.broadcast_shapes(A.shape, B.shape)
    except ValueError:
        ok = False
    else:
        ok = A.shape[-1] == B.shape[-1]
    if not ok:
        raise ValueError(f"A, B: expected points of shapes (..., d) that broadcast together, got {A.shape} and "
                         f"{B.shape}")


class Kernel(BaseEstimator):
    """Base class: ``k(A, B)`` returns the Gram matrix ``[k(a_i, b_j)]``."""

    #: True when ``k(a, b)`` depends only on ``||c(a) - c(b)||`` and decreases with it, where ``c`` is
    #: :meth:`coordinates`: kernel similarity ranks neighbours exactly as Euclidean distance between
    #: the points' coordinates does (algorithms §3, kNN).
    is_radial = False
    #: True when the kernel is ``k(a, b) = phi(a) . phi(b)`` with an explicit finite feature map
    #: (:meth:`features`): Gram matrices are then ``Phi Phi^T`` and solves can use the
    #: push-through (Woodbury) form, O(n r^2) instead of O(n^3).
    has_features = False

    def features(self, X, check_input=True):
        """The explicit feature map, for kernels that have one (:attr:`has_features`).

        Parameters
        ----------
        X : array-like of shape (n, d)
            The points.
        check_input : bool, default=True
            False skips the input checks, for points a caller has already checked.

        Returns
        -------
        Phi : ndarray of shape (n, r)
            Features with ``k(a, b) = phi(a) . phi(b)``.
        """
        raise TypeError(f"{type(self).__name__} has no explicit finite feature map")

    def coordinates(self, X):
        """The points in the coordinates the kernel measures distances in.

        The points themselves, except for a radial kernel with ``standardise=True``, which divides
        each column by its standard deviation in the fit data. Code that goes around the kernel
        to scikit-learn (a neighbour index, ``Nystroem``, ``RBFSampler`` with
        :meth:`sklearn_metric`) hands it these coordinates.

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The points (already checked).

        Returns
        -------
        ndarray of shape (n, d)
            Their coordinates.
        """
        return X

    def fit(self, X):
        """Resolve data-dependent hyperparameters (a kernel without any has nothing to do).

        Parameters
        ----------
        X : array-like of shape (n, d)
            The data the hyperparameters are resolved on.

        Returns
        -------
        self : Kernel
            The fitted kernel.
        """
        return self

    def __sklearn_is_fitted__(self):
        """True when the kernel can be evaluated: no hyperparameter is waiting for data."""
        return True

    def frozen(self):
        """This fitted kernel, to be handed on as it is: cloning returns it and fitting leaves it
        unchanged (scikit-learn's ``FrozenEstimator`` idea).

        A filter fits its state kernel once and hands the frozen kernel to every part that uses it
        (the rule, the transition, the point estimate), so they share one bandwidth (and, for a
        Nyström kernel, one set of landmarks) and nothing is fitted twice.

        Returns
        -------
        Kernel
            A shallow copy that :func:`fitted_kernel` and :func:`sklearn.base.clone` return as it is.
        """
        check_is_fitted(self)
        frozen = copy.copy(self)
        frozen.frozen_ = True
        return frozen

    def __sklearn_clone__(self):
        if getattr(self, "frozen_", False):
            return self
        return super().__sklearn_clone__()

    def _after_load(self):
        # a frozen kernel is saved as one: a loaded filter whose parts shared it and that fits
        # again (partial_fit) must not refit it where the saved filter kept it
        if hasattr(self, "frozen_") and (self.frozen_ is not True or not self.__sklearn_is_fitted__()):
            raise ValueError(f"frozen_: expected True, on a fitted kernel; got {self.frozen_!r}")

    def __call__(self, A, B=None, check_input=True):
        """The Gram matrix ``[k(a_i, b_j)]`` (of ``A`` with itself when ``B`` is None, made exactly
        symmetric for Cholesky factorisations, algorithms §8); ``check_input=False`` skips the
        input checks, for arrays a caller has already checked."""
        if check_input:
            A = check_matrix(A, "A")
        if B is None:
            G = self._gram(A, A)
            return 0.5 * (G + G.T)  # exact symmetry for Cholesky (algorithms §8)
        if check_input:
            B = check_matrix(B, "B", n_features=A.shape[1])
        return self._gram(A, B)

    def diag(self, A):
        """The kernel of every point with itself.

        Parameters
        ----------
        A : array-like of shape (n, d)
            The points.

        Returns
        -------
        ndarray of shape (n,)
            ``k(a_i, a_i)``.
        """
        A = self.coordinates(check_matrix(A, "A"))
        return self._paired_sq(np.zeros(A.shape[0]), A)

    def gram_batched(self, X):
        """Gram matrices of a stack of point sets.

        Parameters
        ----------
        X : array-like of shape (q, m, d)
            ``q`` sets of ``m`` points each.

        Returns
        -------
        ndarray of shape (q, m, m)
            The Gram matrix of each set.
        """
        X = self.coordinates(np.asarray(X, dtype=np.float64))
        if self.is_radial:  # distances from one point of each set (see _RadialKernel._gram)
            X = X - X[:, :1, :]
        sq = np.einsum("qmd,qmd->qm", X, X)
        inner = X @ np.swapaxes(X, 1, 2)
        return self._from_parts(sq[:, :, None] + sq[:, None, :] - 2.0 * inner, inner)

    def paired(self, A, B, check_input=True):
        """The kernel of matching points, with broadcasting.

        Parameters
        ----------
        A, B : array-like of shapes (..., d) that broadcast together
            The points; the last axis holds the coordinates.
        check_input : bool, default=True
            False skips the checks (finite points, shapes that broadcast), for arrays a caller has
            already checked.

        Returns
        -------
        ndarray of the broadcast shape without the last axis
            ``k(a, b)`` for each pair.
        """
        A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
        if check_input:
            _check_pairs(A, B)
        A, B = self.coordinates(A), self.coordinates(B)
        diff = A - B
        return self._from_parts(np.einsum("...d,...d->...", diff, diff), np.einsum("...d,...d->...", A, B))

    def _paired_sq(self, sqdist, A):
        return self._from_parts(sqdist, np.einsum("nd,nd->n", A, A))

    def sklearn_metric(self):
        """The scikit-learn kernel equal to this one on :meth:`coordinates`, for ``pairwise_kernels``
        and ``Nystroem``.

        Returns
        -------
        (str, dict) or None
            The kernel's name and parameters in scikit-learn, or ``None`` when scikit-learn has no
            named kernel equal to this one.
        """
        return None


# a bandwidth whose square is not a normal float makes every kernel value 0 or 1: refused
_SMALLEST_BANDWIDTH = 1e-150
# points farther than this many bandwidths from the first point are compared by their differences
_FAR = 1e6


class _RadialKernel(Kernel):
    is_radial = True
    # whether bandwidth="bkl" (Bayesian kernel learning) applies: Gaussian kernels only
    _learnable = False

    def __init__(self, bandwidth="median", scale=1.0, max_median_points=1000, random_state=0, standardise=False):
        self.bandwidth = bandwidth
        self.scale = scale
        self.max_median_points = max_median_points
        self.random_state = random_state
        self.standardise = standardise

    def fit(self, X):
        """Resolve the bandwidth: ``scale`` times the median distance of ``X`` (``"median"``),
        its Bayesian kernel learning bandwidth (``"bkl"``, Gaussian kernel), or ``bandwidth``;
        with ``standardise``, first the columns' standard deviations, and the bandwidth on the
        standardised data.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The data of the median heuristic or of Bayesian kernel learning (not used for a
            float bandwidth), and of the standard deviations.

        Returns
        -------
        self : Kernel
            The kernel, with ``bandwidth_`` (and ``column_scale_``) set.
        """
        self._check_params()
        X = check_matrix(X, "X", min_samples=2 if self.standardise else 1)
        # the bandwidth is measured on points of this many coordinates: others are refused, not measured
        self.n_features_in_ = X.shape[1]
        if self.standardise:
            # scikit-learn's scaler leaves a constant column's scale at 1 (it adds nothing to distances)
            self.column_scale_ = StandardScaler(with_mean=False).fit(X).scale_
            X = X / self.column_scale_
        elif hasattr(self, "column_scale_"):
            del self.column_scale_  # refitted without standardising
        if isinstance(self.bandwidth, str) and self.bandwidth == "bkl" and self._learnable:
            X = check_matrix(X, "X", min_samples=4)
            self.bandwidth_ = check_positive(self.scale, "scale") * bayesian_bandwidth(
                X, random_state=self.random_state).bandwidth
            return self
        return self._resolve_bandwidth(lambda: median_distance(X, self.max_median_points, self.random_state))

    def fit_summary(self, column_std, sample):
        """Fit from a summary of data too large to pass whole (e.g. a dask array's reductions):
        the columns' standard deviations and the rows :func:`median_rows` picks. The result is
        :meth:`fit` on all the data, to the round-off of the standard deviations.

        Parameters
        ----------
        column_std : array-like of shape (d,)
            Each column's standard deviation over all the data (divided by n, not n - 1).
        sample : array-like of shape (m, d)
            The rows ``median_rows(n, max_median_points, random_state)`` of the data.

        Returns
        -------
        self : Kernel
            The kernel, with ``bandwidth_`` (and ``column_scale_``) set.
        """
        self._check_params()
        sample = check_matrix(sample, "sample", min_samples=2)
        column_std = check_vector(column_std, "column_std", length=sample.shape[1])
        if isinstance(self.bandwidth, str) and self.bandwidth == "bkl":
            raise ValueError("bandwidth: 'bkl' needs all the data; give 'median' or a float to fit from a summary")
        self.n_features_in_ = sample.shape[1]
        if self.standardise:
            # the scaler's rule: a column that does not vary keeps scale 1
            self.column_scale_ = np.where(column_std < 10 * np.finfo(np.float64).eps, 1.0, column_std)
            sample = sample / self.column_scale_
        elif hasattr(self, "column_scale_"):
            del self.column_scale_
        return self._resolve_bandwidth(lambda: float(np.median(pdist(sample))))

    def _check_params(self):
        check_positive(self.scale, "scale")
        check_bool(self.standardise, "standardise")
        check_int(self.max_median_points, "max_median_points", minimum=2)
        check_rng(self.random_state)

    def _resolve_bandwidth(self, median):
        scale = check_positive(self.scale, "scale")
        if isinstance(self.bandwidth, str):
            if self.bandwidth != "median":
                expected = "'median' or 'bkl'" if self._learnable else "'median'"
                raise ValueError(f"bandwidth: expected a positive float, {expected}, got {self.bandwidth!r}")
            med = median()
            if not med > 0:
                raise ValueError(
                    "bandwidth: the median pairwise distance of the data is 0 (constant or "
                    "duplicated points, or values too close together to tell apart in float64: express them "
                    "in smaller units); pass a positive float bandwidth instead of 'median'"
                )
            self.bandwidth_ = scale * med
        else:
            self.bandwidth_ = scale * check_positive(self.bandwidth, "bandwidth")
        if not _SMALLEST_BANDWIDTH <= self.bandwidth_ <= 1 / _SMALLEST_BANDWIDTH:
            raise ValueError(f"bandwidth: expected scale x bandwidth between {_SMALLEST_BANDWIDTH:g} and "
                             f"{1 / _SMALLEST_BANDWIDTH:g}, got {self.bandwidth_!r} (its square over- or underflows); "
                             f"rescale the data instead")
        return self

    def __sklearn_is_fitted__(self):
        if self.standardise and not hasattr(self, "column_scale_"):
            return False
        return hasattr(self, "bandwidth_") or not isinstance(self.bandwidth, str)

    def _after_load(self):
        # a saved file is untrusted: its fitted values must be ones fit could have produced
        check_bool(self.standardise, "standardise")
        if hasattr(self, "bandwidth_"):
            b = self.bandwidth_
            if not (isinstance(b, float) and _SMALLEST_BANDWIDTH <= b <= 1 / _SMALLEST_BANDWIDTH):
                raise ValueError(f"bandwidth_: expected a float between {_SMALLEST_BANDWIDTH:g} and "
                                 f"{1 / _SMALLEST_BANDWIDTH:g}, got {b!r}")
        if self.standardise:
            c = getattr(self, "column_scale_", None)
            if not (isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == np.float64 and c.size > 0
                    and np.all(np.isfinite(c)) and np.all(c > 0)):
                raise ValueError("column_scale_: expected a non-empty 1-D float array of positive finite numbers")
        if hasattr(self, "n_features_in_"):  # a file saved before the kernel recorded it has none
            n = self.n_features_in_
            if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
                raise ValueError(f"n_features_in_: expected a positive integer, got {n!r}")
            if self.standardise and n != self.column_scale_.shape[0]:
                raise ValueError(f"n_features_in_: expected {self.column_scale_.shape[0]} (one column scale each), "
                                 f"got {n}")
        super()._after_load()

    def coordinates(self, X):
        """The points with each column divided by its standard deviation in the fit data when
        ``standardise`` is True, else the points themselves (see :meth:`Kernel.coordinates`).

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The points (already checked).

        Returns
        -------
        ndarray of shape (n, d)
            Their coordinates.
        """
        self._check_width(X, "X")
        if not self.standardise:
            return X
        return X / self._column_scale()

    def _check_width(self, X, name):
        """A ValueError unless the points ``X`` have the fit data's number of coordinates (when the
        kernel was fitted): the bandwidth of the fit data means nothing for points of another dimension,
        and one scale a column would be broadcast over them. A file saved before the kernel recorded
        ``n_features_in_`` gives the width by its column scales, if it has them."""
        n = getattr(self, "n_features_in_", None)
        if n is None and hasattr(self, "column_scale_"):
            n = self.column_scale_.shape[0]
        if n is not None and X.shape[-1] != n:
            raise ValueError(f"{name}: expected {n} columns (the fit data's), got {X.shape[-1]}")

    def _column_scale(self):
        """``column_scale_`` of a standardised kernel, or NotFittedError before ``fit`` (the points'
        width is :meth:`_check_width`'s to check)."""
        if not hasattr(self, "column_scale_"):
            raise NotFittedError(f"{type(self).__name__}(standardise=True) must be fitted to data before use")
        return self.column_scale_

    def in_bandwidths(self, X):
        """The points in units of the bandwidth (each column in its own when ``standardise``): the
        kernel is then a function of the squared Euclidean distance between these coordinates
        alone (:meth:`of_squared_distance`). For a caller that keeps many points and compares small
        subsets of them again and again (the local kernel Bayes filter's step).

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The points (already checked; centre them first if they lie far from the origin).

        Returns
        -------
        ndarray of shape (n, d)
            Their coordinates in bandwidths.
        """
        s = self._resolved()
        self._check_width(X, "X")
        if self.standardise:
            s = s * self._column_scale()
        return X / s

    def of_squared_distance(self, sq, out=None):
        """The kernel at squared distances measured in bandwidths (see :meth:`in_bandwidths`).

        Parameters
        ----------
        sq : ndarray
            Squared distances (negative round-off is read as 0).
        out : ndarray, optional
            Where to write the result (``sq`` itself is allowed: no temporary array is made).

        Returns
        -------
        ndarray of the shape of ``sq``
            ``k`` at each.
        """
        return self._unit_profile(np.maximum(sq, 0.0, out=out))

    def _resolved(self):
        if self.standardise:
            self._column_scale()  # the bandwidth is in standard deviations: meaningless before fit
        if hasattr(self, "bandwidth_"):
            return self.bandwidth_
        if isinstance(self.bandwidth, str):
            raise NotFittedError(
                f"{type(self).__name__}(bandwidth={self.bandwidth!r}) must be fitted to data before use"
            )
        return check_positive(self.scale, "scale") * check_positive(self.bandwidth, "bandwidth")

    def _from_parts(self, sqdist, inner):
        return self._profile(np.maximum(sqdist, 0.0), self._resolved())

    def _gram(self, A, B):
        # Distances come from ||a||^2 + ||b||^2 - 2 a.b, which loses every digit to cancellation for
        # points far from the origin (1e8 and 1e8 + 1 would be at distance 0) and overflows to NaN past
        # 1e154: measure them from one of the points, in bandwidths.
        s = self._resolved()
        self._check_width(A, "A")
        if self.standardise:
            s = s * self._column_scale()  # one bandwidth per column, in the data's units
        origin = A[0]
        with np.errstate(over="ignore", invalid="ignore"):  # what overflows here is measured again below
            a, b = (A - origin) / s, (B - origin) / s
            # far from A[0] the expansion's rounding (a relative 1e-16 of ||a||^2) is no longer small
            # against one squared bandwidth, and past 1e154 it is inf - inf: such rows and columns are
            # measured by their differences, whose squares at worst overflow to a kernel value of 0
            far_a = np.flatnonzero(~(np.max(np.abs(a), axis=1) <= _FAR))
            far_b = np.flatnonzero(~(np.max(np.abs(b), axis=1) <= _FAR))
            a[far_a], b[far_b] = 0.0, 0.0
            G = self._unit_gram(a, b)
            for i in far_a:
                G[i] = self._unit_profile(np.sum(np.square((A[i] - B) / s), axis=1))
            for j in far_b:
                G[:, j] = self._unit_profile(np.sum(np.square((A - B[j]) / s), axis=1))
        return G


@persistent("bandwidth_", "column_scale_", "n_features_in_", "frozen_")
class GaussianKernel(_RadialKernel):
    """Gaussian (RBF) kernel ``exp(-||a - b||^2 / (2 s^2))`` (algorithms §1).

    Parameters
    ----------
    bandwidth : float, "median" or "bkl"
        ``s``; ``"median"`` takes the median pairwise distance of the data given to ``fit``;
        ``"bkl"`` the bandwidth of Bayesian kernel learning
        (:func:`~kbfilter.bandwidth_learning.bayesian_bandwidth`): the maximiser of the marginal
        pseudolikelihood of the data's empirical kernel mean, which follows the data's own
        scale where the median follows their spread (e.g. tight clusters far apart).
    scale : float
        Multiplies the bandwidth: ``s = scale * bandwidth``.
    max_median_points : int
        Size of the seeded subsample the median heuristic looks at.
    random_state : int or None
        Seed of that subsample, and of the points ``"bkl"`` holds out.
    standardise : bool, default=False
        Measure distances between standardised points: ``fit`` divides each column by its
        standard deviation (``column_scale_``) before resolving the bandwidth, so ``s`` is in
        standard deviations and each column has its own bandwidth ``s * column_scale_[j]`` in
        the data's units. Columns in different units (an angle and an angular velocity) then
        count alike; on one column, or columns of equal spread, the kernel is unchanged. The
        filters' default state kernel is standardised.

    Attributes
    ----------
    bandwidth_ : float
        The bandwidth ``s`` ``fit`` resolved (``scale`` included).
    column_scale_ : ndarray of shape (n_features,)
        With ``standardise``: the fit data's column standard deviations.
    n_features_in_ : int
        The fit data's number of columns: a fitted kernel refuses points of another dimension,
        whose distances its bandwidth was not measured for.

    Examples
    --------
    >>> k = GaussianKernel(bandwidth=1.0)
    >>> round(float(k([[0.0, 0.0]], [[1.0, 1.0]])[0, 0]), 12)  # exp(-2 / 2), to the libm's last digit
    0.367879441171
    """

    _learnable = True

    @staticmethod
    def _unit_gram(A, B):
        # scikit-learn's rbf_kernel(A, B, gamma=0.5), to the bit
        sq = squared_distances(A, B)
        sq *= -0.5
        return np.exp(sq, out=sq)

    def sklearn_metric(self):
        """scikit-learn's ``"rbf"`` with ``gamma = 1 / (2 s^2)``.

        Returns
        -------
        (str, dict)
            The name and parameters.
        """
        s = self._resolved()
        return "rbf", {"gamma": 1.0 / (2.0 * s * s)}

    @staticmethod
    def _profile(sqdist, s):
        return np.exp(-sqdist / (2.0 * s * s))

    @staticmethod
    def _unit_profile(sq):
        # in place: exp(-sq / 2)
        sq *= -0.5
        return np.exp(sq, out=sq)


@persistent("bandwidth_", "column_scale_", "n_features_in_", "frozen_")
class LaplaceKernel(_RadialKernel):
    """Laplace kernel ``exp(-||a - b|| / s)`` with the Euclidean norm (algorithms §1).

    (scikit-learn's ``laplacian_kernel`` uses the L1 norm; this one does not.)

    Parameters
    ----------
    bandwidth : float or "median"
        ``s``; ``"median"`` takes the median pairwise distance of the data given to ``fit``.
    scale : float
        Multiplies the bandwidth: ``s = scale * bandwidth``.
    max_median_points : int
        Size of the seeded subsample the median heuristic looks at.
    random_state : int or None
        Seed of that subsample.
    standardise : bool, default=False
        Measure distances between standardised points (each column divided by its standard
        deviation in the fit data), as for :class:`GaussianKernel`.

    Attributes
    ----------
    bandwidth_, column_scale_, n_features_in_
        As for :class:`GaussianKernel`.

    Examples
    --------
    >>> k = LaplaceKernel(bandwidth=2.0)
    >>> round(float(k([[0.0, 0.0]], [[3.0, 4.0]])[0, 0]), 12)  # exp(-5 / 2)
    0.082084998624
    """

    @staticmethod
    def _unit_gram(A, B):
        return np.exp(-np.sqrt(squared_distances(A, B)))

    @staticmethod
    def _profile(sqdist, s):
        return np.exp(-np.sqrt(sqdist) / s)

    @staticmethod
    def _unit_profile(sq):
        # in place: exp(-sqrt(sq))
        np.sqrt(sq, out=sq)
        sq *= -1.0
        return np.exp(sq, out=sq)


@persistent("frozen_")
class LinearKernel(Kernel):
    """Linear kernel ``a . b``: weights over points become plain weighted means (algorithms §1).

    Examples
    --------
    >>> LinearKernel()([[1.0, 2.0]], [[3.0, 4.0]])
    array([[11.]])
    """

    has_features = True

    def features(self, X, check_input=True):
        """The points themselves: ``a . b`` is the inner product of the identity feature map.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The points.
        check_input : bool, default=True
            False skips the input checks.

        Returns
        -------
        ndarray of shape (n, d)
            ``X`` as a float array.
        """
        return check_matrix(X, "X") if check_input else X

    def _gram(self, A, B):
        return A @ B.T  # scikit-learn's linear_kernel

    def sklearn_metric(self):
        """scikit-learn's ``"linear"`` kernel.

        Returns
        -------
        (str, dict)
            The name and (no) parameters.
        """
        return "linear", {}

    def _from_parts(self, sqdist, inner):
        return inner


def _from_sklearn(kernel, name):
    """kbfilter's equal of a scikit-learn Gaussian-process kernel (``RBF``, ``Matern``), or None."""
    from sklearn.gaussian_process.kernels import RBF

    if not isinstance(kernel, RBF):  # Matern is a subclass of RBF
        return None
    length_scale = np.asarray(kernel.length_scale, dtype=np.float64)
    if length_scale.size != 1:
        raise ValueError(f"{name}: an anisotropic {type(kernel).__name__} (one length scale per feature) is not "
                         f"radial; rescale the features instead and pass one length scale")
    bandwidth = float(length_scale.ravel()[0])
    nu = getattr(kernel, "nu", np.inf)
    if nu == np.inf:   # RBF, and Matern's limit: exp(-d^2 / (2 l^2))
        return GaussianKernel(bandwidth=bandwidth)
    if nu == 0.5:      # exp(-d / l)
        return LaplaceKernel(bandwidth=bandwidth)
    raise ValueError(f"{name}: Matern(nu={nu}) has no kbfilter equal; use nu=0.5 (LaplaceKernel) or nu=inf "
                     f"(GaussianKernel), or RBF")


def as_kernel(kernel, name, standardise=False):
    """An unfitted clone of ``kernel`` (Gaussian with the median heuristic when None, on
    standardised columns when ``standardise``).

    scikit-learn's ``RBF(length_scale=l)`` and ``Matern(length_scale=l, nu=0.5 or inf)`` are
    accepted and become :class:`GaussianKernel` / :class:`LaplaceKernel` with bandwidth ``l``,
    which compute the same values (and which the filter's ``scale`` multiplies). Any other value
    that is not a kbfilter kernel is rejected with an error naming ``name``.

    Parameters
    ----------
    kernel : Kernel, scikit-learn RBF or Matern, or None
        The kernel.
    name : str
        The argument's name, for error messages.
    standardise : bool, default=False
        The ``standardise`` of the default kernel (a kernel passed in keeps its own).

    Returns
    -------
    Kernel
        An unfitted kbfilter kernel.
    """
    from sklearn.base import clone

    if kernel is None:
        return GaussianKernel("median", standardise=standardise)
    converted = _from_sklearn(kernel, name)
    if converted is not None:
        return converted
    if not isinstance(kernel, Kernel):
        raise ValueError(f"{name}: expected a kbfilter Kernel (or scikit-learn's RBF or Matern), got "
                         f"{type(kernel).__name__}")
    return clone(kernel)


def fitted_kernel(kernel, name, data):
    """:func:`as_kernel`, fitted on ``data``; fitting errors name ``name``. A frozen kernel
    (:meth:`Kernel.frozen`) is returned as it is."""
    if getattr(kernel, "frozen_", False):
        return kernel
    kernel = as_kernel(kernel, name)
    try:
        return kernel.fit(data)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc
