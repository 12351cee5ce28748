"""Kernel mean of a weighted sample, ``m = sum_i w_i k(., x_i)`` (algorithms §2).

Weights may be negative and need not sum to one: what the kernel rules return is a signed
measure. Point estimates, expectations, distances and resampling all live here.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.base import clone

from ._validation import check_int, check_matrix, check_positive, check_real_output, check_vector
from ._warnings import warn_user
from .kernels import GaussianKernel, Kernel
from .linalg import NumericalWarning

__all__ = ["KernelMean", "herd", "normalise_weights", "clipped_weights", "probability_weights", "weighted_covariance",
           "weighted_cross_covariance", "HERD_GRAM_ENTRIES", "MAX_HERD_PICKS"]

#: :meth:`KernelMean.herd` computes the candidates' Gram matrix at once up to this many entries
#: (32 MB), and one column per pick beyond
HERD_GRAM_ENTRIES = 4_000_000
#: the most points herding picks (as many as a particle filter holds): each pick is a pass over the
#: candidates, so a larger ``m`` would run for hours
MAX_HERD_PICKS = 10**6


def herd(target, column, m, distinct=False):
    """Kernel herding over a finite candidate set (Chen, Welling and Smola 2010; algorithms §2).

    Greedily picks ``j_{t+1} = argmax_j target_j - (1/(t+1)) sum_{s<=t} k(c_j, c_{j_s})``, so the
    equally weighted picks approach the embedding whose values at the candidates are ``target``.

    Parameters
    ----------
    target : ndarray of shape (c,)
        The embedding evaluated at each candidate, ``m(c_j)``, for an embedding of total mass 1.
    column : callable
        ``column(j)`` returns ``k(c_i, c_j)`` for every candidate ``i``, an array of shape (c,).
    m : int
        The number of picks (at most :data:`MAX_HERD_PICKS`).
    distinct : bool, default=False
        Pick each candidate at most once (then ``m`` is at most the number of candidates), as
        when choosing a subset of a sample; otherwise a candidate may be picked again.

    Returns
    -------
    ndarray of int, shape (m,)
        The indices of the picked candidates, in order.

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[1.0, 0.1], [0.1, 1.0]])
    >>> herd(np.array([0.6, 0.4]), lambda j: G[:, j], 3).tolist()
    [0, 1, 0]
    """
    m = check_int(m, "m", maximum=MAX_HERD_PICKS)
    # not through check_vector: a filter herds every step, and its boundary checks are counted
    target = np.asarray(target, dtype=np.float64)
    if target.ndim != 1 or target.size == 0:
        raise ValueError(f"target: expected the embedding's values at the candidates, a non-empty 1-D array, got "
                         f"shape {target.shape}")
    if not np.all(np.isfinite(target)):
        raise ValueError("target: contains NaN or infinite values")
    if not callable(column):
        raise ValueError(f"column: expected a callable column(j) -> k(c_i, c_j) for every i, got "
                         f"{type(column).__name__}")
    if distinct and m > target.shape[0]:
        raise ValueError(f"m: expected at most {target.shape[0]} distinct picks (the candidates), got {m}")
    picked = np.empty(m, dtype=np.intp)
    running, score = np.zeros_like(target), np.empty_like(target)
    free = np.ones(target.shape, dtype=bool)
    for t in range(m):
        # the score in one buffer: a filter herds a thousand picks a step, and the same two
        # operations as target - running / (t + 1) give the same numbers
        np.subtract(target, np.divide(running, t + 1, out=score), out=score)
        if distinct:
            score[~free] = -np.inf
        j = int(score.argmax())
        picked[t] = j
        free[j] = False
        values = column(j)
        if np.shape(values) != target.shape:  # a scalar or a row would broadcast into every candidate
            raise ValueError(f"column: expected column({j}) of shape {target.shape}, got {np.shape(values)}")
        running += values
    if not np.all(np.isfinite(running)):  # once, not every pick: a NaN stays in the running sum
        raise ValueError("column: returned values that are not finite")
    return picked


def clipped_weights(w):
    """The clipped, normalised weights ``p_i = max(w_i, 0) / sum_j max(w_j, 0)``.

    Parameters
    ----------
    w : ndarray of shape (n,)
        Signed weights.

    Returns
    -------
    ndarray of shape (n,) or None
        ``p``, or None when no weight is positive.

    Examples
    --------
    >>> clipped_weights(np.array([-1.0, 1.0, 3.0]))
    array([0.  , 0.25, 0.75])
    """
    p = np.maximum(w, 0.0)
    total = p.sum()
    return p / total if total > 0 else None


def normalise_weights(w):
    """Weights summing to one for a point estimate, and the rule that gave them.

    ``w / sum(w)`` when the sum is positive (rule None); otherwise the normalised mean is
    undefined and the clipped normalised weights are used (rule ``"clipped"``, see
    :func:`clipped_weights`); if no weight is positive there is nothing to normalise (``None``,
    rule ``"collapsed"``).

    Parameters
    ----------
    w : ndarray of shape (n,)

    Returns
    -------
    p : ndarray of shape (n,) or None
        Weights summing to one (None when collapsed).
    rule : {None, "clipped", "collapsed"}

    Examples
    --------
    >>> normalise_weights(np.array([-2.0, 1.0, 3.0]))
    (array([-1. ,  0.5,  1.5]), None)
    >>> normalise_weights(np.array([-3.0, 1.0, 1.0]))
    (array([0. , 0.5, 0.5]), 'clipped')
    """
    total = w.sum()
    if total > 0:
        return w / total, None
    p = clipped_weights(w)
    return (None, "collapsed") if p is None else (p, "clipped")


def probability_weights(weights, name="weights"):
    """Weights given for a probability (a prior), scaled to sum to one.

    Kernel Bayes' rule's answer depends on the prior's total mass (its regularisers do not scale
    with it), so a prior given with unnormalised weights (importance weights, counts) is read as
    the probability they describe. Signed weights are allowed; a sum that is not positive
    describes no probability and is refused.

    Parameters
    ----------
    weights : ndarray of shape (n,)
        The weights.
    name : str, default="weights"
        How the error names them.

    Returns
    -------
    ndarray of shape (n,)
        ``weights / sum(weights)``.

    Examples
    --------
    >>> probability_weights(np.array([2.0, 6.0]))
    array([0.25, 0.75])
    """
    total = float(np.sum(weights))
    if not total > 0:
        raise ValueError(f"{name}: expected weights with a positive sum (those of a probability), got sum {total:.4g}")
    return weights / total


def weighted_covariance(points, p=None):
    """Covariance of ``points`` (n, d) under probability weights ``p`` (n,) summing to one.

    Parameters
    ----------
    points : ndarray of shape (n, d)
        The points.
    p : ndarray of shape (n,) or None, default=None
        Their probability weights; None weighs them equally.

    Returns
    -------
    ndarray of shape (d, d)
        The covariance (normalised by the weights' sum, one: no small-sample correction).

    Examples
    --------
    >>> weighted_covariance(np.array([[0.0], [2.0]]), np.array([0.5, 0.5]))
    array([[1.]])
    """
    return weighted_cross_covariance(points, points, p)


def weighted_cross_covariance(A, B, p=None):
    """Cross-covariance of paired points ``A`` (n, d) and ``B`` (n, e) under probability weights
    ``p`` (n,) summing to one: ``sum_i p_i (a_i - a_bar)(b_i - b_bar)^T``.

    Parameters
    ----------
    A, B : ndarray of shape (n, d), (n, e)
        The points, row ``i`` of each a pair.
    p : ndarray of shape (n,) or None, default=None
        Their probability weights; None weighs them equally.

    Returns
    -------
    ndarray of shape (d, e)
        The cross-covariance (normalised by the weights' sum, one).

    Examples
    --------
    >>> weighted_cross_covariance(np.array([[0.0], [2.0]]), np.array([[1.0], [-1.0]]))
    array([[-1.]])
    """
    if p is None:
        p = np.full(len(A), 1.0 / len(A))
    centred = A - p @ A
    # a covariance (B is A) centres its points once: every filtering step reports one
    return (centred * p[:, None]).T @ (centred if B is A else B - p @ B)


def weighted_sum(weights, f, *points):
    """``sum_i w_i f(...)_i``: ``f`` of the ``n`` points (one array, or several of ``n`` rows each),
    its output checked to have ``n`` finite rows before they are weighed. A complex ``f`` (a
    characteristic function, say) gives a complex sum; text is refused, not read as numbers."""
    if not callable(f):
        raise ValueError(f"f: expected a callable of the {' and '.join(['(n, d)'] * len(points))} points, got "
                         f"{type(f).__name__}")
    values = check_real_output(f(*points), "f", "values", complex_ok=True)
    if values.shape[:1] != weights.shape:
        raise ValueError(f"f: expected an output with {len(weights)} rows, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("f: returned values that are not finite at some of the points")
    return np.tensordot(weights, values, axes=(0, 0))


class KernelMean:
    """Kernel mean embedding of a weighted sample (algorithms §2).

    Parameters
    ----------
    points : array-like of shape (n, d)
        The sample ``x_i`` (a 1-D array is read as ``n`` scalar points).
    weights : array-like of shape (n,), optional
        The weights ``w_i``; uniform ``1/n`` when omitted.
    kernel : Kernel, optional
        The kernel ``k``. Defaults to a Gaussian kernel with the median-heuristic bandwidth of
        ``points``. A kernel whose bandwidth still depends on data (``"median"``, not fitted) is
        cloned and the clone is fitted on ``points``: the kernel passed in is never changed. To
        compare embeddings under one bandwidth (e.g. with :meth:`mmd`), pass them the same
        *fitted* kernel, which is used as it is.
    info : dict, optional
        Notes from the rule that produced the embedding.

    Attributes
    ----------
    info : dict
        Notes left by the rule that produced this embedding (e.g. a fallback that was used).

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter import GaussianKernel, KernelMean
    >>> m = KernelMean([[0.0], [2.0]], [0.25, 0.75], kernel=GaussianKernel(1.0))
    >>> m.mean()
    array([1.5])
    >>> float(m.expect(lambda x: x[:, 0] ** 2))
    3.0
    """

    def __init__(self, points, weights=None, kernel=None, info=None):
        self.points = check_matrix(points, "points")
        n = self.points.shape[0]
        if weights is None:
            self.weights = np.full(n, 1.0 / n)
        else:
            self.weights = check_vector(weights, "weights", length=n)
            with np.errstate(over="ignore"):
                total = self.weights.sum()
            if not np.isfinite(total):
                raise ValueError("weights: their sum overflows a float; divide them by their largest first")
        if kernel is None:
            kernel = GaussianKernel("median")
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel: expected a kbfilter Kernel, got {type(kernel).__name__}")
        if not kernel.__sklearn_is_fitted__():
            if n < 2:
                raise ValueError(f"points: expected at least 2 points to fit the kernel's bandwidth on, got {n}; for a "
                                 f"one-point embedding pass a kernel with a fixed bandwidth, e.g. GaussianKernel(1.0)")
            kernel = clone(kernel).fit(self.points)
        width = getattr(kernel, "n_features_in_", None)
        if width is not None and width != self.points.shape[1]:
            raise ValueError(f"kernel: fitted on points of dimension {width}, got points of dimension "
                             f"{self.points.shape[1]}")
        if info is not None and not isinstance(info, Mapping):
            raise ValueError(f"info: expected a dict of notes, got {type(info).__name__}")
        self.kernel = kernel
        self.info = dict(info or {})

    def __len__(self):
        return self.points.shape[0]

    def __repr__(self):
        return f"KernelMean(n={len(self)}, dim={self.points.shape[1]}, sum_weights={self.weights.sum():.4g})"

    # -- evaluation -------------------------------------------------------------------------
    def evaluate(self, Y):
        """The embedding as a function, ``m(y) = sum_i w_i k(x_i, y)``.

        Parameters
        ----------
        Y : array-like of shape (q, d)
            Where to evaluate it.

        Returns
        -------
        ndarray of shape (q,)
            ``m(y)`` for each row of ``Y``.
        """
        Y = check_matrix(Y, "Y", n_features=self.points.shape[1])
        return self.kernel(Y, self.points) @ self.weights

    def expect(self, f):
        """The embedding's estimate of an expectation, ``sum_i w_i f(x_i)``.

        Parameters
        ----------
        f : callable
            Maps the (n, d) array of points to an array with n rows, real or complex.

        Returns
        -------
        ndarray
            The weighted sum of ``f``'s rows (an array of ``f``'s trailing shape, complex when
            ``f`` is: ``lambda x: np.exp(1j * x @ t)`` gives the characteristic function at ``t``).
        """
        return weighted_sum(self.weights, f, self.points)

    def norm(self):
        """The RKHS norm of the embedding.

        Returns
        -------
        float
            ``sqrt(w^T G w)`` (0 when rounding makes the square negative).
        """
        return float(np.sqrt(max(self.weights @ self.kernel(self.points) @ self.weights, 0.0)))

    def mmd(self, other, squared=False):
        """RKHS distance to another embedding under this embedding's kernel (algorithms §2).

        ``w1^T G11 w1 - 2 w1^T G12 w2 + w2^T G22 w2``, clipped at 0 before the square root.
        Only this embedding's kernel is used; build both embeddings with the same fitted kernel
        for a distance that does not depend on which side it is called from.

        Parameters
        ----------
        other : KernelMean
            The other embedding, on points of the same dimension.
        squared : bool, default=False
            Return the squared distance.

        Returns
        -------
        float
            The (squared) maximum mean discrepancy.
        """
        if not isinstance(other, KernelMean):
            raise ValueError(f"other: expected a KernelMean, got {type(other).__name__}")
        if other.points.shape[1] != self.points.shape[1]:
            raise ValueError(
                f"other: expected points of dimension {self.points.shape[1]}, got {other.points.shape[1]}"
            )
        k = self.kernel
        w1, w2 = self.weights, other.weights
        sq = w1 @ k(self.points) @ w1 - 2 * w1 @ k(self.points, other.points) @ w2 + w2 @ k(other.points) @ w2
        sq = max(float(sq), 0.0)
        return sq if squared else float(np.sqrt(sq))

    # -- point estimates ---------------------------------------------------------------------
    def positive_weights(self):
        """The clipped, normalised weights ``p_i = max(w_i, 0) / sum_j max(w_j, 0)``.

        Returns
        -------
        ndarray of shape (n,)
            Non-negative weights that sum to one.

        Raises
        ------
        ValueError
            When no weight is positive.
        """
        p = clipped_weights(self.weights)
        if p is None:
            raise ValueError("weights: no weight is positive; the embedding has no probability reading")
        return p

    def mean(self, normalize=True):
        """Mean ``sum_i w_i x_i``, divided by ``sum_i w_i`` when ``normalize`` (the default).

        When ``normalize`` is asked for but ``sum_i w_i <= 0`` the normalised mean is undefined:
        the clipped normalised weights are used instead, with a
        :class:`~kbfilter.linalg.NumericalWarning` (see :func:`normalise_weights`).

        Parameters
        ----------
        normalize : bool, default=True
            Divide by the total weight.

        Returns
        -------
        ndarray of shape (d,)
            The mean.
        """
        if not normalize:
            return self.weights @ self.points
        total = self.weights.sum()
        if total > 0:
            return (self.weights @ self.points) / total
        p = self.positive_weights()
        warn_user(f"KernelMean.mean: sum of weights is {total:.3g} <= 0; using clipped normalised weights",
                  NumericalWarning)
        return p @ self.points

    def covariance(self):
        """Weighted covariance under the clipped normalised weights.

        Returns
        -------
        ndarray of shape (d, d)
            The covariance.
        """
        return weighted_covariance(self.points, self.positive_weights())

    def mode(self, max_iter=200, tol=1e-9):
        """Pre-image ``argmin_x ||m - k(., x)||`` by the Gaussian fixed point (the localized CKME paper eq. 3).

        Started from the sample point where ``m`` is largest; iterates
        ``x <- sum_i x_i w_i k(x_i, x) / sum_i w_i k(x_i, x)`` until the step is below ``tol``
        times the data scale. If the denominator is not positive (negative weights dominate)
        the iteration stops at the last valid point.

        Parameters
        ----------
        max_iter : int, default=200
            The most fixed-point iterations.
        tol : float, default=1e-9
            The step, relative to the data's extent, at which the iteration stops.

        Returns
        -------
        ndarray of shape (d,)
            The pre-image.

        Raises
        ------
        ValueError
            When no weight is positive: the embedding is nowhere above 0, so no point is nearer
            to it than any other (a conditional embedding far from every training input is 0).
        """
        if not isinstance(self.kernel, GaussianKernel):
            raise ValueError("kernel: mode() needs a GaussianKernel (the fixed point is specific to it)")
        max_iter = check_int(max_iter, "max_iter")
        tol = check_positive(tol, "tol", allow_zero=True)
        if not np.any(self.weights > 0):
            raise ValueError("weights: no weight is positive, so the embedding has no mode (it is nowhere above 0)")
        start = int(np.argmax(self.evaluate(self.points)))
        x = self.points[start].copy()
        scale = max(float(np.ptp(self.points, axis=0).max()), 1.0)
        for _ in range(max_iter):
            c = self.weights * self.kernel(self.points, x[None, :])[:, 0]
            denom = c.sum()
            if not denom > 0:
                break
            new = (c @ self.points) / denom
            step = np.max(np.abs(new - x))
            x = new
            if step <= tol * scale:
                break
        return x

    # -- resampling ----------------------------------------------------------------------------
    def herd(self, m, candidates=None):
        """Kernel herding: ``m`` equally weighted points approximating this embedding (algorithms §2).

        Greedily picks ``x_{t+1} = argmax_x m(x) - (1/(t+1)) sum_{j<=t} k(x, x_j)`` over the
        candidates (the sample points by default).

        Parameters
        ----------
        m : int
            The number of points to pick (a candidate may be picked more than once; at most
            :data:`MAX_HERD_PICKS`).
        candidates : array-like of shape (c, d), optional
            Where the points are picked from; the embedding's own points by default.

        Returns
        -------
        KernelMean
            ``m`` points with weight ``sum_i w_i / m`` each, so the total mass is kept.

        Raises
        ------
        ValueError
            When the weights' sum is not positive: herding approximates a probability, and an
            embedding of no mass or of negative mass describes none.
        """
        m = check_int(m, "m", maximum=MAX_HERD_PICKS)
        total = float(self.weights.sum())
        if not total > 0:
            raise ValueError(f"weights: herding approximates an embedding of positive mass (a probability), got sum "
                             f"{total:.4g}; clip them first (positive_weights())")
        own = candidates is None
        candidates = self.points if own else check_matrix(candidates, "candidates", n_features=self.points.shape[1])
        gram = self.kernel(candidates) if candidates.shape[0] ** 2 <= HERD_GRAM_ENTRIES else None
        # among its own points the embedding's values are the candidates' Gram matrix times the weights
        cross = gram if own and gram is not None else self.kernel(candidates, self.points)
        target = cross @ self.weights / total
        if gram is not None:
            picked = herd(target, lambda j: gram[:, j], m)
        else:
            picked = herd(target, lambda j: self.kernel(candidates, candidates[j : j + 1])[:, 0], m)
        weights = np.full(m, total / m)
        return KernelMean(candidates[picked], weights, kernel=self.kernel)
