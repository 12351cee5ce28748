"""The particle belief: weighted particles, their estimate, and resampling when it is due.

Every particle filter in kbfilter (the bootstrap particle filter with a known model, the
nearest-neighbour particle filter and the Kernel Monte Carlo filter) holds its belief in one
:class:`ParticleBelief`; they differ only in how an observation weighs the particles.
"""

import numpy as np
from scipy.special import logsumexp

from .._validation import check_covariance, check_matrix, check_rng, check_vector, check_within_magnitude
from .._warnings import warn_user
from ..embedding import weighted_covariance
from ..persistence import persistent

__all__ = ["ParticleBelief", "HoldsParticles", "DrawsFromOwnGenerator", "ParticleWeightsAlias",
           "check_particle_weights", "resampling_due", "systematic_resample", "MAX_PARTICLES"]

#: the most particles a filter takes (a saved file is untrusted: it must not ask for unbounded memory)
MAX_PARTICLES = 10**6


def check_particle_weights(weights, name="weights", n=None):
    """``weights`` checked as the normalised weights of particles: finite, none negative, summing to
    1 (to 1e-6; what normalisation leaves is about 1e-15 a particle).

    Parameters
    ----------
    weights : array-like of shape (n,)
        The weights.
    name : str, default="weights"
        How the messages call them.
    n : int, optional
        The number of particles, when it is known.

    Returns
    -------
    ndarray of shape (n,)
        The weights, as float64.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if n is not None and weights.shape != (n,):
        raise ValueError(f"{name}: expected one weight per particle, shape ({n},), got {weights.shape}")
    if weights.ndim != 1 or not weights.size:
        raise ValueError(f"{name}: expected a 1-D array with one weight a particle, got shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or weights.min() < 0:
        raise ValueError(f"{name}: expected finite, non-negative weights")
    if abs(weights.sum() - 1.0) > 1e-6:
        raise ValueError(f"{name}: expected normalised weights summing to 1, got a sum of {weights.sum():.6g}")
    return weights


def resampling_due(weights, threshold):
    """Whether weighted particles are due for resampling (the rule every particle filter here uses).

    Parameters
    ----------
    weights : ndarray of shape (n,)
        Normalised weights (finite, non-negative, summing to 1).
    threshold : float in (0, 1]
        The fraction of ``n`` the effective sample size ``1 / sum_j w_j^2`` must not fall below;
        1 means after every update.

    Returns
    -------
    bool
        True when the particles should be resampled.
    """
    weights = check_particle_weights(weights)
    return threshold >= 1 or 1.0 / np.sum(weights**2) < threshold * len(weights)


def systematic_resample(weights, rng):
    """Systematic resampling: one uniform draw, ``n`` evenly spaced positions.

    (filterpy's ``systematic_resample`` draws from numpy's global state; this one takes ``rng``.)

    Parameters
    ----------
    weights : ndarray of shape (n,)
        Normalised weights (finite, non-negative, summing to 1).
    rng : numpy.random.Generator or int
        The random numbers, or a seed for them.

    Returns
    -------
    ndarray of int, shape (n,)
        The indices of the particles kept, each as often as it is drawn.
    """
    weights = check_particle_weights(weights)
    n = len(weights)
    positions = (check_rng(rng, "rng").uniform() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, positions)


@persistent("particles", "weights")
class ParticleBelief:
    """Particles ``x_j`` with normalised weights ``a_j``: a weighted sample of the state's law.

    Parameters
    ----------
    particles : array-like of shape (n, dim_x)
        The particles.
    weights : array-like of shape (n,), optional
        Their normalised weights (finite, non-negative, summing to 1); equal weights by default.

    Attributes
    ----------
    particles : ndarray of shape (n, dim_x)
    weights : ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> belief = ParticleBelief(np.array([[0.0], [1.0], [2.0], [3.0]]))
    >>> round(belief.reweight_log(np.log([1.0, 1.0, 2.0, 4.0])), 4)   # log of the mean likelihood, 2
    0.6931
    >>> belief.estimate()[0]
    array([2.125])
    >>> belief.resample_if_due(0.9, np.random.default_rng(0)), belief.weights
    (True, array([0.25, 0.25, 0.25, 0.25]))
    """

    def __init__(self, particles, weights=None):
        self.particles = check_matrix(particles, "particles")
        n = len(self.particles)
        self.weights = np.full(n, 1.0 / n) if weights is None else check_particle_weights(weights, n=n)

    def _after_load(self):
        # a saved file is untrusted: the particles are squared into the covariance, which must not overflow
        check_within_magnitude(self.particles, "particles")

    @classmethod
    def drawn_from(cls, states, n, rng):
        """``n`` equally weighted particles drawn uniformly from ``states`` (with replacement only
        when there are fewer states than particles).

        Parameters
        ----------
        states : ndarray of shape (m, dim_x)
            The states to draw from, e.g. the training states.
        n : int
            The number of particles.
        rng : numpy.random.Generator
            The random numbers.

        Returns
        -------
        ParticleBelief
            The belief.
        """
        m = states.shape[0]
        return cls(states[rng.choice(m, size=n, replace=m < n)])

    @classmethod
    def drawn_from_gaussian(cls, prior, dim, n, rng, name="prior"):
        """``n`` equally weighted particles drawn from a Gaussian given as ``(mean, cov)``.

        Parameters
        ----------
        prior : tuple (mean, cov)
            The mean, of shape (dim,), and the covariance, of shape (dim, dim) (symmetric
            positive semi-definite); checked as ``name[0]`` and ``name[1]``.
        dim : int
            The state's dimension.
        n : int
            The number of particles.
        rng : numpy.random.Generator
            The random numbers.
        name : str, default="prior"
            The argument's name, for the messages.

        Returns
        -------
        ParticleBelief
            The belief.
        """
        mean = check_vector(prior[0], f"{name}[0]", length=dim)
        cov = check_covariance(prior[1], f"{name}[1]", dim)
        return cls(rng.multivariate_normal(mean, cov, size=n))

    @property
    def ess(self):
        """The effective sample size ``1 / sum_j a_j^2``."""
        return 1.0 / np.sum(self.weights**2)

    def estimate(self):
        """The weighted mean and covariance of the particles.

        Returns
        -------
        mean : ndarray of shape (dim_x,)
            ``sum_j a_j x_j``.
        cov : ndarray of shape (dim_x, dim_x)
            The weighted covariance.
        """
        return self.weights @ self.particles, weighted_covariance(self.particles, self.weights)

    def reweight_log(self, loglik):
        """Multiply the weights by ``exp(loglik)`` and normalise, in log space.

        Parameters
        ----------
        loglik : ndarray of shape (n,)
            The log likelihood of the observation at each particle.

        Returns
        -------
        float
            ``log sum_j a_j exp(loglik_j)``: the log of the normaliser (the log likelihood of the
            observation under the belief the weights held before). When it is not finite (no
            particle gives the observation a finite, positive likelihood, e.g. one so far away that
            its squared distance overflows), the weights are left as they were and the caller
            decides.
        """
        log_norm = self.log_predictive(loglik)
        if np.isfinite(log_norm):
            with np.errstate(divide="ignore"):  # a particle of weight 0 keeps it: log 0 = -inf
                log_weights = np.log(self.weights)
                weights = np.exp(log_weights + loglik - log_norm)
                if abs(weights.sum() - 1.0) > 1e-9:
                    # log likelihoods so large that the log weights were lost adding them (-1e300 +
                    # log 0.01 is -1e300, and every weight came out 1): the same relative to the largest
                    shifted = log_weights + (loglik - np.max(loglik))
                    weights = np.exp(shifted - np.max(shifted))
                    weights /= weights.sum()
            self.weights = weights
        return log_norm

    def log_predictive(self, loglik):
        """``log sum_j a_j exp(loglik_j)``: the log likelihood of an observation under the belief,
        the weights left as they are.

        Parameters
        ----------
        loglik : ndarray of shape (n,)
            The log likelihood of the observation at each particle.

        Returns
        -------
        float
            The log predictive density (``-inf`` when no particle gives it a positive likelihood).
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            return float(logsumexp(np.log(self.weights) + loglik))

    def reweight(self, factor):
        """Multiply the weights by ``factor`` (non-negative) and normalise.

        Parameters
        ----------
        factor : ndarray of shape (n,)
            The likelihood, up to a constant, at each particle.

        Returns
        -------
        bool
            False, with the weights left as they were, when no particle keeps a positive weight.
        """
        factor = np.asarray(factor, dtype=np.float64)
        if factor.shape != self.weights.shape:
            raise ValueError(f"factor: expected one value per particle, shape {self.weights.shape}, got {factor.shape}")
        if np.any(factor < 0):
            raise ValueError("factor: expected a non-negative likelihood at each particle")
        a = self.weights * factor
        total = a.sum()
        if not total > 0:
            return False
        self.weights = a / total
        return True

    def roughen(self, scale, rng):
        """Roughening (Gordon, Salmond and Smith 1993): move each particle by a draw of
        ``N(0, diag(s^2))`` with ``s_j = scale * E_j * N^(-1/d)``, ``E_j`` the particles' range along
        coordinate ``j``: after a resampling, copies of one particle are told apart again.

        Parameters
        ----------
        scale : float
            ``K``, the tuning constant (Gordon et al. use 0.2).
        rng : numpy.random.Generator
            The random numbers.
        """
        n, d = self.particles.shape
        spread = scale * np.ptp(self.particles, axis=0) * n ** (-1.0 / d)
        self.particles = self.particles + rng.standard_normal((n, d)) * spread

    def resample_if_due(self, threshold, rng):
        """Resample systematically, to equal weights, when the effective sample size falls below
        ``threshold`` times the number of particles (see :func:`resampling_due`).

        Parameters
        ----------
        threshold : float in (0, 1]
            The fraction; 1 resamples every time.
        rng : numpy.random.Generator
            The random numbers.

        Returns
        -------
        bool
            Whether the particles were resampled.
        """
        if not resampling_due(self.weights, threshold):
            return False
        self.replace(self.particles[systematic_resample(self.weights, rng)])
        return True

    def replace(self, particles):
        """New, equally weighted particles (same number).

        Parameters
        ----------
        particles : ndarray of shape (n, dim_x)
            The particles.
        """
        self.particles = particles
        self.weights = np.full(len(particles), 1.0 / len(particles))


class HoldsParticles:
    """Mixin for a filter whose belief is a :class:`ParticleBelief` held in ``belief``: the
    particles and their weights under the names every particle filter here gives them."""

    @property
    def particles(self):
        """The current particles: ndarray of shape (n_particles, dim_x)."""
        return self.belief.particles

    @particles.setter
    def particles(self, value):
        # assigned alone, they would keep the old weights and estimate: the belief is set as a whole
        call = self._belief_call()
        how = f"set them with {call.replace('...', 'samples')}" if call else "reset() draws them afresh"
        raise AttributeError(f"particles: {type(self).__name__}'s particles are its belief, with their weights "
                             f"and its estimate; {how}")

    @property
    def particle_weights(self):
        """The particles' normalised weights: ndarray of shape (n_particles,)."""
        return self.belief.weights

    def _estimate_particles(self, *which):
        """Record the particles' weighted mean and covariance as the ``"prior"`` and/or ``"post"``
        estimate (computed once)."""
        mean, cov = self.belief.estimate()
        for name in which:
            self._set_estimate(name, mean, cov)


class DrawsFromOwnGenerator:
    """Mixin for a filter that draws from a generator of its own, ``_rng``, started from its
    ``random_state``: ``rng_state``, the generator's state, saved with the filter so that a
    loaded filter draws on where the saved one would have."""

    @property
    def rng_state(self):
        """The state of the filter's random generator (saved with it, so a loaded filter draws on)."""
        return self._rng.bit_generator.state

    @rng_state.setter
    def rng_state(self, state):
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = state


# a descriptor and not a property: filterpy's Saver reads every property of a filter each step, and
# warned about a name its user never wrote
class _DeprecatedWeights:
    """Deprecated: the particle weights; use ``particle_weights``."""

    def __set__(self, filt, value):
        raise AttributeError(f"{type(filt).__name__}.weights cannot be assigned (and is deprecated: the particle "
                             f"weights are particle_weights)")

    def __get__(self, filt, owner=None):
        if filt is None:
            return self
        warn_user(f"{type(filt).__name__}.weights is deprecated and will be removed; use particle_weights "
                  f"(weights are the kernel filters' weights over the training states)", FutureWarning)
        return filt.particle_weights


class ParticleWeightsAlias:
    """Mixin: ``weights`` as the deprecated name of ``particle_weights`` (in kbfilter ``weights``
    are the kernel filters' weights over training states)."""

    weights = _DeprecatedWeights()
