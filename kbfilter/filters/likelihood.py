"""The learned observation density: how likely an observation is at each training state.

Kernel Bayes' rule never writes the observation model down as a density; it needs only inner
products in the observation kernel's feature space. A tracker needs the density itself: to gate
a measurement, to compare two fitted filters on held-out data, and (for the smoother) to weigh
the training states by the observations still to come. :class:`ObservationDensity` is the kernel
density estimate that sits behind the observation kernel: one Gaussian component at each training
observation ``z_j``, with the kernel's own bandwidth on each coordinate,

    p(z | x_j) ~ N(z; z_j, diag(h^2)),

in the space the observation kernel sees (after the feature map, if any). The predictive density
of a new observation under a belief ``w`` over the training states is then the mixture
``sum_j w_j N(z; z_j, diag(h^2))`` (the clipped, normalised positive part of ``w``): a proper
density that integrates to one. See :ref:`smoothing` for how the filters use it.

The same prediction gives filterpy's innovation of an observation, ``y`` and ``S``
(:class:`Innovation`); a filter that knows its sensor model predicts it through the sensor instead
(:class:`SensorInnovation`).
"""

import sys

import numpy as np
from scipy.special import logsumexp

from .._validation import check_matrix, check_vector
from ..embedding import clipped_weights
from ..kernels import GaussianKernel, fitted_kernel, squared_distances
from ..linalg import psd_solve
from ..systems.base import predicted_measurement, sensor_residual

__all__ = ["ObservationDensity", "Innovation", "Likelihood", "PredictiveLikelihood", "KnownInnovation",
           "SensorInnovation"]


class ObservationDensity:
    """A Gaussian kernel density with one component at each training observation.

    Parameters
    ----------
    observations : ndarray of shape (n, d)
        The training observations, in the space the observation kernel sees.
    bandwidths : ndarray of shape (d,)
        The standard deviation of every component along each coordinate.

    Examples
    --------
    >>> import numpy as np
    >>> density = ObservationDensity(np.array([[0.0], [2.0]]), np.array([1.0]))
    >>> round(float(np.exp(density.log_predictive(np.array([1.0, 0.0]), np.array([[0.0]]))[0])), 12)  # N(0; 0, 1)
    0.398942280401
    """

    def __init__(self, observations, bandwidths):
        observations = check_matrix(observations, "observations", allow_1d=False)
        bandwidths = check_vector(bandwidths, "bandwidths", length=observations.shape[1])
        if not np.all(bandwidths > 0):  # a log of 0 or of a negative number: every density NaN or infinite
            raise ValueError(f"bandwidths: expected positive standard deviations, got {bandwidths.min():g}")
        self._build(observations, bandwidths)

    def _build(self, observations, bandwidths):
        self.observations, self.bandwidths = observations, bandwidths
        self._scaled = observations / self.bandwidths
        self._centre = self._scaled.mean(axis=0)
        d = observations.shape[1]
        self._log_norm = -np.sum(np.log(self.bandwidths)) - 0.5 * d * np.log(2.0 * np.pi)

    @classmethod
    def of(cls, observations, kernel):
        """The density behind a fitted observation kernel.

        A Gaussian kernel (also under a Nystrom or random-feature approximation) gives its own
        bandwidth, per column when it is standardised. Any other kernel (linear, Laplace, a
        user's) has no Gaussian bandwidth to take: the density then uses the median heuristic on
        standardised columns, as the filters' default observation kernel does.

        Parameters
        ----------
        observations : ndarray of shape (n, d)
            The training observations the kernel was fitted on.
        kernel : Kernel
            The fitted observation kernel.

        Returns
        -------
        ObservationDensity
            The density.
        """
        base = getattr(kernel, "kernel_", kernel)
        if not isinstance(base, GaussianKernel):
            base = fitted_kernel(GaussianKernel(standardise=True), "kernel_z", observations)
        h = np.full(observations.shape[1], base.bandwidth_, dtype=np.float64)
        if base.standardise:
            h = h * base.column_scale_
        return cls(observations, h)

    def restricted(self, support):
        """The density of the components at ``support`` only: the predictive density of a belief
        that is zero elsewhere, in ``O(len(support))``.

        Parameters
        ----------
        support : ndarray of int
            Indices of training observations.

        Returns
        -------
        ObservationDensity
            Over ``observations[support]``, with the same bandwidths.
        """
        # built from checked parts without the boundary checks: the local filter restricts every step
        density = ObservationDensity.__new__(ObservationDensity)
        density._build(self.observations[support], self.bandwidths)
        return density

    def moments(self, weights, noise=True):
        """The mean and covariance of the predictive mixture under a belief.

        Parameters
        ----------
        weights : ndarray of shape (n,)
            The belief over the training states (its clipped, normalised positive part is used;
            uniform when no weight is positive).
        noise : bool, default=True
            Add the components' own spread ``diag(h^2)`` (the predicted observation's covariance);
            False gives the spread of the training observations' mean alone.

        Returns
        -------
        mean : ndarray of shape (d,)
            ``sum_j w_j z_j``.
        cov : ndarray of shape (d, d)
            The weighted covariance of the ``z_j``, plus ``diag(h^2)`` with ``noise``.
        """
        p = self.mixture_weights(weights)
        mean = p @ self.observations
        centred = self.observations - mean
        cov = (centred * p[:, None]).T @ centred
        if noise:
            cov = cov + np.diag(self.bandwidths**2)
        return mean, cov

    def predicted_observation(self, weights):
        """The mean and covariance ``S`` of the next observation under a predicted belief.

        The training observations are noisy draws, so their spread under the belief already holds
        the observation noise, and the components' ``diag(h^2)`` would count it twice (on a
        linear-Gaussian system the spread approaches the Kalman filter's ``S``, the mixture's
        covariance exceeds it by ``h^2``). Where the spread is singular (a belief on fewer distinct
        observations than ``d + 1``), ``diag(h^2)`` is added: the mixture's covariance.

        Parameters
        ----------
        weights : ndarray of shape (n,)
            The predicted belief over the training states (as :meth:`moments` reads it).

        Returns
        -------
        mean : ndarray of shape (d,)
            ``sum_j w_j z_j``.
        S : ndarray of shape (d, d)
            Positive definite.
        """
        mean, S = self.moments(weights, noise=False)
        try:
            np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            S = S + np.diag(self.bandwidths**2)
        return mean, S

    def mixture_weights(self, weights):
        """The mixture's weights for a belief: its clipped, normalised positive part, or equal
        weights when no weight is positive.

        Parameters
        ----------
        weights : ndarray of shape (n,)
            The belief over the training states.

        Returns
        -------
        ndarray of shape (n,)
            Non-negative weights summing to 1.
        """
        p = clipped_weights(weights)
        return np.full(len(weights), 1.0 / len(weights)) if p is None else p

    def log_components(self, rows):
        """``log N(z_q; z_j, diag(h^2))`` for every training observation ``j`` and row ``q``.

        Parameters
        ----------
        rows : ndarray of shape (q, d)
            Observations in the density's space.

        Returns
        -------
        ndarray of shape (n, q)
            The log densities.
        """
        return self._log_components(self._scaled, rows)

    def _log_components(self, scaled, rows):
        # measured from the training observations' centre: no cancellation for data far from 0
        sq = squared_distances(scaled - self._centre, rows / self.bandwidths - self._centre)
        return self._log_norm - 0.5 * sq

    def log_predictive(self, weights, rows):
        """``log sum_j w_j N(z_q; z_j, diag(h^2))`` for each row: the log density of an
        observation under a belief over the training states.

        Parameters
        ----------
        weights : ndarray of shape (n,)
            The belief; its clipped, normalised positive part is used (uniform when no weight
            is positive).
        rows : ndarray of shape (q, d)
            Observations in the density's space.

        Returns
        -------
        ndarray of shape (q,)
            The log predictive densities.
        """
        p = self.mixture_weights(weights)
        keep = p > 0
        return logsumexp(self._log_components(self._scaled[keep], rows), b=p[keep][:, None], axis=0)


class _Pending:
    """An observation whose likelihood and innovation are computed when first asked for. It refers
    to the learned observation model (shared by copies of a filter) and not to its density, so that
    filterpy's ``Saver``, which copies a filter every step, copies only the weights and the
    observation."""

    def __init__(self, observation, weights, row, support=None):
        self.observation, self.weights, self.row, self.support = observation, weights, row, support
        self.value = self.innovation = None

    def _density(self):
        density = self.observation.density
        return density if self.support is None else density.restricted(self.support)

    def log_likelihood(self):
        if self.value is None:
            self.value = float(self._density().log_predictive(self.weights, self.row)[0])
        return self.value

    def residual_and_covariance(self):
        """``(y, S)``, or None where the density's space is not the observations' own."""
        space = self.observation.space
        if len(space.obs_shape) > 1 or space.features is not None:
            return None
        if self.innovation is None:
            mean, S = self._density().predicted_observation(self.weights)
            self.innovation = (self.row[0] - mean, S)
        return self.innovation


class Innovation:
    """Mixin: filterpy's ``y``, ``S`` and ``mahalanobis`` of the last observation a filter was
    given, from the filter's ``_innovation()``: the pair ``(y, S)``, or None where there is none
    (after a missing observation, before any, or where the filter cannot say). By default the
    pair comes from ``_measured``, what ``update`` sets (None without an observation): an object
    whose ``residual_and_covariance()`` computes it, such as a :class:`SensorInnovation`. Each
    filter's notes say what its predicted observation is."""

    _measured = None

    def _innovation(self):
        return None if self._measured is None else self._measured.residual_and_covariance()

    @property
    def y(self):
        """The residual ``z - z_hat`` of the last observation given to ``update``, from the
        predicted observation ``z_hat``, as filterpy's ``y``; None where there is none."""
        innovation = self._innovation()
        return None if innovation is None else innovation[0].copy()

    @property
    def S(self):
        """The covariance of the predicted observation at the last ``update``, as filterpy's
        ``S``; None where :attr:`y` is."""
        innovation = self._innovation()
        return None if innovation is None else innovation[1].copy()

    @property
    def mahalanobis(self):
        """``sqrt(y^T S^{-1} y)`` of the last observation, as filterpy's (its square is the
        normalised innovation squared, :func:`kbfilter.stats.nis`); None where :attr:`y` is."""
        innovation = self._innovation()
        if innovation is None:
            return None
        y, S = innovation
        # a singular S (an observation the belief predicts exactly in some direction) through its
        # pseudo-inverse, as the Kalman filters' SI is
        return float(np.sqrt(y @ psd_solve(S, y)[0]))


class Likelihood:
    """Mixin: filterpy's ``likelihood``, ``exp(log_likelihood)`` of a filter that keeps its
    ``log_likelihood``."""

    @property
    def likelihood(self):
        """``exp(log_likelihood)`` (None after a missing observation, and before any), floored at
        the smallest positive float as filterpy's is."""
        value = self.log_likelihood
        return None if value is None else max(float(np.exp(value)), sys.float_info.min)


class PredictiveLikelihood(Likelihood, Innovation):
    """Mixin: ``log_likelihood`` and ``likelihood`` of the last observation a filter was given, and
    its residual ``y``, the predicted observation's covariance ``S`` and ``mahalanobis`` (filterpy's
    names), computed from its learned :class:`ObservationDensity` when first read (a filter that
    never reads them never pays for them: ``O(n d)`` a step, images included, and ``O(n d^2)`` for
    ``S``).

    A filter calls :meth:`_observed` with its learned observation model, the predicted belief over
    the training states (or over ``support``, the training states it covers) and the mapped
    observation in ``update``, and :meth:`_unobserved` when there is none.
    """

    def _observed(self, observation, weights, row, support=None):
        # y and S come from it too: the predictive mixture's mean and
        # ObservationDensity.predicted_observation's S
        self._measured = _Pending(observation, weights, row, support)

    def _unobserved(self):
        self._measured = None

    @property
    def log_likelihood(self):
        """The log predictive density of the last observation given to ``update`` under the
        predicted belief (None after a missing one, and before any), from the learned observation
        density: computed when first read."""
        return None if self._measured is None else self._measured.log_likelihood()


class KnownInnovation:
    """An innovation computed already: ``(y, S)`` as given.

    Parameters
    ----------
    y : ndarray of shape (dim_z,)
        The residual of the observation from the predicted one.
    S : ndarray of shape (dim_z, dim_z)
        The predicted observation's covariance.
    """

    def __init__(self, y, S):
        self.y, self.S = y, S

    def residual_and_covariance(self):
        """The innovation.

        Returns
        -------
        tuple of (ndarray of shape (dim_z,), ndarray of shape (dim_z, dim_z))
            ``(y, S)``.
        """
        return self.y, self.S


class SensorInnovation:
    """An observation against the predicted particles of a filter that knows its sensor: ``(y, S)``,
    computed when first asked for, as a particle filter predicts a measurement (the weighted mean
    and spread of ``h(x)`` over the particles, the sensor's own average and residual, plus its
    ``observation_cov``).

    Nothing in it changes but that cache, which it fills the same way for any holder, so copies
    of a filter (one a track) share it; once it is filled, the particles are let go.

    Parameters
    ----------
    sensor : object
        The sensor model: ``observe_mean(X)`` and ``observation_cov`` (a :class:`~kbfilter.systems.System`
        or a sensor of :mod:`kbfilter.systems`).
    z : ndarray of shape (dim_z,)
        The observation, checked.
    points : ndarray of shape (n, dim_x)
        The predicted particles (or candidates).
    weights : ndarray of shape (n,)
        Their weights before the observation, summing to one.
    """

    def __init__(self, sensor, z, points, weights):
        self.sensor, self.z, self.points, self.weights = sensor, z, points, weights
        self.innovation = None

    def __deepcopy__(self, memo):
        return self

    def residual_and_covariance(self):
        """The innovation of the observation, computed on the first call.

        Returns
        -------
        tuple of (ndarray of shape (dim_z,), ndarray of shape (dim_z, dim_z)), or None
            ``(y, S)``; None for a sensor without a mean observation and a noise covariance (a
            system that observes images defines neither).
        """
        sensor = self.sensor
        noise = getattr(sensor, "observation_cov", None)
        if noise is None or not callable(getattr(sensor, "observe_mean", None)):
            return None
        if self.innovation is None:
            try:
                mean, spread, _ = predicted_measurement(sensor, self.points, self.weights)
            except NotImplementedError:  # a System that does not define h(x)
                return None
            self.innovation = (sensor_residual(sensor, self.z, mean), spread + np.asarray(noise, dtype=np.float64))
            # a run's innovations may all be kept (filterpy's Saver keeps each step's): without the
            # particles, one is a few numbers
            self.points = self.weights = None
        return self.innovation
