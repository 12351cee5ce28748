"""Known-model baselines on the same systems: EKF, UKF (filterpy) and a bootstrap particle filter.

They are handed the true :class:`~kbfilter.systems.System`; the kernel Bayes filter is not.
All share the filterpy surface with 1-D ``x`` and ``z``. ``batch_filter`` on a filter that was
not given an initial belief starts from the first observation: belief ``system.initial_belief(z_0)``
(``N(z_0, R)`` for the circular systems) at t = 0, so ``z_0`` is not used twice.
"""

from collections.abc import Iterable

import numpy as np
from filterpy.kalman import ExtendedKalmanFilter, MerweScaledSigmaPoints, UnscentedKalmanFilter
from scipy.linalg import LinAlgError, cholesky
from scipy.special import logsumexp

from .._validation import (
    check_choice,
    check_covariance,
    check_fraction,
    check_int,
    check_matrix,
    check_observation,
    check_positive,
    check_real,
    check_rng,
    check_vector,
)
from .._warnings import warn_user
from ..linalg import NumericalWarning
from ..systems import System
from ..systems.base import (check_dimensions, initial_belief_of, initial_state_of, log_likelihood_of, model_covariance,
                            model_jacobian, observation_mean_of, transition_jacobian_given, transition_mean_given)
from .base import Filter, checked_controls, motion_control_dimension, sample_next, system_control
from .likelihood import Innovation, KnownInnovation, Likelihood, SensorInnovation
from .particles import MAX_PARTICLES, HoldsParticles, ParticleBelief, ParticleWeightsAlias, check_particle_weights
from .smoothing import gaussian_backward_pass

__all__ = ["ExtendedKalman", "UnscentedKalman", "ParticleFilter", "InteractingMultipleModel", "backward_smoothing",
           "DEGENERATE_ESS"]


class _StartsFromFirstObservation(Filter):
    """``batch_filter`` on a filter given no belief starts from ``system.initial_belief(z_0)`` at
    t = 0 (so ``z_0`` is not used twice), or, for systems with no belief from one observation
    (images), from :meth:`_start_without_belief`."""

    def _observation_shape(self):
        return self.system.obs_shape or (self.system.dim_z,)

    def _control_dimension(self):
        return motion_control_dimension(self.system)

    def _check_ready(self, name):
        # the Gaussian filters hold filterpy's zero x and identity P from the start; the others
        # hold a belief only once initialized (an attribute of theirs, not a property)
        if vars(self).get("initialized") is False:
            raise AttributeError(f"{type(self).__name__}: no belief yet, so no {name}; call initialize(x0, P0) "
                                 f"(batch_filter starts from the first observation by itself)")

    def _start_batch(self, zs):
        if self.initialized:
            return 0, []
        shape = self._observation_shape()
        if zs[0] is None:
            raise ValueError("zs[0]: a filter given no belief starts from the first observation, which is missing; "
                             "call initialize(x0, P0) first")
        z0 = check_observation(zs[0], shape, "zs[0]").reshape(shape)
        try:
            belief = initial_belief_of(self.system, z0)
        except NotImplementedError:
            self._start_without_belief()
            return 0, []
        self.initialize(*belief)
        return 1, [(self.x.copy(), self.P.copy(), self.x.copy(), self.P.copy())]

    def _start_without_belief(self):
        raise ValueError(f"zs: {type(self.system).__name__} gives no belief from one observation; "
                         f"call initialize(x0, P0) first")


def _check_system(system, name="system"):
    if not isinstance(system, System):
        raise ValueError(f"{name}: expected a kbfilter System, got {type(system).__name__}")
    return check_dimensions(system)


def _belief_part(name, check, doc):
    """filterpy's ``x`` or ``P``: assigning it sets the belief (prior and posterior included)."""
    def assign(self, value):
        value = check(self, value)
        for attr in (name, f"{name}_prior", f"{name}_post"):
            setattr(self.kf, attr, value.copy())
        self._assigned.add(name)

    return property(lambda self: getattr(self.kf, name), assign, doc=doc)


def _of_last_observation(name, doc):
    """filterpy's ``name`` of the last update, or None after a missing observation and before any:
    filterpy keeps the previous update's, so a run with dropouts counted one innovation and one
    log-likelihood twice."""
    return property(lambda self: getattr(self.kf, name) if self._observed else None,
                    doc=f"{doc} None after a missing observation and before any.")


def _noise(name, dim, doc):
    """filterpy's ``Q`` or ``R``: the system's, unless assigned."""
    def assign(self, value):
        setattr(self.kf, name, check_covariance(value, name, getattr(self.system, dim)))

    return property(lambda self: getattr(self.kf, name), assign, doc=doc)


class _GaussianFilter(_StartsFromFirstObservation):
    """filterpy's surface over the filterpy object kept in ``kf``: ``x`` and ``P`` (assignable,
    which sets the belief), the model's ``Q`` and ``R``, and the last update's gain ``K``,
    residual ``y``, innovation covariance ``S`` and ``log_likelihood``."""

    def _start(self, system):
        self.system = _check_system(system)
        self._observed = False
        self.kf.Q = model_covariance(system, "process_cov", system.dim_x).copy()
        self.kf.R = model_covariance(system, "observation_cov", system.dim_z).copy()
        self._assigned = set()

    def initialize(self, x0, P0):
        """Set the belief to ``N(x0, P0)``.

        Parameters
        ----------
        x0 : array-like of shape (dim_x,)
            Mean.
        P0 : array-like of shape (dim_x, dim_x)
            Covariance.

        Returns
        -------
        self
            The filter, with its belief set.
        """
        self.x, self.P = (check_vector(x0, "x0", length=self.system.dim_x),
                          check_covariance(P0, "P0", self.system.dim_x))
        self._observed = False
        return self

    @property
    def initialized(self):
        """Whether the filter has a belief (``initialize``, or both ``x`` and ``P`` assigned)."""
        return self._assigned == {"x", "P"}

    def _check_initialized(self):
        if not self.initialized:
            raise RuntimeError(f"{type(self).__name__}: no belief yet; call initialize(x0, P0) or assign x and P "
                               f"(batch_filter starts from the first observation by itself)")

    def predict(self, u=None):
        """Propagate the belief through the true transition.

        Parameters
        ----------
        u : array-like of shape (dim_u,) or None
            The control, for a controlled system (one with ``dim_u``, e.g.
            :class:`~kbfilter.systems.ControlledLinearGaussian`); None for the others.
        """
        u = system_control(self.system, u)
        self._check_initialized()
        self._predict(u)

    def update(self, z, R=None):
        """Condition the belief on observation ``z``.

        Parameters
        ----------
        z : array-like of shape (dim_z,) or None
            The observation; None keeps the prior (a missing measurement).
        R : array-like of shape (dim_z, dim_z), optional
            Observation noise covariance for this step only (default: ``self.R``).
        """
        z = None if z is None else check_observation(z, (self.system.dim_z,))
        R = None if R is None else check_covariance(R, "R", self.system.dim_z)
        self._check_initialized()
        self._update(z, R)
        self._observed = z is not None

    def smooth(self, zs, us=None):
        """Rauch-Tung-Striebel smoothing: the belief at every step of a run given the whole run.

        Runs :meth:`batch_filter` over ``zs`` (the filter is left where it leaves it), then the
        backward pass: the EKF's through the transition's Jacobian at each filtered mean, the UKF's
        through sigma points (filterpy's ``UnscentedKalmanFilter.rts_smoother``), each under the
        step's control for a controlled system. For a linear-Gaussian system both are the exact RTS
        smoother.

        Parameters
        ----------
        zs : iterable of array-like or None
            The observations; None is a missing measurement.
        us : iterable of array-like, optional
            The controls, as :meth:`batch_filter` takes them.

        Returns
        -------
        means : ndarray of shape (n_steps, dim_x)
            Smoothed estimates.
        covs : ndarray of shape (n_steps, dim_x, dim_x)
            Their covariances.
        """
        zs, us = self._checked_run(zs, us)
        means, covs, means_p, covs_p = self.batch_filter(zs, us)
        return self._backward(means, covs, means_p, covs_p, us)

    x = _belief_part("x", lambda self, v: check_vector(v, "x", length=self.system.dim_x),
                     "Current state estimate, shape (dim_x,); assigning it sets the belief's mean.")
    P = _belief_part("P", lambda self, v: check_covariance(v, "P", self.system.dim_x),
                     "Current covariance, shape (dim_x, dim_x); assigning it sets the belief's covariance.")
    Q = _noise("Q", "dim_x", "Process noise covariance (the system's, unless assigned).")
    R = _noise("R", "dim_z", "Observation noise covariance (the system's, unless assigned).")
    x_prior = property(lambda self: self.kf.x_prior, doc="Estimate after the last ``predict``.")
    P_prior = property(lambda self: self.kf.P_prior, doc="Covariance after the last ``predict``.")
    x_post = property(lambda self: self.kf.x_post, doc="Estimate after the last ``update``.")
    P_post = property(lambda self: self.kf.P_post, doc="Covariance after the last ``update``.")
    K = _of_last_observation("K", "Kalman gain of the last update.")
    y = _of_last_observation("y", "Residual ``z - h(x_prior)`` of the last update.")
    S = _of_last_observation("S", "Innovation covariance of the last update.")
    log_likelihood = _of_last_observation("log_likelihood",
                                          "Log-likelihood ``log N(y; 0, S)`` of the last observation.")
    likelihood = _of_last_observation("likelihood", "``exp(log_likelihood)``.")
    mahalanobis = _of_last_observation("mahalanobis",
                                       "``sqrt(y^T S^{-1} y)`` of the last observation (its square is the NIS).")


def _pseudo_inverse_used(owner, diagnostics, matrix):
    diagnostics["pseudo_inverse"] += 1
    warn_user(f"{owner}: {matrix} is singular (a component both certain and seen or moved without noise); "
              f"conditioned through its pseudo-inverse", NumericalWarning)


#: what the unscented filter says when not even its jitter rule gives a covariance it can draw
#: sigma points from: the model's scales are beyond float64, where the EKF's algebra may still run
_BEYOND_FLOAT64 = ("UnscentedKalman: no sigma points can be drawn: {what}, even after the jitter rule; the system's "
                   "scales (its step, noise and speeds) differ by more than float64 resolves. ExtendedKalman and "
                   "ParticleFilter take no square root of P and may still run")


def _eigenvalue_spread(P):
    """What stops a Cholesky factor of ``P``, in words."""
    if not np.all(np.isfinite(P)):
        return "the covariance P overflowed"
    w = np.linalg.eigvalsh(0.5 * (P + P.T))
    return f"the covariance P has eigenvalues from {w[0]:.3g} to {w[-1]:.3g}"


def _is_positive_definite(P):
    try:
        cholesky(P)
    except LinAlgError:
        return False
    return True


class _Inverse:
    """filterpy's ``inv`` for the UKF: ``S^{-1}``, or the pseudo-inverse of a singular ``S`` (counted
    in ``diagnostics``; a class rather than a closure so that the filter can be pickled)."""

    def __init__(self, diagnostics):
        self.diagnostics = diagnostics

    def __call__(self, S):
        try:
            return np.linalg.inv(S)
        except LinAlgError:
            _pseudo_inverse_used("UnscentedKalman", self.diagnostics, "a covariance it inverts")
            return np.linalg.pinv(S, hermitian=True)


class _TrueDynamicsEKF(ExtendedKalmanFilter):
    # filterpy's EKF propagates the mean linearly (x = F x); ours goes through the true f
    def __init__(self, system):
        super().__init__(system.dim_x, system.dim_z)
        self.system = system

    def predict_x(self, u=None):
        self.x = transition_mean_given(self.system, self.x[None, :], u)[0]

    def update(self, z, HJacobian, Hx, R=None, residual=np.subtract):
        """filterpy's update; with a singular innovation covariance ``S`` (filterpy inverts it and
        fails before changing the belief), the same update with ``S``'s pseudo-inverse, and True."""
        try:
            super().update(z, HJacobian, Hx, R=R, residual=residual)
            return False
        except LinAlgError:
            pass
        R = self.R if R is None else R
        H = HJacobian(self.x)
        cross = self.P @ H.T
        self.S = H @ cross + R
        self.SI = np.linalg.pinv(self.S, hermitian=True)
        self.K = cross @ self.SI
        self.y = residual(z, Hx(self.x))
        self.x = self.x + self.K @ self.y
        # the Joseph form, as filterpy's own update
        keep = np.eye(self.dim_x) - self.K @ H
        self.P = keep @ self.P @ keep.T + self.K @ R @ self.K.T
        self._log_likelihood = self._likelihood = self._mahalanobis = None  # recomputed on first read
        self.z = np.array(z, dtype=np.float64)
        self.x_post, self.P_post = self.x.copy(), self.P.copy()
        return True


class _Transition:
    """``f(x)`` of a system, as filterpy's UKF calls it; a class rather than a lambda so that
    the filter can be pickled."""

    def __init__(self, system):
        self.system = system

    def __call__(self, x, dt=None, u=None):
        return transition_mean_given(self.system, x[None, :], u)[0]


class _ControlledStep:
    """``f(x, u)`` of a controlled system, as the unscented smoother calls it (``fx(x, u)``; see
    :meth:`UnscentedKalman._rts`)."""

    def __init__(self, system):
        self.system = system

    def __call__(self, x, u):
        return transition_mean_given(self.system, x[None, :], u)[0]


class _Observation:
    """``h(x)`` of a system (see :class:`_Transition`)."""

    def __init__(self, system):
        self.system = system

    def __call__(self, x):
        return observation_mean_of(self.system, x[None, :])[0]


class _ObservationJacobian:
    """``dh/dx`` of a system at one state, checked to be a finite ``(dim_z, dim_x)`` array (see
    :class:`_Transition`)."""

    def __init__(self, system):
        self.system = system

    def __call__(self, x):
        system = self.system
        return model_jacobian(system.observation_jacobian(x), system, "observation_jacobian",
                              (system.dim_z, system.dim_x))


class ExtendedKalman(_GaussianFilter):
    """Extended Kalman filter with the true model (filterpy ``ExtendedKalmanFilter``).

    The mean goes through the nonlinear transition, the covariance through its Jacobian. A
    singular innovation covariance ``S`` (a component certain in the belief and observed without
    noise) or predicted covariance (in :meth:`smooth`, a component moved without noise) is
    solved through its pseudo-inverse, which conditions the Gaussian exactly; each use is counted in
    ``diagnostics`` and warned with :class:`~kbfilter.linalg.NumericalWarning`.

    Parameters
    ----------
    system : System
        The true model: transition and observation means, their Jacobians, ``process_cov`` and
        ``observation_cov``.

    Attributes
    ----------
    x, P : ndarray
        Current estimate and covariance; assign both (or call ``initialize``) before ``predict``.
    Q, R : ndarray
        Process and observation noise covariances (the system's; assignable).
    K, y, S, log_likelihood, likelihood, mahalanobis : ndarray, float or None
        Gain, residual, innovation covariance, log-likelihood, likelihood and ``sqrt(y^T S^{-1} y)``
        of the last observation; None after a missing one (``update(None)``) and before any, where
        filterpy keeps the previous update's.
    x_prior, P_prior, x_post, P_post : ndarray
        After the last ``predict()`` / ``update()``.
    diagnostics : dict
        ``{"pseudo_inverse": n}``: how many solves used a pseudo-inverse.

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter.systems import Rotation
    >>> system = Rotation()
    >>> states, obs = system.simulate(50, rng=0)
    >>> means, covs, _, _ = ExtendedKalman(system).batch_filter(obs)
    >>> means.shape
    (50, 2)
    >>> ekf = ExtendedKalman(system)
    >>> ekf.x, ekf.P = obs[0], np.eye(2)
    >>> ekf.predict()
    >>> ekf.update(obs[1])
    >>> ekf.K.shape
    (2, 2)
    """

    def __init__(self, system):
        self.kf = _TrueDynamicsEKF(_check_system(system))
        self._start(system)
        self.diagnostics = {"pseudo_inverse": 0}

    def _predict(self, u):
        self.kf.F = transition_jacobian_given(self.system, self.kf.x, u)
        self.kf.predict(u=u)

    def _update(self, z, R):
        if z is None:
            self.kf.x_post, self.kf.P_post = self.kf.x.copy(), self.kf.P.copy()
            return
        if self.kf.update(z, _ObservationJacobian(self.system), _Observation(self.system), R=R,
                          residual=self.system.observation_residual):
            _pseudo_inverse_used("ExtendedKalman", self.diagnostics, "the innovation covariance S")

    def _backward(self, means, covs, means_p, covs_p, us=None):
        # us[t + 1] moved the system from step t to step t + 1; Cov(x_t, x_{t+1}) = P_t F_t^T
        cross = [(transition_jacobian_given(self.system, means[t], None if us is None else us[t + 1]) @ covs[t]).T
                 for t in range(len(means) - 1)]
        xs, Ps, singular = gaussian_backward_pass(means, covs, means_p, covs_p, cross)
        for step in singular:
            _pseudo_inverse_used("ExtendedKalman.smooth", self.diagnostics, f"the predicted covariance of step {step}")
        return xs, Ps


class UnscentedKalman(_GaussianFilter):
    """Unscented Kalman filter with the true model (filterpy, Merwe scaled sigma points).

    If a covariance loses positive definiteness (filterpy's Cholesky fails), it is symmetrised
    and given a jitter of 1e-9 times its mean diagonal or the process noise's, whichever is larger
    (after an update by a noise-free sensor the covariance is round-off), and if that is not
    enough (the round-off of an update whose prior was far wider), its eigenvalues are raised to
    1e-9 times the largest. Each time it warns, and ``diagnostics`` counts it; :meth:`smooth`
    applies the same rule to a filtered covariance it draws sigma points from. A covariance that
    overflows, or whose variances differ by more than float64 resolves even after the rule (a
    model whose step, noise and speeds span hundreds of orders of magnitude), stops the filter with
    a ``LinAlgError`` that says so. A singular innovation covariance is inverted through its
    pseudo-inverse, as in :class:`ExtendedKalman`.

    Parameters
    ----------
    system : System
        The true model.
    alpha, beta, kappa : float
        Merwe's sigma-point parameters: the points lie ``sqrt(alpha^2 (dim_x + kappa))`` standard
        deviations from the mean, so ``alpha`` is positive and ``kappa`` above ``-dim_x``.

    Attributes
    ----------
    x, P, Q, R, K, y, S, log_likelihood, x_prior, P_prior, x_post, P_post
        As for :class:`ExtendedKalman`.
    diagnostics : dict
        ``{"jitter": count, "pseudo_inverse": count}``.

    Examples
    --------
    >>> import pickle
    >>> from kbfilter.systems import Oscillation
    >>> system = Oscillation()
    >>> _, obs = system.simulate(20, rng=0)
    >>> ukf = UnscentedKalman(system)
    >>> means = ukf.batch_filter(obs)[0]
    >>> copy = pickle.loads(pickle.dumps(ukf))
    >>> bool((copy.x == ukf.x).all())
    True
    """

    def __init__(self, system, alpha=1.0, beta=2.0, kappa=0.0):
        system = _check_system(system)
        alpha, beta, kappa = check_positive(alpha, "alpha"), check_real(beta, "beta"), check_real(kappa, "kappa")
        if system.dim_x + kappa <= 0:
            raise ValueError(f"kappa: expected more than -dim_x = {-system.dim_x} (the sigma points' spread is "
                             f"alpha^2 (dim_x + kappa)), got {kappa!r}")
        with np.errstate(over="ignore", under="ignore"):
            spread = float(np.float64(alpha) ** 2 * (system.dim_x + kappa))
        if not 0 < spread < np.inf:  # the weights divide by it
            raise ValueError(f"alpha: expected alpha^2 (dim_x + kappa) to be a positive finite number, got {spread!r} "
                             f"with alpha={alpha!r}")
        self._sigma_spread = spread
        points = MerweScaledSigmaPoints(system.dim_x, alpha=alpha, beta=beta, kappa=kappa)
        self.kf = UnscentedKalmanFilter(dim_x=system.dim_x, dim_z=system.dim_z, dt=1.0, points=points,
                                        fx=_Transition(system), hx=_Observation(system),
                                        residual_z=system.observation_residual, z_mean_fn=system.observation_average)
        self._start(system)
        self.diagnostics = {"jitter": 0, "pseudo_inverse": 0}
        self.kf.inv = _Inverse(self.diagnostics)

    def _jittered(self, P):
        """``P`` symmetrised, with the jitter the class states (counted and warned)."""
        with np.errstate(over="ignore"):
            # the sigma points are drawn from a square root of spread * P, which must not overflow either
            if not np.all(np.isfinite(self._sigma_spread * P)):
                raise LinAlgError(_BEYOND_FLOAT64.format(what="the covariance P overflowed"))
        P = 0.5 * (P + P.T)
        # the larger of its own scale and that of the process noise: after an update by a
        # noise-free sensor P is round-off, whose scale no jitter fixes
        scale = max(np.mean(np.abs(np.diag(P))), np.mean(np.abs(np.diag(self.kf.Q)))) or 1.0
        self.diagnostics["jitter"] += 1
        warn_user("UnscentedKalman: covariance not positive definite; symmetrised with jitter", NumericalWarning)
        P = P + 1e-9 * scale * np.eye(P.shape[0])
        if not _is_positive_definite(P):
            # after a prior far wider than its posterior (a nearly noise-free sensor) the update's
            # round-off is of the prior's scale, beyond that jitter: every eigenvalue is raised to
            # 1e-9 of the largest
            w, V = np.linalg.eigh(P)
            P = (V * np.maximum(w, 1e-9 * max(w[-1], scale))) @ V.T
            P = 0.5 * (P + P.T)
        return P

    def _predict(self, u):
        try:
            self._predict_once(u)
        except LinAlgError:
            self.kf.P = self._jittered(self.kf.P)
            try:
                self._predict_once(u)
            except LinAlgError:
                raise LinAlgError(_BEYOND_FLOAT64.format(what=_eigenvalue_spread(self.kf.P))) from None

    def _predict_once(self, u):
        try:
            self.kf.predict(u=u)
        except LinAlgError:
            raise
        except ValueError:
            # filterpy draws the prior's sigma points again from the predicted P: scipy refuses one that
            # overflowed with its own ValueError (a model's own errors leave P finite, and pass on). As
            # a LinAlgError it meets _predict's rule, which words it
            if np.all(np.isfinite(self.kf.P)):
                raise
            raise LinAlgError("the predicted covariance overflowed") from None

    def _update(self, z, R):
        self.kf.update(z, R=R)  # filterpy: update(None) keeps the prior as the posterior

    def _backward(self, means, covs, means_p, covs_p, us=None):
        try:
            return self._rts(means, covs, us)
        except LinAlgError:
            # a filtered covariance the sigma points cannot be drawn from: the forward pass's rule
            covs = np.array([P if _is_positive_definite(P) else self._jittered(P) for P in covs])
            try:
                return self._rts(means, covs, us)
            except LinAlgError:
                raise LinAlgError(_BEYOND_FLOAT64.format(what="a filtered covariance's eigenvalues span more than "
                                                              "float64 resolves")) from None

    def _rts(self, means, covs, us):
        """filterpy's unscented RTS smoother, each step's sigma points moved under its control."""
        if us is None:
            xs, Ps, _ = self.kf.rts_smoother(means, covs)
            return xs, Ps
        # filterpy hands fx the step's entry of dts unchanged (fx(x, dts[k]) moves step k to k + 1),
        # and has no other way in for a control: the entries are the controls us[k + 1]
        fx, self.kf.fx = self.kf.fx, _ControlledStep(self.system)
        try:
            xs, Ps, _ = self.kf.rts_smoother(means, covs, dts=[*us[1:], None])
        finally:
            self.kf.fx = fx
        return xs, Ps


#: the effective sample size below which a particle filter's update is counted and warned as degenerate
DEGENERATE_ESS = 2.0


class ParticleFilter(HoldsParticles, ParticleWeightsAlias, Likelihood, Innovation, _StartsFromFirstObservation):
    """Bootstrap particle filter with the true model and systematic resampling.

    Parameters
    ----------
    system : System
        The true model: ``sample_transition`` and ``observation_loglik``.
    n_particles : int
        Number of particles (at most :data:`~kbfilter.filters.particles.MAX_PARTICLES`).
    rng : int, Generator or None
        All randomness (initial draw, transitions, resampling) comes from this Generator.
    ess_threshold : float in (0, 1]
        Resample after an update when the effective sample size falls below
        ``ess_threshold * n_particles``; 1 (the default) resamples every step, the bootstrap
        filter of Gordon et al. (1993); 0.5 is the common adaptive choice.

    Attributes
    ----------
    x, P : ndarray
        Current weighted mean and covariance of the particles.
    particles : ndarray of shape (n_particles, dim_x)
    particle_weights : ndarray of shape (n_particles,)
        Normalised weights (``weights`` is a deprecated name for them).
    ess : float
        Effective sample size ``1 / sum_i p_i^2`` at the last update, before any resampling.
    log_likelihood : float or None
        The estimate ``log sum_i p_i p(z | x_i)`` of ``log p(z_t | z_{1:t-1})`` at the last
        update (``p_i`` the weights after ``predict``); summed over steps it estimates the log
        marginal likelihood of the observations. None after a missing observation and before any.
    likelihood : float or None
        ``exp(log_likelihood)``, floored at the smallest positive float, as filterpy's.
    y, S, mahalanobis : ndarray, ndarray or float, or None
        filterpy's innovation of the last observation: its residual from the predicted particles'
        mean observation, the predicted observation's covariance (the weighted spread of ``h(x)``
        over them plus ``observation_cov``) and ``sqrt(y^T S^{-1} y)``; computed when read. None
        after a missing observation, before any, and for a system that observes images (it
        defines no ``h(x)``).
    resampled : bool
        Whether the last update resampled.
    diagnostics : dict
        ``{"kept_prediction": n, "degenerate": m}``: how many updates kept the prediction because
        no particle gave the observation a finite likelihood, and how many left an effective
        sample size below :data:`~kbfilter.filters.classical.DEGENERATE_ESS` (the weight on
        about one particle: the estimate is that particle, its ``P`` the spread of nearly
        nothing). Each is warned about too, but Python shows a warning once a line by default:
        the counts say how often it happened.

    Examples
    --------
    >>> from kbfilter.systems import Rotation
    >>> system = Rotation()
    >>> _, obs = system.simulate(30, rng=0)
    >>> pf = ParticleFilter(system, n_particles=500, rng=0, ess_threshold=0.5)
    >>> means = pf.batch_filter(obs)[0]
    >>> means.shape, bool(pf.ess > 0)
    ((30, 2), True)
    """

    _noise_source = "its system's process_cov and observation_cov"

    def __init__(self, system, n_particles=1000, rng=None, ess_threshold=1.0):
        self.system = _check_system(system)
        self.n_particles = check_int(n_particles, "n_particles", minimum=2, maximum=MAX_PARTICLES)
        self.rng = check_rng(rng, "rng")
        self.ess_threshold = check_fraction(ess_threshold, "ess_threshold")
        self.initialized = False
        self.diagnostics = {"kept_prediction": 0, "degenerate": 0}

    def initialize(self, x0, P0):
        """Draw the particles from ``N(x0, P0)``.

        Parameters
        ----------
        x0 : array-like of shape (dim_x,)
            Mean.
        P0 : array-like of shape (dim_x, dim_x)
            Covariance.

        Returns
        -------
        self
            The filter, with its belief set.
        """
        x0 = check_vector(x0, "x0", length=self.system.dim_x)
        P0 = check_covariance(P0, "P0", self.system.dim_x)
        return self._start_from(self.rng.multivariate_normal(x0, P0, size=self.n_particles))

    def _start_from(self, particles):
        self.belief = ParticleBelief(particles)
        self.ess, self.log_likelihood, self.resampled = float(self.n_particles), None, False
        self._measured = None
        self._estimate_particles("prior", "post")
        self.initialized = True
        return self

    def _start_without_belief(self):
        # no belief from one observation (images): start from the dynamics' stationary law, or,
        # for a controlled system (no stationary law without its controls), its initial law
        self.initialize_stationary(burn_in=0 if getattr(self.system, "dim_u", None) else 50)

    def initialize_stationary(self, burn_in=50):
        """Particles from the stationary law: independent runs of the dynamics for ``burn_in`` steps.

        Parameters
        ----------
        burn_in : int
            Steps of the dynamics from ``system.initial_state``.

        Returns
        -------
        self
            The filter, with its belief set.
        """
        burn_in = check_int(burn_in, "burn_in", minimum=0)
        particles = np.array([initial_state_of(self.system, self.rng) for _ in range(self.n_particles)])
        for _ in range(burn_in):
            particles = self.system.sample_transition(particles, self.rng)
        return self._start_from(particles)

    def _check_initialized(self):
        if not self.initialized:
            raise RuntimeError("ParticleFilter: no particles yet; call initialize(x0, P0) or "
                               "initialize_stationary() (batch_filter starts from the first observation by itself)")

    def smooth(self, zs, us=None):
        """Fixed-interval smoothing by forward filtering, backward smoothing of the particles
        (:func:`backward_smoothing`): the belief at every step of a run given the whole run.

        Runs :meth:`batch_filter` over ``zs`` (the filter is left where it leaves it), keeping each
        step's particles and weights, then reweights them backwards through the system's Gaussian
        transition density: ``O(N^2)`` a step. Needs a system whose transitions are
        ``f(x) + N(0, Q)`` with ``Q`` positive definite.

        Parameters
        ----------
        zs : iterable of array-like or None
            The observations; None is a missing measurement.
        us : iterable of array-like, optional
            The controls, as :meth:`batch_filter` takes them.

        Returns
        -------
        means : ndarray of shape (n_steps, dim_x)
            Smoothed estimates.
        covs : ndarray of shape (n_steps, dim_x, dim_x)
            Their covariances.
        """
        _gaussian_transition(self.system)  # before any work
        zs, us = self._checked_run(zs, us)
        particles, weights = [], []
        for _ in self._run(zs, us):
            particles.append(self.belief.particles.copy())
            weights.append(self.belief.weights.copy())
        smoothed = backward_smoothing(self.system, particles, weights, us)
        means, covs = zip(*(ParticleBelief(x, w).estimate() for x, w in zip(particles, smoothed)))
        return np.array(means), np.array(covs)

    def predict(self, u=None):
        """Move every particle by a draw from the true transition.

        Parameters
        ----------
        u : array-like of shape (dim_u,) or None
            The control, for a controlled system (one with ``dim_u``, e.g.
            :class:`~kbfilter.systems.RobotInRoom`); None for the others.
        """
        self._check_initialized()
        self.belief.particles = sample_next(self.system, self.belief.particles, u, self.rng, name="system")
        self._estimate_particles("prior")

    def update(self, z):
        """Weight the particles by the likelihood of ``z``, then resample if the ESS is low.

        Parameters
        ----------
        z : array-like or None
            The observation (a vector, or an image in the system's shape); None keeps the prior.
        """
        z = None if z is None else check_observation(z, self.system.obs_shape or (self.system.dim_z,))
        self._check_initialized()
        self.resampled = False
        self.log_likelihood = self._measured = None
        if z is None:
            self._keep_prediction()
            return
        self._measured = SensorInnovation(self.system, z, self.belief.particles, self.belief.weights.copy())
        loglik = log_likelihood_of(self.system, z, self.belief.particles)
        self.log_likelihood = self.belief.reweight_log(loglik)
        if not np.isfinite(self.log_likelihood):
            self.diagnostics["kept_prediction"] += 1
            warn_user("ParticleFilter: no particle gives the observation a finite likelihood (it is far from "
                      "every predicted observation); kept the prediction", NumericalWarning)
            self._keep_prediction()
            return
        self.ess = self.belief.ess
        if self.ess < DEGENERATE_ESS:
            self.diagnostics["degenerate"] += 1
            warn_user(f"ParticleFilter: an update left fewer than {DEGENERATE_ESS:g} effective particles: the "
                      f"estimate is about one particle and P understates its error (a likelihood far sharper than "
                      f"the predicted spread; more particles help); diagnostics['degenerate'] counts such updates",
                      NumericalWarning)
        self._estimate_particles("post")
        self.resampled = self.belief.resample_if_due(self.ess_threshold, self.rng)


def _gaussian_transition(system):
    """The Cholesky factor of the system's process noise, when its transitions are the Gaussian
    ``f(x) + N(0, Q)`` of :meth:`System.sample_transition` with ``Q`` positive definite."""
    if type(system).sample_transition is not System.sample_transition:
        raise ValueError(f"system: {type(system).__name__} draws its own transitions; the particle smoother needs "
                         f"the Gaussian transition density of System.sample_transition")
    try:
        return np.linalg.cholesky(np.asarray(system.process_cov, dtype=np.float64))
    except np.linalg.LinAlgError:
        raise ValueError(f"system: {type(system).__name__}'s process noise is singular: its transitions have no "
                         f"density, which the particle smoother weighs them by") from None


def backward_smoothing(system, particles, weights, us=None):
    """Forward-filtering backward-smoothing of stored particles (Doucet, Godsill and Andrieu 2000):
    the smoothed weights of each step's particles, given the whole run.

    ``w_{t|T}^i = w_t^i sum_j w_{t+1|T}^j p(x_{t+1}^j | x_t^i) / sum_k w_t^k p(x_{t+1}^j | x_t^k)``,
    with the Gaussian transition density of the system; ``O(N^2)`` a step.

    Parameters
    ----------
    system : System
        The model, with Gaussian transitions ``f(x) + N(0, Q)`` and ``Q`` positive definite.
    particles : sequence of ndarray of shape (N, dim_x)
        Each step's particles, as the filter held them after its update (the same ``N`` at every
        step, at least one step).
    weights : sequence of ndarray of shape (N,)
        Their normalised weights, one array a step (finite, non-negative, summing to 1).
    us : sequence of array-like, optional
        The controls (``us[t]`` moved the system to step ``t``), one a step, for a system that
        takes them.

    Returns
    -------
    ndarray of shape (n_steps, N)
        The smoothed weights of each step's particles.
    """
    if not isinstance(system, System):
        raise ValueError(f"system: expected a System with Gaussian transitions, got {type(system).__name__}")
    factor = _gaussian_transition(system)
    particles, weights = _stored_run(particles, weights, factor.shape[0])
    us = checked_controls(us, len(particles), motion_control_dimension(system), per="step")
    smoothed = [weights[-1]]
    for t in range(len(particles) - 2, -1, -1):
        mean = transition_mean_given(system, particles[t], None if us is None else us[t + 1])
        # log p(x_{t+1}^j | x_t^i), up to a constant that cancels, for every pair (j, i)
        scaled = np.linalg.solve(factor, (particles[t + 1][:, None, :] - mean[None, :, :]).reshape(-1, mean.shape[1]).T)
        log_density = -0.5 * np.sum(scaled**2, axis=0).reshape(len(particles[t + 1]), len(mean))
        with np.errstate(divide="ignore"):  # a zero weight is a log weight of -inf
            log_joint = log_density + np.log(weights[t])[None, :]
            normaliser = logsumexp(log_joint, axis=1)  # log sum_k w_t^k p(x_{t+1}^j | x_t^k)
            log_smoothed = logsumexp(log_joint + (np.log(smoothed[-1]) - normaliser)[:, None], axis=0)
        smoothed.append(np.exp(log_smoothed - logsumexp(log_smoothed)))
    return np.array(smoothed[::-1])


def _stored_run(particles, weights, dim_x):
    """A filter's stored run checked step by step: the same ``N`` particles of ``dim_x`` finite
    coordinates at every step, each step's weights a probability over them."""
    if not len(particles):
        raise ValueError("particles: expected the particles of at least one step, got none")
    if len(weights) != len(particles):
        raise ValueError(f"weights: expected one array of weights per step of particles ({len(particles)}), "
                         f"got {len(weights)}")
    particles = [check_matrix(p, f"particles[{t}]", n_features=dim_x) for t, p in enumerate(particles)]
    n = len(particles[0])
    bad = next((t for t, p in enumerate(particles) if len(p) != n), None)
    if bad is not None:
        raise ValueError(f"particles[{bad}]: expected the {n} particles of every other step, got {len(particles[bad])}")
    return particles, [check_particle_weights(w, f"weights[{t}]", n) for t, w in enumerate(weights)]


def _moment_matched(weights, beliefs):
    """The mean and covariance of the mixture ``sum_i weights[i] N(x_i, P_i)`` of ``beliefs``."""
    x = sum(w * xi for w, (xi, _) in zip(weights, beliefs))
    P = sum(w * (Pi + np.outer(xi - x, xi - x)) for w, (xi, Pi) in zip(weights, beliefs))
    return x, P


def _check_one_sensor(systems):
    """Refuse models that see a state differently (``observe_mean`` at two states): every model
    weighs the same observation, so a model with another sensor, or a radar at another site, would
    weigh it as something else and its probability would mean nothing. The noises may differ. A
    model that cannot observe the probe states (a state space of its own) is not compared."""
    dim_x = systems[0].dim_x
    probes = np.vstack([np.arange(1.0, dim_x + 1), -0.5 * np.arange(dim_x, 0.0, -1)])
    try:
        with np.errstate(all="ignore"):
            seen = [np.asarray(s.observe_mean(probes), dtype=np.float64) for s in systems]
    except Exception:  # a user's model may refuse states outside its domain: nothing to compare there
        return
    for i, z in enumerate(seen[1:], 1):
        if z.shape != seen[0].shape or not np.allclose(z, seen[0], rtol=1e-9, atol=1e-12, equal_nan=True):
            sensors = [type(getattr(s, "sensor", s)).__name__ for s in (systems[0], systems[i])]
            raise ValueError(f"systems: expected models that observe a state alike (one sensor, whose observation "
                             f"every model weighs); systems[0] ({sensors[0]}) and systems[{i}] ({sensors[1]}) "
                             f"observe the state {probes[0].tolist()} as {seen[0][0].tolist()} and "
                             f"{z[0].tolist()}")


class InteractingMultipleModel(Innovation, _StartsFromFirstObservation):
    """Interacting multiple model (IMM) of Kalman filters with known models (Blom and Bar-Shalom
    1988): one filter a motion model, their beliefs mixed before each prediction by the
    probabilities of switching between the models, weighed after each update by their
    likelihoods.

    The usual tracking baseline for targets that alternate between going straight and turning:
    ``InteractingMultipleModel([CoordinatedTurn(..., turning=False), CoordinatedTurn(...)])``.
    filterpy's ``IMMEstimator`` computes the same recursion; this class is written out because
    that one reads each filter's likelihood after ``update(None)`` too, where there is none (a
    stale value), so a missed measurement would move its mode probabilities; here a missing
    measurement leaves them at their prediction.

    Parameters
    ----------
    systems : sequence of System
        The models, two or more, with the same state and observation (e.g. the straight and
        the turning :class:`~kbfilter.systems.tracking.CoordinatedTurn`): each weighs the same
        observation, so they must see a state alike (one sensor; its noise may differ by model).
    switch : float in (0, 1), default=0.05
        The probability of leaving a model at a step, shared equally among the others (the
        diagonal of the Markov switching matrix is ``1 - switch``).
    kind : {"ekf", "ukf"}, default="ekf"
        The filter each model runs: :class:`ExtendedKalman` or :class:`UnscentedKalman`.

    Attributes
    ----------
    x, P, x_prior, P_prior, x_post, P_post : ndarray
        The mixture's mean and covariance (filterpy's names).
    mu : ndarray of shape (n_models,)
        The model probabilities (after the last predict or update).
    log_likelihood : float or None
        ``log sum_j c_j p_j(z)`` for the last observation (``c_j`` the predicted model
        probabilities, ``p_j`` each filter's likelihood); None after a missing one.
    y, S, mahalanobis : ndarray, ndarray or float, or None
        filterpy's innovation of the last observation under the predicted mixture
        ``sum_j c_j N(z_j, S_j)`` of the models' predicted observations, matched in its moments:
        ``y = sum_j c_j y_j`` and ``S = sum_j c_j (S_j + (y_j - y)(y_j - y)^T)``, from each model's
        residual ``y_j`` and innovation covariance ``S_j``; ``sqrt(y^T S^{-1} y)``. None where
        ``log_likelihood`` is, and before any observation.
    filters : list of ExtendedKalman or UnscentedKalman
        One filter a model (each counts its own fallbacks in its ``diagnostics``).
    diagnostics : dict
        ``{"kept_model_probabilities": n}``: how many updates kept the model probabilities because
        no model gave the observation a finite likelihood (each is warned about too).

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter.systems.tracking import CoordinatedTurn, PositionFixes
    >>> straight, turning = (CoordinatedTurn(1.0, 0.1, 0.01, PositionFixes(3.0), turning=t) for t in (False, True))
    >>> imm = InteractingMultipleModel([straight, turning])
    >>> states, fixes = turning.simulate(60, rng=0)
    >>> means = imm.batch_filter(fixes)[0]
    >>> means.shape, bool(abs(imm.mu.sum() - 1) < 1e-12)
    ((60, 5), True)
    """

    _noise_source = "its models' Kalman filters (each model's process_cov and observation_cov)"

    def __init__(self, systems, switch=0.05, kind="ekf"):
        if not isinstance(systems, Iterable):
            raise ValueError(f"systems: expected a list of two or more models, got {type(systems).__name__}")
        systems = [_check_system(s, f"systems[{i}]") for i, s in enumerate(systems)]
        if len(systems) < 2:
            raise ValueError(f"systems: expected two or more models, got {len(systems)}")
        shapes = {(s.dim_x, s.dim_z) for s in systems}
        if len(shapes) != 1:
            names = {type(s).__name__ for s in systems}
            # the usual pair, whose state sizes differ by the turn rate
            hint = ("; a constant-velocity mode beside a CoordinatedTurn is CoordinatedTurn(..., turning=False), on "
                    "its five states" if {"ConstantVelocity", "CoordinatedTurn"} <= names else "")
            raise ValueError(f"systems: expected models with one state and observation size, got (dim_x, dim_z) "
                             f"{sorted(shapes)}{hint}")
        _check_one_sensor(systems)
        switch = check_fraction(switch, "switch", below_one=True)
        check_choice(kind, "kind", ("ekf", "ukf"))
        self.system = systems[0]
        self.filters = [(ExtendedKalman if kind == "ekf" else UnscentedKalman)(s) for s in systems]
        m = len(systems)
        self.M = np.full((m, m), switch / (m - 1))
        np.fill_diagonal(self.M, 1.0 - switch)
        self.mu = np.full(m, 1.0 / m)
        self.log_likelihood = self._measured = None
        self.initialized = False
        self.diagnostics = {"kept_model_probabilities": 0}

    def initialize(self, x0, P0):
        """Start every model's filter from ``N(x0, P0)``, the models equally likely.

        Parameters
        ----------
        x0 : array-like of shape (dim_x,)
            Mean.
        P0 : array-like of shape (dim_x, dim_x)
            Covariance.

        Returns
        -------
        self
            The filter, with its belief set.
        """
        for f in self.filters:
            f.initialize(x0, P0)
        self.mu = np.full(len(self.filters), 1.0 / len(self.filters))
        self.log_likelihood = self._measured = None
        self.initialized = True
        self._combine("prior")
        self._combine("post")
        return self

    def _combine(self, which):
        self._set_estimate(which, *_moment_matched(self.mu, [(f.x, f.P) for f in self.filters]))

    def _check_initialized(self):
        if not self.initialized:
            raise RuntimeError("InteractingMultipleModel: no belief yet; call initialize(x0, P0) (batch_filter "
                               "starts from the first observation by itself)")

    def predict(self, u=None):
        """Mix the models' beliefs by the switching probabilities, then predict each.

        Parameters
        ----------
        u : array-like or None
            The control, passed to every model.
        """
        self._check_initialized()
        predicted = self.mu @ self.M                        # P(model j now)
        mixing = self.M * self.mu[:, None] / predicted      # P(model i before | model j now)
        beliefs = [(f.x.copy(), f.P.copy()) for f in self.filters]
        for j, f in enumerate(self.filters):
            f.x, f.P = _moment_matched(mixing[:, j], beliefs)
            f.predict(u)
        self.mu = predicted
        self._combine("prior")

    def update(self, z):
        """Update every model's filter, then weigh the models by their likelihoods of ``z``.

        Parameters
        ----------
        z : array-like of shape (dim_z,) or None
            The observation; None (missing) keeps the prediction and the model probabilities.
        """
        self._check_initialized()
        for f in self.filters:
            f.update(z)
        self.log_likelihood = self._measured = None
        if z is not None:
            # a holder rather than a tuple of arrays, which filterpy's Saver could not stack
            self._measured = KnownInnovation(*_moment_matched(self.mu, [(f.y, f.S) for f in self.filters]))
            log_weights = np.log(self.mu) + np.array([f.log_likelihood for f in self.filters])
            self.log_likelihood = float(logsumexp(log_weights))
            if np.isfinite(self.log_likelihood):
                self.mu = np.exp(log_weights - self.log_likelihood)
            else:
                self.diagnostics["kept_model_probabilities"] += 1
                warn_user("InteractingMultipleModel: no model gives the observation a finite likelihood; kept the "
                          "model probabilities", NumericalWarning)
        self._combine("post")
