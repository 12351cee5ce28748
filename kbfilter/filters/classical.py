"""Known-model baselines on the same systems: EKF, UKF (filterpy) and a bootstrap particle filter.

They are handed the true :class:`~kbfilter.systems.System`; the kernel Bayes filter is not.
All share the filterpy surface with 1-D ``x`` and ``z``. ``batch_filter`` on a filter that was
not given an initial belief starts from the first observation: belief ``system.initial_belief(z_0)``
(``N(z_0, R)`` for the circular systems) at t = 0, so ``z_0`` is not used twice.
"""

import warnings

import numpy as np
from filterpy.kalman import ExtendedKalmanFilter, MerweScaledSigmaPoints, UnscentedKalmanFilter
from scipy.linalg import LinAlgError
from scipy.special import logsumexp

from .._validation import check_int, check_matrix, check_observation, check_rng, check_vector
from ..embedding import weighted_covariance
from ..linalg import NumericalWarning
from ..systems import System
from .base import SequentialFilter

__all__ = ["ExtendedKalman", "UnscentedKalman", "ParticleFilter"]


class _StartsFromFirstObservation(SequentialFilter):
    """``batch_filter`` on a filter given no belief starts from ``system.initial_belief(z_0)`` at
    t = 0 (so ``z_0`` is not used twice), or, for systems with no belief from one observation
    (images), from :meth:`_start_without_belief`."""

    def _start_batch(self, zs):
        if self.initialized:
            return 0, []
        shape = self.system.obs_shape or (self.system.dim_z,)
        z0 = check_observation(zs[0], shape, "zs[0]").reshape(shape)
        try:
            belief = self.system.initial_belief(z0)
        except NotImplementedError:
            self._start_without_belief()
            return 0, []
        self.initialize(*belief)
        return 1, [(self.x.copy(), self.P.copy(), self.x.copy(), self.P.copy())]

    def _start_without_belief(self):
        raise ValueError(f"zs: {type(self.system).__name__} gives no belief from one observation; "
                         f"call initialize(x0, P0) first")


def _check_system(system):
    if not isinstance(system, System):
        raise ValueError(f"system: expected a kbfilter System, got {type(system).__name__}")
    return system


class _GaussianFilter(_StartsFromFirstObservation):
    """Shared bookkeeping for the Kalman-type filters, which keep the filterpy object in ``kf``."""

    def initialize(self, x0, P0):
        """Set the belief to ``N(x0, P0)``."""
        self.kf.x = check_vector(x0, "x0", length=self.system.dim_x).copy()
        P0 = check_matrix(P0, "P0", n_features=self.system.dim_x, allow_1d=False)
        self.kf.P = P0.copy()
        for name in ("x_prior", "x_post"):
            setattr(self.kf, name, self.kf.x.copy())
        for name in ("P_prior", "P_post"):
            setattr(self.kf, name, self.kf.P.copy())
        self.initialized = True
        return self

    def _check_z(self, z):
        return None if z is None else check_observation(z, (self.system.dim_z,))

    x = property(lambda self: self.kf.x)
    P = property(lambda self: self.kf.P)
    x_prior = property(lambda self: self.kf.x_prior)
    P_prior = property(lambda self: self.kf.P_prior)
    x_post = property(lambda self: self.kf.x_post)
    P_post = property(lambda self: self.kf.P_post)


class _TrueDynamicsEKF(ExtendedKalmanFilter):
    # filterpy's EKF propagates the mean linearly (x = F x); ours goes through the true f
    def __init__(self, system):
        super().__init__(system.dim_x, system.dim_z)
        self.system = system

    def predict_x(self, u=0):
        self.x = self.system.transition_mean(self.x[None, :])[0]


class ExtendedKalman(_GaussianFilter):
    """Extended Kalman filter with the true model (filterpy ``ExtendedKalmanFilter``).

    The mean goes through the nonlinear transition, the covariance through its Jacobian.

    Examples
    --------
    >>> from kbfilter.systems import Rotation
    >>> system = Rotation()
    >>> states, obs = system.simulate(50, rng=0)
    >>> means, covs, _, _ = ExtendedKalman(system).batch_filter(obs)
    >>> means.shape
    (50, 2)
    """

    def __init__(self, system):
        self.system = _check_system(system)
        self.kf = _TrueDynamicsEKF(system)
        self.kf.Q = system.process_cov
        self.kf.R = system.observation_cov
        self.kf.x = np.zeros(system.dim_x)
        self.initialized = False

    def predict(self):
        self.kf.F = self.system.transition_jacobian(self.kf.x)
        self.kf.predict()

    def update(self, z):
        z = self._check_z(z)
        if z is None:
            self.kf.x_post, self.kf.P_post = self.kf.x.copy(), self.kf.P.copy()
            return
        self.kf.update(z, lambda x: self.system.observation_jacobian(x),
                       lambda x: self.system.observe_mean(x[None, :])[0])


class UnscentedKalman(_GaussianFilter):
    """Unscented Kalman filter with the true model (filterpy, Merwe scaled sigma points).

    If a covariance loses positive definiteness (filterpy's Cholesky fails), it is symmetrised
    and given a jitter of 1e-9 times its mean diagonal, with a warning; ``diagnostics`` counts it.
    """

    def __init__(self, system, alpha=1.0, beta=2.0, kappa=0.0):
        self.system = _check_system(system)
        points = MerweScaledSigmaPoints(system.dim_x, alpha=alpha, beta=beta, kappa=kappa)
        self.kf = UnscentedKalmanFilter(
            dim_x=system.dim_x, dim_z=system.dim_z, dt=1.0, points=points,
            fx=lambda x, dt: system.transition_mean(x[None, :])[0],
            hx=lambda x: system.observe_mean(x[None, :])[0],
        )
        self.kf.Q = system.process_cov
        self.kf.R = system.observation_cov
        self.initialized = False
        self.diagnostics = {"jitter": 0}

    def predict(self):
        try:
            self.kf.predict()
        except (LinAlgError, np.linalg.LinAlgError):
            P = 0.5 * (self.kf.P + self.kf.P.T)
            self.kf.P = P + 1e-9 * np.mean(np.abs(np.diag(P))) * np.eye(P.shape[0])
            self.diagnostics["jitter"] += 1
            warnings.warn("UnscentedKalman: covariance not positive definite; symmetrised with jitter",
                          NumericalWarning, stacklevel=2)
            self.kf.predict()

    def update(self, z):
        z = self._check_z(z)
        self.kf.update(z)  # filterpy: update(None) keeps the prior as the posterior


class ParticleFilter(_StartsFromFirstObservation):
    """Bootstrap particle filter with the true model and systematic resampling every step.

    Parameters
    ----------
    system : System
    n_particles : int
    rng : int, Generator or None
        All randomness (initial draw, transitions, resampling) comes from this Generator.

    Attributes
    ----------
    ess : float
        Effective sample size ``1 / sum_i p_i^2`` at the last update.
    """

    def __init__(self, system, n_particles=1000, rng=None):
        self.system = _check_system(system)
        self.n_particles = check_int(n_particles, "n_particles", minimum=2)
        self.rng = check_rng(rng)
        self.initialized = False

    def initialize(self, x0, P0):
        x0 = check_vector(x0, "x0", length=self.system.dim_x)
        return self._start_from(self.rng.multivariate_normal(x0, P0, size=self.n_particles))

    def _start_from(self, particles):
        self.particles = particles
        self.weights = np.full(self.n_particles, 1.0 / self.n_particles)
        self._estimate("prior")
        self._estimate("post")
        self.initialized = True
        return self

    def _start_without_belief(self):
        # no belief from one observation (images): start from the dynamics' stationary law
        self.initialize_stationary()

    def initialize_stationary(self, burn_in=50):
        """Particles from the stationary law: independent runs of the dynamics for ``burn_in`` steps."""
        particles = np.array([self.system.initial_state(self.rng) for _ in range(self.n_particles)])
        for _ in range(burn_in):
            particles = self.system.sample_transition(particles, self.rng)
        return self._start_from(particles)

    def _estimate(self, which):
        mean = self.weights @ self.particles
        cov = weighted_covariance(self.particles, self.weights)
        setattr(self, f"x_{which}", mean)
        setattr(self, f"P_{which}", cov)
        self.x, self.P = mean, cov

    def predict(self):
        self.particles = self.system.sample_transition(self.particles, self.rng)
        self._estimate("prior")

    def update(self, z):
        if z is None:
            self._estimate("post")
            return
        z = check_observation(z, self.system.obs_shape or (self.system.dim_z,))
        logw = np.log(self.weights) + self.system.observation_loglik(z, self.particles)
        self.weights = np.exp(logw - logsumexp(logw))
        self.ess = 1.0 / np.sum(self.weights**2)
        self._estimate("post")
        self._resample()

    def _resample(self):
        # filterpy's systematic_resample draws from numpy's global state; ours uses self.rng
        n = self.n_particles
        positions = (self.rng.uniform() + np.arange(n)) / n
        cumulative = np.cumsum(self.weights)
        cumulative[-1] = 1.0
        self.particles = self.particles[np.searchsorted(cumulative, positions)]
        self.weights = np.full(n, 1.0 / n)
