"""The Kernel Monte Carlo filter (Kanagawa, Nishiyama, Gretton and Fukumizu 2016; algorithms §6).

For systems whose motion can be simulated (odometry, a kinematic model) but whose observations
have no density anyone can write (camera images): the prediction samples the known transition
from particles, the update is kernel Bayes' rule with an observation model learned from
state-observation pairs, and kernel herding turns the posterior embedding back into particles.
"""

from collections import Counter

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    check_choice,
    check_fraction,
    check_int,
    check_matrix,
    check_positive,
    check_rng,
    check_sequences,
)
from ..embedding import KernelMean, clipped_weights, herd, normalise_weights, weighted_covariance
from ..persistence import Persistent, persistent
from ..rules.bayes_rule import KernelBayesRule
from ..threads import limited_blas
from .base import (
    CountedFallbacks,
    SequentialFilter,
    SharedModel,
    check_transition,
    resampling_due,
    sample_next,
    systematic_resample,
)
from .kbf import (
    approximated_kernel,
    check_rank_cap,
    fitted_observation_features,
    mapped_observation,
    scaled_kernel,
)
from .outliers import check_outlier_quantile, outlier_gate

__all__ = ["KernelMonteCarloFilter", "ObservationModel", "herd_with_particles"]

_FALLBACKS = {"clipped": "posterior weights summed to <= 0; used their clipped, normalised positive part",
              "collapsed": "no posterior weight was positive; kept the predicted particles",
              "unsupported": "the posterior embedding was <= 0 at every particle; kept the predicted particles",
              "undefined_ratio": "the particles' kernel mean was <= 0 at some particles (an approximated kernel far "
                                 "from its landmarks); they got weight 0"}


@persistent("obs_shape", "states", "features", "rule", "state_gram", "state_features", "fit_diagnostics", "gate")
class ObservationModel(SharedModel):
    """What :meth:`KernelMonteCarloFilter.fit` learns: the observation side only.

    Read-only once built and shared by copies of the filter (see
    :class:`~kbfilter.filters.kbf.FilterModel`).

    Parameters
    ----------
    obs_shape : tuple of int
        The shape of one training observation.
    states : ndarray of shape (n, dim_x)
        The training states.
    features : transformer or None
        The fitted observation feature map.
    rule : KernelBayesRule
        The fitted observation model.
    state_gram : ndarray of shape (n, n) or None
        The state kernel's Gram matrix of the training states (herding's candidates); None when
        the state kernel has explicit features.
    state_features : ndarray of shape (n, r) or None
        The training states' features ``U`` (``G_x = U U^T``) for a state kernel with explicit
        features (``approximation="nystrom"`` or ``"rff"``), else None.
    fit_diagnostics : collections.Counter
        Fallbacks taken while fitting.
    gate : OutlierGate or None
        The gate the update passes observations through (None: every observation is used).
    """

    def __init__(self, obs_shape, states, features, rule, state_gram, fit_diagnostics, state_features=None,
                 gate=None):
        self.obs_shape = tuple(obs_shape)
        self.states = states
        self.features = features
        self.rule = rule
        self.state_gram = state_gram
        self.state_features = state_features
        self.fit_diagnostics = fit_diagnostics
        self.gate = gate


@persistent("model_", "rng_state", "particles", "particle_weights", "weights", "x", "P", "x_prior", "P_prior",
            "x_post", "P_post")
class KernelMonteCarloFilter(Persistent, CountedFallbacks, SequentialFilter, BaseEstimator):
    """Kernel Monte Carlo filter: a known, sampled motion model and a learned observation model.

    Each step: ``predict(u)`` moves every particle by a draw of ``transition``; ``update(z)``
    takes the particles' kernel mean as the prior of kernel Bayes' rule, whose likelihood is
    learned from the training pairs ``(x_i, z_i)`` (which need not be a trajectory), giving
    weights ``w`` over the training states and the posterior embedding
    ``m(.) = sum_i w_i k(., x_i)``; then ``n_particles`` new, equally weighted particles are drawn
    from it in one of two ways (``resample``).

    ``"herding"`` (Kanagawa et al. 2016): the estimate is ``sum_i w_i x_i`` and kernel herding picks
    particles that approximate ``m`` (algorithms §2, §6). Herding can only pick among candidates.
    With ``candidates="training"`` they are the training states, as in the paper: particles can
    then only sit where a training state lies. With ``candidates="both"`` (the default) the
    predicted particles are candidates too.

    ``"ratio"``: each predicted particle ``u_j`` has its weight multiplied by
    ``max(0, m(u_j)) / m_0(u_j)``, where ``m_0`` is the particles' own weighted kernel mean (the
    prior). Both embeddings are densities seen through the kernel, so the ratio is the likelihood
    at the kernel's resolution (exact only as the bandwidth shrinks: on a broad kernel it flattens
    the likelihood); the estimate is the weighted mean of the particles. As in a particle filter,
    the weights carry over to the next step and the particles are resampled (systematically) only
    when their effective sample size falls below ``ess_threshold * n_particles``: resampling
    adds Monte Carlo noise, so it is done only when the weights have degenerated. The posterior is
    no longer confined to the training states, so it keeps the motion model's precision where
    training states are sparse, which herding loses (see the documentation's robot localization
    study).

    Parameters
    ----------
    transition : System or callable
        The motion model: a system with ``sample_transition(X, rng)`` (or ``(X, rng, u=u)`` for a
        controlled one such as :class:`~kbfilter.systems.RobotInRoom`), or a callable
        ``transition(X, u, rng)`` returning the next state of each row of ``X``. A kbfilter system
        is saved with the filter; a filter holding another callable cannot be saved.
    n_particles : int, default=1000
        The number of particles, kept fixed.
    rule : {"iw", "original"}, default="iw"
        The update: importance-weighted KBR with KuLSIF weights or the original KBR
        (see :class:`~kbfilter.KernelBayesRule`).
    kernel_x, kernel_z : Kernel, optional
        Kernels on states and observations; Gaussian with the median heuristic by default.
    scale : float, default=1.0
        Multiplies both kernels' bandwidths.
    scale_z : float or None, default=None
        A separate multiplier for the observation kernel (None: ``scale``).
    reg_prior : float, default=1e-2
        ``eta`` (iw) / ``eps`` (original).
    reg_update : float, default=1e-2
        ``lam`` (iw) / ``delta`` (original).
    features : "auto", transformer or None, default="auto"
        The map in front of the observation kernel, as for
        :class:`~kbfilter.KernelBayesFilter` (images are blurred by default).
    resample : {"herding", "ratio"}, default="herding"
        How the posterior embedding becomes particles (see above).
    candidates : {"both", "training"}, default="both"
        Where herding picks the new particles from (``resample="herding"`` only).
    ess_threshold : float in (0, 1], default=0.5
        With ``resample="ratio"``: resample when the effective sample size ``1 / sum_j a_j^2`` of
        the particle weights ``a`` falls below this fraction of ``n_particles`` (1: after every
        update). Herding always returns equally weighted particles.
    outlier_quantile : float in (0, 1] or None, default=None
        Gate the observations: one farther from every training observation (after ``features``)
        than this quantile of the training observations' distances to their nearest neighbour
        is an outlier, and the update leaves the prediction as it is (counted in
        ``diagnostics["outlier"]``; see :class:`~kbfilter.filters.outliers.OutlierGate`). The
        learned likelihood is a guess far from its training data; the known motion model is
        not. None uses every observation.
    approximation : {"exact", "nystrom", "rff"}, default="exact"
        How the state and observation kernels are represented, as for
        :class:`~kbfilter.KernelBayesFilter`. ``"exact"`` holds the ``n x n`` Gram matrices and
        solves the update on them: best up to a few thousand training pairs. ``"nystrom"`` and
        ``"rff"`` replace both kernels by explicit features of rank ``r``: no ``n x n`` array is
        formed, the prior's projection and the embedding ratio cost O((n + N) r) and the update
        O(s r^2) (``s``: the training states the particles cover). Herding then computes each
        candidate column from the features, O(N (n + N) r) a step: prefer
        ``resample="ratio"`` there.
    rank : int or None, default=None
        Landmarks or features of the approximation; None chooses them as
        :class:`~kbfilter.KernelBayesFilter` does.
    random_state : int, Generator or None, default=None
        Seeds the initial particles and the transition's draws.

    Attributes
    ----------
    x, P : ndarray
        Current estimate and covariance: after an update the posterior's weighted mean and
        covariance (over the training states with herding, over the predicted particles with the
        ratio), the particles' after a prediction.
    particles : ndarray of shape (n_particles, dim_x)
        The current particles.
    particle_weights : ndarray of shape (n_particles,)
        Their normalised weights: equal after herding or a resampling, carried between resamplings
        with ``resample="ratio"``.
    weights : ndarray of shape (n,)
        The last update's normalised weights over the training states.
    diagnostics : collections.Counter
        Fallbacks taken at fit and since the last reset: the rule's (see
        :class:`~kbfilter.KernelBayesFilter`) and ``"clipped"`` / ``"collapsed"`` /
        ``"unsupported"`` (the posterior embedding is not positive at any particle) /
        ``"undefined_ratio"`` (an approximated prior embedding was not positive at some particles);
        ``"outlier"``: observations the gate set aside (``outlier_quantile``).

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> system = kb.systems.Rotation()
    >>> states, obs = system.simulate(300, rng=0)
    >>> kmc = kb.KernelMonteCarloFilter(system, n_particles=200, random_state=0).fit(states, obs)
    >>> test_states, test_obs = system.simulate(30, rng=1)
    >>> means = kmc.batch_filter(test_obs)[0]
    >>> bool(np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.1)
    True
    """

    def __init__(self, transition=None, n_particles=1000, rule="iw", kernel_x=None, kernel_z=None, scale=1.0,
                 scale_z=None, reg_prior=1e-2, reg_update=1e-2, features="auto", resample="herding",
                 candidates="both", ess_threshold=0.5, outlier_quantile=None, approximation="exact", rank=None,
                 random_state=None):
        self.transition = transition
        self.n_particles = n_particles
        self.rule = rule
        self.kernel_x = kernel_x
        self.kernel_z = kernel_z
        self.scale = scale
        self.scale_z = scale_z
        self.reg_prior = reg_prior
        self.reg_update = reg_update
        self.features = features
        self.resample = resample
        self.candidates = candidates
        self.ess_threshold = ess_threshold
        self.outlier_quantile = outlier_quantile
        self.approximation = approximation
        self.rank = rank
        self.random_state = random_state

    @limited_blas
    def fit(self, states, observations, controls=None):
        """Learn the observation model from state-observation pairs.

        Parameters
        ----------
        states : array-like of shape (n, dim_x), or a list of such arrays
            Training states (any order: only the pairs are used).
        observations : array-like of shape (n, dim_z) or (n, rows, columns[, channels]), or a list
            The observation at each training state.
        controls : ignored
            Accepted so that every filter fits with the same call; the motion is ``transition``.

        Returns
        -------
        self : KernelMonteCarloFilter
            The fitted filter, its particles drawn from the training states.
        """
        check_transition(self.transition)
        check_choice(self.rule, "rule", ("iw", "original"))
        check_choice(self.resample, "resample", ("herding", "ratio"))
        check_choice(self.candidates, "candidates", ("both", "training"))
        check_int(self.n_particles, "n_particles", minimum=2)
        check_fraction(self.ess_threshold, "ess_threshold")
        check_outlier_quantile(self.outlier_quantile)
        check_choice(self.approximation, "approximation", ("exact", "nystrom", "rff"))
        if self.rank is not None:
            check_int(self.rank, "rank")
        reg_prior = check_positive(self.reg_prior, "reg_prior")
        reg_update = check_positive(self.reg_update, "reg_update")
        scale = check_positive(self.scale, "scale")
        scale_z = scale if self.scale_z is None else check_positive(self.scale_z, "scale_z")
        xs, zs, obs_shape = check_sequences(states, observations)
        X, Z = np.vstack(xs), np.vstack(zs)
        if X.shape[0] < 3:
            raise ValueError(f"states: expected at least 3 training pairs, got {X.shape[0]}")
        self.n_features_in_ = X.shape[1]
        features, Z = fitted_observation_features(self.features, obs_shape, Z, X)
        # only the Fourier features draw at fit: a Generator passed as random_state is left as it
        # was for the other representations
        rng = check_rng(self.random_state) if self.approximation == "rff" else None
        kx = approximated_kernel(scaled_kernel(self.kernel_x, "kernel_x", scale), self.approximation, self.rank,
                                 reg_prior, rng)
        kz = approximated_kernel(scaled_kernel(self.kernel_z, "kernel_z", scale_z), self.approximation, self.rank,
                                 reg_update, rng)
        rule = KernelBayesRule(method=self.rule, kernel_x=kx, kernel_z=kz, reg_prior=reg_prior,
                               reg_update=reg_update).fit(X, Z)
        diagnostics = Counter(rule.diagnostics_)
        if self.approximation == "nystrom" and self.rank is None:
            check_rank_cap("KernelMonteCarloFilter", rule, diagnostics)
        if rule.kernel_x_.has_features:
            gram, state_features = None, rule.kernel_x_.features(X)
        else:
            gram, state_features = rule.kernel_x_(X), None
        gate = outlier_gate(Z, self.outlier_quantile)
        self.model_ = ObservationModel(obs_shape, X, features, rule, gram, diagnostics, state_features, gate)
        return self.reset()

    @property
    def states_(self):
        """The training states: ndarray of shape (n, dim_x)."""
        return self.model_.states

    @property
    def rule_(self):
        """The fitted :class:`~kbfilter.KernelBayesRule` (the observation model)."""
        return self.model_.rule

    @property
    def features_(self):
        """The fitted observation feature map, or None."""
        return self.model_.features

    @property
    def rng_state(self):
        """The state of the filter's random generator (saved with it, so a loaded filter draws on)."""
        return self._rng.bit_generator.state

    @rng_state.setter
    def rng_state(self, state):
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = state

    # -- belief -------------------------------------------------------------------------------------
    @limited_blas
    def reset(self, prior=None):
        """Draw the particles afresh and restart the random generator from ``random_state``.

        Parameters
        ----------
        prior : array-like of shape (m, dim_x), optional
            Samples of the initial state; ``n_particles`` of them are picked by herding. By
            default the particles are drawn uniformly from the training states.

        Returns
        -------
        self : KernelMonteCarloFilter
            The filter with its new particles.
        """
        check_is_fitted(self, "model_")
        self._events = Counter()
        self._rng = check_rng(self.random_state)
        X, N = self.states_, self.n_particles
        if prior is None:
            self.particles = X[self._rng.choice(X.shape[0], size=N, replace=X.shape[0] < N)]
        else:
            samples = check_matrix(prior, "prior", n_features=X.shape[1])
            if len(samples) != N:
                samples = KernelMean(samples, kernel=self.rule_.kernel_x_).herd(N).points
            self.particles = samples
        self.particle_weights = np.full(N, 1.0 / N)
        self.weights = np.full(X.shape[0], 1.0 / X.shape[0])
        self._from_particles("prior")
        self._from_particles("post")
        return self

    def _from_particles(self, which):
        a = self.particle_weights
        mean, cov = a @ self.particles, weighted_covariance(self.particles, a)
        setattr(self, f"x_{which}", mean)
        setattr(self, f"P_{which}", cov)
        self.x, self.P = mean, cov

    # -- filterpy surface -------------------------------------------------------------------------------
    @limited_blas
    def predict(self, u=None):
        """Move every particle by a draw of the motion model.

        Parameters
        ----------
        u : array-like or None, default=None
            The control passed to ``transition`` (required by a controlled system).
        """
        check_is_fitted(self, "model_")
        self.particles = sample_next(self.transition, self.particles, u, self._rng)
        self._from_particles("prior")

    @limited_blas
    def update(self, z):
        """Kernel Bayes' rule with the particles as prior, then herding back to particles.

        Parameters
        ----------
        z : array-like of shape (dim_z,) or obs_shape, or None
            The observation; ``None`` (missing) and an outlier (see ``outlier_quantile``) keep the
            predicted particles.
        """
        check_is_fitted(self, "model_")
        if z is not None:
            z = self._admitted(mapped_observation(z, self.model_.obs_shape, self.features_), self.model_.gate)
        if z is None:
            self._keep_prediction()
            return
        rule, X, U, FX = self.rule_, self.states_, self.particles, self.model_.state_features
        a = self.particle_weights
        if FX is None:
            cross, FU = rule.kernel_x_(X, U), None               # k(x_i, u_j), (n, N)
            mu = rule.projection(cross @ a)                      # the particles' embedding, projected
        else:
            cross, FU = None, rule.kernel_x_.features(U)
            gamma = a @ FU                                       # the particles' mean feature
            mu = rule.feature_projection(gamma)
        W, info = rule.weights_from_projection(mu, rule.observation_vectors(z))
        for kind, message in info.items():
            self._record(kind, message)
        p, fallback = normalise_weights(W[:, 0])
        if fallback is not None:
            self._record(fallback, _FALLBACKS[fallback])
        if p is None:  # nothing to resample from: the prediction stands
            self._keep_prediction()
            return
        self.weights = p
        if self.resample == "herding":
            self.x_post = self.x = p @ X
            self.P_post = self.P = weighted_covariance(X, clipped_weights(p))
            self.particles = self._herd(p, cross, FU)
            self.particle_weights = np.full(self.n_particles, 1.0 / self.n_particles)
            return
        # the posterior and prior embeddings at the particles
        if FX is None:
            posterior, prior = cross.T @ p, rule.kernel_x_(U) @ a
        else:
            posterior, prior = FU @ (FX.T @ p), FU @ gamma
        # an exact Gaussian kernel mean is positive at its own weighted points; an approximated one
        # can vanish or turn negative far from the landmarks, where the ratio is undefined: weight 0
        # (at particles that already have weight 0 it does not matter)
        defined = prior > np.finfo(float).tiny
        if not defined[a > 0].all():
            self._record("undefined_ratio", _FALLBACKS["undefined_ratio"])
        a = a * np.where(defined, np.maximum(posterior, 0.0) / np.where(defined, prior, 1.0), 0.0)
        if not a.sum() > 0:
            self._record("unsupported", _FALLBACKS["unsupported"])
            self._keep_prediction()
            return
        self.particle_weights = a = a / a.sum()
        self.x_post = self.x = a @ U
        self.P_post = self.P = weighted_covariance(U, a)
        if resampling_due(a, self.ess_threshold):
            self.particles = U[systematic_resample(a, self._rng)]
            self.particle_weights = np.full(self.n_particles, 1.0 / self.n_particles)

    def _keep_prediction(self):
        self.x_post, self.P_post = self.x_prior.copy(), self.P_prior.copy()
        self.x, self.P = self.x_post, self.P_post

    def _herd(self, p, cross, FU):
        """``n_particles`` herded from ``sum_i p_i k(., x_i)`` among the candidates.

        ``cross`` is ``k(x_i, u_j)`` for an exact state kernel, ``FU`` the particles' features for
        one with explicit features (the other is None)."""
        gram, X, U, FX = self.model_.state_gram, self.states_, self.particles, self.model_.state_features
        training = self.candidates == "training"
        if FX is not None:
            F = FX if training else np.vstack([FX, FU])
            picked = herd(F @ (FX.T @ p), lambda j: F @ F[j], self.n_particles)
        elif training:
            picked = herd(gram @ p, lambda j: gram[:, j], self.n_particles)
        else:
            picked = herd_with_particles(gram, cross, self.rule_.kernel_x_(U), p, self.n_particles)
        return (X if training else np.vstack([X, U]))[picked]


def herd_with_particles(state_gram, cross, particle_gram, p, m):
    """Herd ``m`` points from ``sum_i p_i k(., x_i)`` among the training states and the particles.

    Parameters
    ----------
    state_gram : ndarray of shape (n, n)
        ``k(x_i, x_j)`` over the training states.
    cross : ndarray of shape (n, N)
        ``k(x_i, u_j)`` between training states and particles.
    particle_gram : ndarray of shape (N, N)
        ``k(u_i, u_j)`` over the particles.
    p : ndarray of shape (n,)
        The posterior weights over the training states.
    m : int
        How many points to pick.

    Returns
    -------
    ndarray of int, shape (m,)
        Indices into the training states followed by the particles (``np.vstack([X, U])``).
    """
    n = state_gram.shape[0]
    target = np.concatenate([state_gram @ p, cross.T @ p])

    def column(j):
        if j < n:
            return np.concatenate([state_gram[:, j], cross[j]])
        return np.concatenate([cross[:, j - n], particle_gram[:, j - n]])

    return herd(target, column, m)
