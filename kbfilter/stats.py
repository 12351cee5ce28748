"""Consistency statistics: does a filter's reported covariance match its actual errors?

A filter that reports ``P`` claims that its error ``x - x_hat`` is about ``N(0, P)``. Then the
normalised estimation error squared (NEES) ``e^T P^{-1} e`` is chi-squared with ``dim_x`` degrees
of freedom, and its average over ``n`` steps has mean ``dim_x`` and (steps taken as independent)
lies in :func:`chi2_band` 95 % of the time. An average far above ``dim_x`` says the filter is
over-confident (its ``P`` too small), far below that it is too cautious. The normalised
innovation squared (NIS) is the same test on the observations, with the predicted observation and
its covariance ``S``. filterpy's ``stats.NEES`` and ``KalmanFilter.mahalanobis`` (the square root
of the NIS) follow the same conventions.

Examples
--------
>>> import numpy as np
>>> nees(np.zeros((2, 2)), np.ones((2, 2)), np.array([np.eye(2), 2 * np.eye(2)]))
array([2., 1.])
>>> low, high = chi2_band(dim=2, n_steps=100)
>>> bool(low < 2 < high)
True
"""

import time

import numpy as np
from scipy import stats as _scipy_stats

from ._validation import COVARIANCE_RTOL, check_array, check_fraction, check_int, check_matrix, ndim_or_none

__all__ = ["nees", "nis", "mean_nees", "chi2_band", "NISRecorder", "UndefinedStatistic"]


class UndefinedStatistic(ValueError):
    """Raised by :func:`nees` and :func:`nis` when the arguments fit together but the statistic does
    not exist: an estimate or a covariance is not finite, or a covariance is not symmetric or not
    positive definite (e.g. a point estimate that reports ``P = 0``). :func:`mean_nees` reports it
    as None. A ``ValueError``; catch this class to tell it from a mistake in the call.

    Examples
    --------
    >>> import numpy as np
    >>> try:
    ...     nees(np.zeros((1, 2)), np.ones((1, 2)), np.zeros((1, 2, 2)))
    ... except UndefinedStatistic as exc:
    ...     print(exc)
    covs[0]: expected a positive definite covariance
    """


def _errors(values, estimates, value_name, estimate_name):
    """``values - estimates``, of one shape; the shapes are checked before the estimates' values."""
    values = check_matrix(values, value_name)
    estimates = check_matrix(estimates, estimate_name, finite=False)
    if estimates.shape != values.shape:
        raise ValueError(f"{estimate_name}: expected shape {values.shape} ({value_name}'s), got {estimates.shape}")
    if not np.all(np.isfinite(estimates)):
        raise UndefinedStatistic(f"{estimate_name}: contains NaN or infinite values")
    return values - estimates


def _normalised_squares(values, estimates, covs, names):
    """``e^T C^{-1} e`` per step for ``e = values - estimates``; ``names`` are the three arguments'."""
    value_name, estimate_name, cov_name = names
    for name, steps in zip(names, (values, estimates, covs)):
        if isinstance(steps, (list, tuple)) and any(step is None for step in steps):
            # what a filter reports for a step with no observation, kept from a run
            t = next(i for i, step in enumerate(steps) if step is None)
            raise ValueError(f"{name}[{t}]: None, a step without an observation (or without an innovation); leave "
                             f"such steps out (kb.stats.NISRecorder does)")
    covs = check_array(covs, cov_name, "an array of covariances")
    if ndim_or_none(values) == 1 and covs.ndim == 2:
        # one step's vector and its (d, d) covariance, as a filter reports them after a step
        values, estimates, covs = np.asarray(values)[None], np.asarray(estimates)[None], covs[None]
    errors = _errors(values, estimates, value_name, estimate_name)
    n, d = errors.shape
    if covs.shape != (n, d, d):
        raise ValueError(f"{cov_name}: expected shape ({n}, {d}, {d}), one covariance a step, got {covs.shape}")
    if not np.all(np.isfinite(covs)):
        raise UndefinedStatistic(f"{cov_name}: expected finite covariances")
    # a covariance is symmetric up to round-off (filters' differ from their transposes by about 1e-15
    # of their largest entry); one that is not, such as a Cholesky factor passed for P, is refused
    # rather than read as its symmetric part
    scale = np.max(np.abs(covs), axis=(1, 2))
    skewed = np.flatnonzero(np.max(np.abs(covs - np.swapaxes(covs, 1, 2)), axis=(1, 2)) > COVARIANCE_RTOL * scale)
    if skewed.size:
        raise UndefinedStatistic(f"{cov_name}[{skewed[0]}]: expected a symmetric covariance (a Cholesky factor L is "
                                 f"the covariance L @ L.T)")
    out = np.empty(n)
    for t in range(n):
        try:
            # a Cholesky solve: every covariance must be positive definite for the statistic to exist
            c = np.linalg.cholesky(0.5 * (covs[t] + covs[t].T))
        except np.linalg.LinAlgError:
            raise UndefinedStatistic(f"{cov_name}[{t}]: expected a positive definite covariance") from None
        with np.errstate(over="ignore"):
            # beyond float64 (an error of 1e200 with a variance of 1e-200) the value is inf: the
            # filter was certain of a wrong answer
            y = np.linalg.solve(c, errors[t])
            out[t] = y @ y
    return out


def nees(truth, means, covs):
    """Normalised estimation error squared of each step: ``(x - x_hat)^T P^{-1} (x - x_hat)``.

    Parameters
    ----------
    truth : array-like of shape (n_steps, dim_x)
        The true states (one step's state, of shape ``(dim_x,)``, with ``covs`` of shape
        ``(dim_x, dim_x)``, gives that step's value alone).
    means : array-like of shape (n_steps, dim_x)
        The estimates.
    covs : array-like of shape (n_steps, dim_x, dim_x)
        The covariances the filter reported (symmetric to 1e-8 of their largest entry, and
        positive definite).

    Returns
    -------
    ndarray of shape (n_steps,)
        One value a step (filterpy's ``stats.NEES(truth, means, covs)``); each is chi-squared
        with ``dim_x`` degrees of freedom for a consistent filter. A value beyond float64's range
        is ``inf``.

    Raises
    ------
    UndefinedStatistic
        When an estimate or a covariance is not finite, or a covariance is not symmetric or not
        positive definite: the statistic does not exist.
    ValueError
        When the arguments do not fit together (shapes, a None step).
    """
    return _normalised_squares(truth, means, covs, ("truth", "means", "covs"))


def nis(zs, z_means, z_covs):
    """Normalised innovation squared of each step: ``(z - z_hat)^T S^{-1} (z - z_hat)``.

    Parameters
    ----------
    zs : array-like of shape (n_steps, dim_z)
        The observations (one step's, of shape ``(dim_z,)``, with ``z_covs`` of shape
        ``(dim_z, dim_z)``, gives that step's value alone).
    z_means : array-like of shape (n_steps, dim_z)
        The predicted observations.
    z_covs : array-like of shape (n_steps, dim_z, dim_z)
        Their covariances ``S`` (symmetric, as ``covs`` of :func:`nees`, and positive definite).

    Returns
    -------
    ndarray of shape (n_steps,)
        One value a step (the square of filterpy's ``KalmanFilter.mahalanobis``); chi-squared
        with ``dim_z`` degrees of freedom for a consistent filter.

    Raises
    ------
    UndefinedStatistic, ValueError
        As :func:`nees`.

    Notes
    -----
    A filter's own innovations give it as well: the EKF, the UKF, the particle filter, the IMM and
    the kernel Bayes, Kernel Monte Carlo and learned-motion filters report ``y`` and ``S`` after each
    ``update``, and ``nis(ys, np.zeros_like(ys), Ss)`` over those kept from a run is their
    ``mahalanobis`` squared, step by step.
    """
    return _normalised_squares(zs, z_means, z_covs, ("zs", "z_means", "z_covs"))


def mean_nees(truth, means, covs):
    """The mean NEES of a run, or None where it does not exist.

    Parameters
    ----------
    truth, means : array-like of shape (n_steps, dim_x)
        The true states and the estimates.
    covs : array-like of shape (n_steps, dim_x, dim_x)
        The covariances the filter reported.

    Returns
    -------
    float or None
        The mean of :func:`nees` over the steps; None when ``covs`` is None, an estimate or a
        covariance is not finite, or a covariance is not symmetric or not positive definite (e.g. a point estimate
        that reports ``P = 0``), so a benchmark can report "no covariance" instead of failing.

    Raises
    ------
    ValueError
        If ``truth`` is not a finite 2-D array or the shapes do not match: those are mistakes in
        the call, not a filter without a covariance.
    """
    if covs is None:
        _errors(truth, means, "truth", "means")  # a mistake there is not hidden by a missing covariance
        return None
    try:
        return float(np.mean(nees(truth, means, covs)))
    except UndefinedStatistic:
        return None


class NISRecorder:
    """Records a filter's NIS at each step, as filterpy's ``Saver`` records a filter: give it to
    ``batch_filter(zs, saver=recorder)``, or call :meth:`save` after each ``update``.

    The NIS of a step is the square of the filter's ``mahalanobis`` (None where the filter has no
    innovation: a missing observation, a first step taken from the observation, an image). It
    needs no true state, so it is the consistency check a tracker can run on recorded data.

    Parameters
    ----------
    filt : object
        A filter with filterpy's ``mahalanobis``.

    Attributes
    ----------
    values : list of float or None
        One NIS a recorded step.
    seconds : float
        The time reading them took (a learned filter computes its innovation when it is read), for
        a caller that times the run.

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> system = kb.systems.Rotation()
    >>> ekf = kb.filters.ExtendedKalman(system)
    >>> recorder = NISRecorder(ekf)
    >>> _ = ekf.batch_filter(system.simulate(300, rng=0)[1], saver=recorder)
    >>> len(recorder.values), recorder.values[0] is None, bool(1.6 < recorder.mean() < 2.4)
    (300, True, True)
    """

    def __init__(self, filt):
        if not hasattr(filt, "mahalanobis"):
            raise ValueError(f"filt: expected a filter with filterpy's mahalanobis, got {type(filt).__name__}")
        self.filt, self.values, self.seconds = filt, [], 0.0

    def save(self):
        """Record the NIS of the filter's last update."""
        start = time.perf_counter()
        distance = self.filt.mahalanobis
        self.values.append(None if distance is None else float(distance) ** 2)
        self.seconds += time.perf_counter() - start

    def mean(self):
        """The mean NIS over the recorded steps that have one.

        Returns
        -------
        float or None
            The mean; None when no step has an innovation.
        """
        values = [v for v in self.values if v is not None]
        return float(np.mean(values)) if values else None


def chi2_band(dim, n_steps, level=0.95):
    """Where the average of ``n_steps`` independent chi-squared(``dim``) values falls with
    probability ``level``: the two-sided interval for a mean NEES (or NIS) of a consistent filter.

    Parameters
    ----------
    dim : int
        Degrees of freedom of one value (``dim_x`` for the NEES).
    n_steps : int
        How many values are averaged.
    level : float in (0, 1), default=0.95
        The probability.

    Returns
    -------
    low, high : float
        ``chi2.ppf((1 -+ level) / 2, dim * n_steps) / n_steps``.
    """
    dim = check_int(dim, "dim")
    n_steps = check_int(n_steps, "n_steps")
    level = check_fraction(level, "level", below_one=True)  # a band held with certainty is the whole half-line
    low, high = _scipy_stats.chi2.ppf([(1 - level) / 2, (1 + level) / 2], dim * n_steps) / n_steps
    return float(low), float(high)
