"""Closed forms for Gaussian models under the Gaussian kernel (algorithms §1).

Ground truth for tests, scenarios and benchmarks: the kernel mean of ``N(mu, V)`` under the
unnormalised kernel ``exp(-||a - b||^2 / (2 s^2))``, its squared RKHS norm, the RKHS distance
from a weighted sample to it, and Gaussian conditionals.
"""

import numpy as np

from ._validation import check_covariance, check_matrix, check_positive, check_real, check_vector
from .linalg import column_entries

__all__ = [
    "gaussian_kernel_mean",
    "gaussian_kernel_mean_sqnorm",
    "rkhs_error_to_gaussian",
    "gaussian_conditional",
]


def gaussian_kernel_mean(Y, mu, V, s):
    """The kernel mean of ``P = N(mu, V)`` under the unnormalised Gaussian kernel of bandwidth ``s``.

    ``m_P(y) = det(I + V/s^2)^(-1/2) exp(-1/2 (y-mu)^T (V + s^2 I)^(-1) (y-mu))``.

    Parameters
    ----------
    Y : array-like of shape (n, d)
        Where to evaluate it.
    mu : array-like of shape (d,)
        The Gaussian's mean.
    V : array-like of shape (d, d)
        Its covariance.
    s : float
        The kernel's bandwidth.

    Returns
    -------
    ndarray of shape (n,)
        ``m_P(y)`` for each row of ``Y``.

    Examples
    --------
    >>> round(float(gaussian_kernel_mean([[0.0]], [0.0], [[1.0]], 1.0)[0]), 12)  # 1/sqrt(2)
    0.707106781187
    """
    mu, V, s = _gaussian(mu, V, s)
    return _kernel_mean(_points(Y, "Y", len(mu)), mu, V, s)


def _gaussian(mu, V, s):
    """``N(mu, V)`` and the bandwidth ``s``, checked: ``mu`` a finite vector, ``V`` a covariance of
    its dimension (symmetric, positive semi-definite; a number for one dimension), ``s`` positive."""
    mu = check_vector(np.atleast_1d(mu), "mu")
    return mu, check_covariance(np.atleast_2d(V), "V", len(mu)), check_positive(s, "s")


def _points(Y, name, d):
    """Points in ``d`` dimensions: rows of a matrix, or one point given as a vector when ``d > 1``
    (a vector in one dimension is that many points)."""
    Y = np.asarray(Y)
    return check_matrix(Y[None] if Y.ndim == 1 and d > 1 else Y, name, n_features=d)


def _kernel_mean(Y, mu, V, s):
    d = V.shape[0]
    S = V + s * s * np.eye(d)
    diff = Y - mu
    quad = np.einsum("nd,nd->n", diff, np.linalg.solve(S, diff.T).T)
    return np.linalg.det(np.eye(d) + V / (s * s)) ** -0.5 * np.exp(-0.5 * quad)


def gaussian_kernel_mean_sqnorm(V, s):
    """The squared RKHS norm of the kernel mean of ``P = N(mu, V)``.

    Parameters
    ----------
    V : array-like of shape (d, d)
        The covariance.
    s : float
        The Gaussian kernel's bandwidth.

    Returns
    -------
    float
        ``||m_P||^2 = det(I + 2 V / s^2)^(-1/2)`` (it does not depend on ``mu``).
    """
    V = np.atleast_2d(V)
    return _sqnorm(check_covariance(V, "V", np.shape(V)[0]), check_positive(s, "s"))


def _sqnorm(V, s):
    return float(np.linalg.det(np.eye(V.shape[0]) + 2.0 * V / (s * s)) ** -0.5)


def rkhs_error_to_gaussian(points, weights, mu, V, s, sq_norm_hat=None):
    """``||m_P - sum_i w_i k(., y_i)||`` in the Gaussian RKHS of bandwidth ``s`` (algorithms §1).

    Parameters
    ----------
    points : array-like of shape (n, d)
        The sample ``y_i``.
    weights : array-like of shape (n,)
        Its weights ``w_i``.
    mu : array-like of shape (d,)
        The Gaussian's mean.
    V : array-like of shape (d, d)
        Its covariance.
    s : float
        The kernel's bandwidth.
    sq_norm_hat : float, optional
        ``w^T G w``, when the caller has it already.

    Returns
    -------
    float
        The RKHS distance.
    """
    mu, V, s = _gaussian(mu, V, s)
    points = _points(points, "points", len(mu))
    weights = check_vector(weights, "weights", length=len(points))
    if sq_norm_hat is not None:
        sq_norm_hat = check_real(sq_norm_hat, "sq_norm_hat")
    else:
        diff = points[:, None, :] - points[None, :, :]
        G = np.exp(-np.einsum("ijd,ijd->ij", diff, diff) / (2 * s * s))
        sq_norm_hat = weights @ G @ weights
    sq = _sqnorm(V, s) - 2 * weights @ _kernel_mean(points, mu, V, s) + sq_norm_hat
    return float(np.sqrt(max(sq, 0.0)))


def gaussian_conditional(mean, cov, idx_given, idx_out):
    """Conditional of a joint Gaussian.

    Parameters
    ----------
    mean : array-like of shape (d,)
        The joint mean.
    cov : array-like of shape (d, d)
        The joint covariance.
    idx_given : array-like of int
        The coordinates conditioned on.
    idx_out : array-like of int
        The coordinates whose conditional law is returned.

    Returns
    -------
    gain : ndarray of shape (len(idx_out), len(idx_given))
        ``E[out | given = g] = offset + gain @ g``.
    offset : ndarray of shape (len(idx_out),)
        The constant term.
    cond_cov : ndarray of shape (len(idx_out), len(idx_out))
        The conditional covariance.

    Examples
    --------
    >>> gain, offset, cov = gaussian_conditional([0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]], [0], [1])
    >>> float(gain[0, 0]), float(cov[0, 0])
    (0.5, 0.75)
    """
    mean = check_vector(mean, "mean")
    d = len(mean)
    cov = check_covariance(cov, "cov", d)
    g, o = _coordinates(idx_given, "idx_given", d), _coordinates(idx_out, "idx_out", d)
    both = np.intersect1d(g, o)
    if both.size:
        raise ValueError(f"idx_out: expected coordinates other than the given ones, got {both[0]} in both")
    Sgg = cov[np.ix_(g, g)]
    Sog = cov[np.ix_(o, g)]
    try:
        gain = np.linalg.solve(Sgg, Sog.T).T
    except np.linalg.LinAlgError:
        raise ValueError("cov: the covariance of the given coordinates is singular; no conditional on them") from None
    offset = mean[o] - gain @ mean[g]
    cond_cov = cov[np.ix_(o, o)] - gain @ Sog.T
    return gain, offset, cond_cov


def _coordinates(idx, name, d):
    """Distinct coordinate indices in ``0 .. d-1``, at least one."""
    idx = np.atleast_1d(np.asarray(idx))
    if idx.ndim != 1 or not idx.size or idx.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected one or more integer coordinates, got {idx.tolist()!r}")
    if idx.min() < 0 or idx.max() >= d or len(np.unique(idx)) != len(idx):
        raise ValueError(f"{name}: expected distinct coordinates of 0 .. {d - 1}, got {idx.tolist()}")
    return idx


def random_joint_gaussian(d_in, d_out, rng):
    """The localized CKME paper's §5.1 model: ``(a, b) ~ N(0, V)`` with ``V = M^T M``, ``M`` standard normal.

    Returns ``V`` and the conditional ``(gain, offset, cond_cov)`` of ``b`` given ``a``.
    """
    d = d_in + d_out
    M = rng.standard_normal((d, d))
    V = M.T @ M
    return V, gaussian_conditional(np.zeros(d), V, np.arange(d_in), np.arange(d_in, d))


def conditional_rkhs_errors(W, B, Q, gain, offset, cond_cov, s_out, sq_norms):
    """RKHS errors ``||m_{P(b|q_j)} - sum_i W_ij k(., b_i)||`` for each query (the localized CKME paper §5.1).

    ``W`` (n, q) dense or sparse; ``sq_norms`` are ``diag(W^T G_B W)`` computed by the caller.
    """
    norm_p = _sqnorm(cond_cov, s_out)
    errors = np.empty(Q.shape[0])
    for j, (q, (idx, w)) in enumerate(zip(Q, column_entries(W))):
        cross = w @ _kernel_mean(B[idx], offset + gain @ q, cond_cov, s_out)
        errors[j] = np.sqrt(max(norm_p - 2 * cross + sq_norms[j], 0.0))
    return errors
