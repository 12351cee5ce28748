"""Bayesian kernel learning: a Gaussian kernel's bandwidth from the marginal pseudolikelihood of
the empirical kernel mean (Flaxman, Sejdinovic, Cunningham and Filippi 2016).

The model. For a Gaussian kernel ``k(x, y) = exp(-||x - y||^2 / (2 s^2))`` on ``R^d``, the kernel
mean ``mu`` gets a Gaussian-process prior whose covariance is the kernel convolved with itself,
``r(z, z') = int k(z, u) k(u, z') du = (pi s^2)^(d/2) exp(-||z - z'||^2 / (4 s^2))``, so its draws
lie in the kernel's RKHS. At ``m`` fixed points ``z_1..z_m`` (held out from the sample), each
observation's feature vector ``phi(x_i) = (k(x_i, z_1), ..., k(x_i, z_m))`` is modelled as
``mu(z) + N(0, tau^2 I_m)``, independently over the ``n`` observations. Integrating ``mu`` out
gives the Gaussian ``N(vec Phi; 0, 1_n 1_n^T (x) R + tau^2 I_mn)``, and the change of variables
from ``x_i`` to ``phi(x_i)`` contributes the Jacobian factor
``Gamma(x_i) = det(J(x_i)^T J(x_i))^(1/2)`` with ``J_lj = d k(x, z_l) / d x_j``.

The ``mn``-dimensional density is never formed: the covariance's eigenvalues are
``n lambda_j + tau^2`` (``lambda_j`` those of ``R``) and ``tau^2``, so with ``mu_hat`` the mean of
the ``phi(x_i)``,

    log p = -1/2 [ sum_j log(n lambda_j + tau^2) + m (n - 1) log tau^2
                   + mu_hat^T (R + tau^2 / n I)^{-1} mu_hat + (||Phi||_F^2 - n ||mu_hat||^2) / tau^2
                   + m n log(2 pi) ]  +  sum_i log Gamma(x_i),

``O(m^3 + n m^2)``. The pseudolikelihood often has several local maxima (the scales of a
mixture's components and of its layout), so it is maximised from several starting bandwidths.

It is also unbounded: beyond about the median pairwise distance the features ``k(x, z)`` become
nearly constant over the sample, their spread around ``mu_hat`` vanishes, and the density grows
without limit as ``tau^2`` falls with it (an ``m``-dimensional Gaussian against a Jacobian of
dimension ``d < m``). On a grid of nine Gaussian clusters, for example, the profile over the
bandwidth has a mode at the clusters' scale, a trough around the median, and rises for ever past
it. The search is therefore confined to bandwidths up to ``max_ratio`` (default 1) times the
median distance, where the median heuristic would stop; a maximum at that edge says the data
have no finer scale the model prefers.

This module is part of the floor: it imports nothing from the rest of kbfilter but validation.
"""

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.spatial.distance import cdist, pdist
from scipy.special import logsumexp

from ._validation import check_int, check_matrix, check_positive, check_rng

__all__ = ["log_pseudolikelihood", "bayesian_bandwidth", "BandwidthFit", "posterior_embedding", "EmbeddingPosterior"]


def log_pseudolikelihood(X, inducing, bandwidth, noise=None):
    """The log marginal pseudolikelihood of a sample under a Gaussian kernel's embedding model.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The observations.
    inducing : array-like of shape (m, d)
        The points ``z`` at which the empirical embedding is modelled (held out from ``X``).
    bandwidth : float
        ``s`` of ``k(x, y) = exp(-||x - y||^2 / (2 s^2))``.
    noise : float or None, default=None
        ``tau^2``, the variance linking the empirical to the modelled embedding; None maximises
        over it (the profile that :func:`bayesian_bandwidth` maximises over the bandwidth).

    Returns
    -------
    float
        ``log N(vec Phi; 0, 1 1^T (x) R + tau^2 I) + sum_i log Gamma(x_i)`` (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 1))
    >>> Z = np.linspace(-1, 1, 5)[:, None]
    >>> best = log_pseudolikelihood(X, Z, 1.0)        # the noise variance maximised over
    >>> bool(best >= log_pseudolikelihood(X, Z, 1.0, 0.01))
    True
    """
    X = check_matrix(X, "X")
    Z = check_matrix(inducing, "inducing", n_features=X.shape[1])
    _check_jacobian_rank(Z.shape[0], X.shape[1], "inducing")
    s = check_positive(bandwidth, "bandwidth")
    _prior_scale(s, X.shape[1])
    if noise is None:
        return _profile(X, Z, s)[0]
    return _log_pseudolikelihood(X, Z, s, check_positive(noise, "noise"))


def _features(Z, X, s):
    """``k(z_l, x_i)``, (m, n)."""
    return np.exp(-cdist(Z, X, "sqeuclidean") / (2 * s * s))


def _prior_scale(s, d, name="bandwidth"):
    """``r(z, z) = (pi s^2)^(d/2)``, refused when it (or ``s^2``) over- or underflows float64: the
    pseudolikelihood would be NaN, or an ``OverflowError``, with nothing said about why."""
    log_scale = 0.5 * d * np.log(np.pi * s * s) if s * s > 0 else -np.inf
    if not abs(log_scale) < 700:  # exp overflows near 709.8; the margin keeps n r(z, z) finite
        raise ValueError(f"{name}: the prior's scale (pi s^2)^(d/2) over- or underflows float64 for s = {s:g} in "
                         f"d = {d} dimensions; rescale X (the scale is 1 at s = {1 / np.sqrt(np.pi):.3g}) or reduce "
                         f"its dimension")
    return float(np.exp(log_scale))


def _prior_covariance(A, B, s):
    """``r(a, b)``: the Gaussian kernel of bandwidth ``s`` convolved with itself."""
    return _prior_scale(s, A.shape[1]) * np.exp(-cdist(A, B, "sqeuclidean") / (4 * s * s))


def _check_jacobian_rank(m, d, name):
    """The Jacobian of ``x -> phi(x)`` (``m`` features of ``d`` coordinates) has rank at most
    ``m``: with fewer held-out points than dimensions its factor, and the pseudolikelihood, is 0
    at every bandwidth (``-inf`` in logs), and no bandwidth is better than another."""
    if m < d:
        raise ValueError(f"{name}: expected at least as many points as X has dimensions ({d}), got {m}: with fewer "
                         f"the Jacobian of the feature map is singular and the pseudolikelihood is -inf at every "
                         f"bandwidth")


def _gaussian_part(X, Z, s):
    """What the Gaussian term needs from the bandwidth: a function of ``tau^2``."""
    n = X.shape[0]
    m = Z.shape[0]
    Phi = _features(Z, X, s)
    R = _prior_covariance(Z, Z, s)
    lam, Q = np.linalg.eigh(R)  # divide and conquer: scipy's default driver can fail on a nearly diagonal R
    lam = np.maximum(lam, 0.0)
    mu_hat = Phi.mean(axis=1)
    proj2 = (Q.T @ mu_hat) ** 2
    spread = np.sum(Phi**2) - n * mu_hat @ mu_hat  # ||Phi||_F^2 - n ||mu_hat||^2

    def gaussian(tau2):
        quad = np.sum(proj2 / (lam + tau2 / n)) + spread / tau2
        logdet = np.sum(np.log(n * lam + tau2)) + m * (n - 1) * np.log(tau2)
        return -0.5 * (logdet + quad + m * n * np.log(2 * np.pi))

    return gaussian


def _log_pseudolikelihood(X, Z, s, tau2):
    # Jacobian: J^T J = sum_l k(x, z_l)^2 (x - z_l)(x - z_l)^T / s^4, a (d, d) matrix per observation
    return float(_gaussian_part(X, Z, s)(tau2) + np.sum(_log_jacobians(X, Z, s)))


def _profile(X, Z, s):
    """The pseudolikelihood at bandwidth ``s`` maximised over ``tau^2``, and that ``tau^2``."""
    gaussian = _gaussian_part(X, Z, s)
    res = minimize_scalar(lambda t: -gaussian(np.exp(t)), bounds=(np.log(1e-14), np.log(1e2)), method="bounded",
                          options={"xatol": 1e-6})
    return float(-res.fun + np.sum(_log_jacobians(X, Z, s))), float(np.exp(res.x))


def _log_jacobians(X, Z, s):
    """``log Gamma(x_i) = 1/2 log det(J^T J)`` for each observation, in the log domain.

    Far from the z's at small bandwidths every ``k(x, z_l)^2`` underflows, and near one z the
    matrix is numerically of rank one. For ``d <= 2`` the determinant is summed in logs by the
    Cauchy-Binet formula, ``det(sum_l w_l v_l v_l^T) = 1/2 sum_{l, l'} w_l w_l' (v_l x v_l')^2``;
    for larger ``d`` each observation's largest ``k^2`` is factored out before ``slogdet``.
    """
    d = X.shape[1]
    diff = X[None, :, :] - Z[:, None, :]  # (m, n, d)
    log_w = -np.sum(diff**2, axis=2) / (s * s) - 2.0 * np.log(s * s)  # log k(x_i, z_l)^2 / s^4, (m, n)
    if d == 1:
        return 0.5 * logsumexp(log_w + np.log(diff[..., 0] ** 2 + np.finfo(float).tiny), axis=0)
    if d == 2:
        cross = diff[:, None, :, 0] * diff[None, :, :, 1] - diff[:, None, :, 1] * diff[None, :, :, 0]
        terms = log_w[:, None, :] + log_w[None, :, :] + np.log(cross**2 + np.finfo(float).tiny)
        return 0.5 * (logsumexp(terms.reshape(-1, X.shape[0]), axis=0) - np.log(2.0))
    top = log_w.max(axis=0)
    sign, logdets = np.linalg.slogdet(np.einsum("ln,lni,lnj->nij", np.exp(log_w - top), diff, diff))
    return 0.5 * np.where(sign > 0, logdets + d * top, -np.inf)


class BandwidthFit(NamedTuple):
    """What :func:`bayesian_bandwidth` returns.

    Attributes
    ----------
    bandwidth : float
        The bandwidth ``s`` of the largest pseudolikelihood found.
    noise : float
        Its ``tau^2``.
    log_pseudolikelihood : float
        The value there.
    median : float
        The median pairwise distance of the sample, for comparison.
    inducing : ndarray of shape (m, d)
        The held-out points the embedding was modelled at.
    """

    bandwidth: float
    noise: float
    log_pseudolikelihood: float
    median: float
    inducing: np.ndarray


def bayesian_bandwidth(X, n_inducing=None, n_grid=25, min_ratio=0.005, max_ratio=1.0, random_state=None):
    """The Gaussian kernel bandwidth that maximises the marginal pseudolikelihood (Bayesian kernel learning).

    ``n_inducing`` points are held out of ``X`` at random as the points ``z``. For each
    bandwidth the pseudolikelihood of the rest is maximised over ``tau^2`` (which costs little
    once the bandwidth's kernel matrices are built); over the bandwidth, which has several local
    maxima, it is evaluated on a log-spaced grid, and each of the three best local maxima of the
    grid is refined between its neighbours by a bounded scalar search.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The sample, at least 4 points.
    n_inducing : int or None, default=None
        How many points to hold out as ``z``, at least ``d`` (the Jacobian of the feature map
        has rank at most ``n_inducing``); None takes ``min(max(50, d), n // 5)``.
    n_grid : int, default=25
        Bandwidths on the grid.
    min_ratio, max_ratio : float, default=0.005 and 1.0
        The grid's range, as multiples of the median pairwise distance. Past the median the
        pseudolikelihood grows without bound (see the module notes), so ``max_ratio`` above 1
        mostly finds that.
    random_state : int, Generator or None, default=None
        Seeds which points are held out.

    Returns
    -------
    BandwidthFit
        The bandwidth, ``tau^2``, the value reached, the median distance, and the held-out points.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> centres = np.repeat(np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]]), 100, axis=0)
    >>> X = centres + rng.normal(size=(300, 2))       # three tight clusters, far apart
    >>> fit = bayesian_bandwidth(X, random_state=0)
    >>> bool(fit.bandwidth < 0.2 * fit.median)        # the clusters' scale, not the layout's
    True
    """
    X = check_matrix(X, "X", min_samples=4)
    n_total, d = X.shape
    m = min(max(50, d), n_total // 5) if n_inducing is None else check_int(n_inducing, "n_inducing",
                                                                         maximum=n_total - 2)
    m = max(m, 1)
    _check_jacobian_rank(m, d, "n_inducing" if n_inducing is not None else
                         f"n_inducing: the default, min(max(50, d), n // 5) for n = {n_total}")
    n_grid = check_int(n_grid, "n_grid", minimum=3)
    min_ratio = check_positive(min_ratio, "min_ratio")
    max_ratio = check_positive(max_ratio, "max_ratio")
    if not min_ratio < max_ratio:
        raise ValueError(f"min_ratio: expected less than max_ratio = {max_ratio}, got {min_ratio}")
    rng = check_rng(random_state)
    held = np.zeros(n_total, dtype=bool)
    held[rng.choice(n_total, m, replace=False)] = True
    Z, rest = X[held], X[~held]
    median = float(np.median(pdist(X if n_total <= 1000 else X[rng.choice(n_total, 1000, replace=False)])))
    if not median > 0:
        raise ValueError("X: the median pairwise distance is 0 (constant or duplicated points)")
    for ratio, name in ((min_ratio, "min_ratio"), (max_ratio, "max_ratio")):  # the scale is monotone in s
        _prior_scale(ratio * median, d, f"{name} x the median distance ({median:g})")

    log_grid = np.linspace(np.log(min_ratio * median), np.log(max_ratio * median), n_grid)
    values = np.array([_profile(rest, Z, np.exp(t))[0] for t in log_grid])
    values = np.where(np.isfinite(values), values, -np.inf)
    if not np.isfinite(values).any():
        raise ValueError(f"X: the pseudolikelihood is -inf at every bandwidth from {min_ratio:g} to {max_ratio:g} x "
                         f"the median distance ({median:g}): the Jacobian of the feature map is numerically singular "
                         f"for some observation at each (points far from all {m} held-out points); raise n_inducing "
                         f"or min_ratio, or give the kernel a float or 'median' bandwidth")
    padded = np.concatenate([[-np.inf], values, [-np.inf]])
    peaks = [i for i in range(n_grid) if padded[i + 1] >= padded[i] and padded[i + 1] >= padded[i + 2]]
    best = (-np.inf, log_grid[int(np.argmax(values))])
    for i in sorted(peaks, key=lambda i: -values[i])[:3]:
        lo, hi = log_grid[max(i - 1, 0)], log_grid[min(i + 1, n_grid - 1)]
        res = minimize_scalar(lambda t: -_profile(rest, Z, np.exp(t))[0], bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-4})
        candidate = (-res.fun, res.x) if -res.fun >= values[i] else (values[i], log_grid[i])
        best = max(best, candidate)
    value, noise = _profile(rest, Z, np.exp(best[1]))
    return BandwidthFit(float(np.exp(best[1])), noise, value, median, Z)


class EmbeddingPosterior(NamedTuple):
    """What :func:`posterior_embedding` returns.

    Attributes
    ----------
    mean : ndarray of shape (q,)
        The posterior mean of the kernel mean ``mu`` at the query points.
    sd : ndarray of shape (q,)
        Its posterior standard deviation there.
    """

    mean: np.ndarray
    sd: np.ndarray


def posterior_embedding(X, points, bandwidth, noise, inducing=None):
    """The posterior of a sample's kernel mean under the Bayesian kernel embedding model.

    The empirical embedding ``mu_hat(z) = 1/n sum_i k(x_i, z)`` at the points ``z`` is the kernel
    mean seen through noise of variance ``tau^2 / n``; with the prior covariance ``r`` (the
    kernel convolved with itself, see the module notes), Gaussian-process regression gives the
    posterior of ``mu`` anywhere (Flaxman et al. 2016):

        mean(y) = r(y, z)^T (R + tau^2 / n I)^{-1} mu_hat(z)
        var(y)  = r(y, y) - r(y, z)^T (R + tau^2 / n I)^{-1} r(z, y).

    The mean is a shrinkage estimator of the kernel mean: it pulls the empirical embedding
    towards the prior mean 0 along the directions the prior finds unlikely, more so the larger
    ``tau^2``; as ``tau^2 -> 0`` it interpolates ``mu_hat`` at the points ``z``.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The sample.
    points : array-like of shape (q, d)
        Where to evaluate the posterior.
    bandwidth : float
        ``s`` of the Gaussian kernel, e.g. :attr:`BandwidthFit.bandwidth`.
    noise : float
        ``tau^2``, e.g. :attr:`BandwidthFit.noise`.
    inducing : array-like of shape (m, d) or None, default=None
        The points ``z`` at which the empirical embedding is observed; None uses the sample itself
        (``O(n^3)``), as Flaxman et al. do; :attr:`BandwidthFit.inducing` is the cheaper choice.

    Returns
    -------
    EmbeddingPosterior
        The posterior mean and standard deviation at ``points``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 1))
    >>> grid = np.linspace(-3, 3, 7)[:, None]
    >>> post = posterior_embedding(X, grid, bandwidth=0.5, noise=0.05)
    >>> empirical = np.exp(-(X - grid.T) ** 2 / (2 * 0.5**2)).mean(axis=0)
    >>> bool(np.all(np.abs(post.mean - empirical) < 0.05)), bool(np.all(post.sd > 0))
    (True, True)
    """
    X = check_matrix(X, "X")
    d = X.shape[1]
    points = check_matrix(points, "points", n_features=d)
    Z = X if inducing is None else check_matrix(inducing, "inducing", n_features=d)
    s = check_positive(bandwidth, "bandwidth")
    prior_variance = _prior_scale(s, d)  # r(y, y)
    tau2 = check_positive(noise, "noise")
    n = X.shape[0]
    mu_hat = _features(Z, X, s).mean(axis=1)
    lam, Q = np.linalg.eigh(_prior_covariance(Z, Z, s))
    # (R + tau^2/n I)^{-1} = C C^T with C = Q diag(lam + tau^2/n)^{-1/2}
    C = Q / np.sqrt(np.maximum(lam, 0.0) + tau2 / n)
    projected = C.T @ _prior_covariance(Z, points, s)  # (m, q)
    mean = projected.T @ (C.T @ mu_hat)
    var = np.maximum(prior_variance - np.sum(projected**2, axis=0), 0.0)
    return EmbeddingPosterior(mean, np.sqrt(var))
