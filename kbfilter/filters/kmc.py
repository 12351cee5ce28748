"""The Kernel Monte Carlo filter (Kanagawa, Nishiyama, Gretton and Fukumizu 2016; algorithms §6).

For systems whose motion can be simulated (odometry, a kinematic model) but whose observations
have no density anyone can write (camera images): the prediction samples the known motion
from particles, the update is kernel Bayes' rule with an observation model learned from
state-observation pairs, and kernel herding turns the posterior embedding back into particles.
"""

from collections import Counter

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._validation import (check_choice, check_fraction, check_int, check_memory, check_rng, check_saved_matrix,
                           check_saved_vector, check_state_samples)
from ..embedding import KernelMean, clipped_weights, herd, normalise_weights, weighted_covariance
from ..persistence import Persistent, persistent, saved_before_fit
from ..threads import limited_blas
from .base import (TUNING_RECORD, LearnedFilter, SharedModel, check_loaded_estimates, check_model_states,
                   check_motion, motion_control_dimension, motion_of, probe_loaded, probe_prediction, sample_next,
                   training_pairs, tuning_record_holds)
from .grids import MONTE_CARLO_IMAGE_GRID, MONTE_CARLO_SCALABLE_IMAGE_GRID
from .likelihood import PredictiveLikelihood
from .observation import (ObservationSettings, ObservationSpace, check_dense_fits, observation_grid,
                          report_rank_cap)
from .particles import MAX_PARTICLES, DrawsFromOwnGenerator, HoldsParticles, ParticleBelief
from .smoothing import SmoothsParticleMoments

__all__ = ["KernelMonteCarloFilter", "KernelMonteCarloModel", "herd_with_particles"]

#: T x T float64 arrays the exact filter's fit holds at its peak (measured with tracemalloc on the
#: oscillation system: 4.2 and 4.1 at T = 1,000 and 2,000; the fitted filter keeps 3.1, and a step
#: adds about six T x n_particles arrays, so 5 also bounds a run once T is a few times n_particles)
EXACT_FIT_ARRAYS = 5

_FALLBACKS = {"clipped": "posterior weights summed to <= 0; used their clipped, normalised positive part",
              "collapsed": "no posterior weight was positive; kept the predicted particles",
              "unsupported": "the posterior embedding was <= 0 at every particle; kept the predicted particles",
              "undefined_ratio": "the particles' kernel mean was <= 0 at some particles (an approximated kernel far "
                                 "from its landmarks); they got weight 0"}


# The particles come from the filter's own sampler, which checks them: kernels skip their checks.
class _ExactStates:
    """The state kernel as a Gram matrix: embeddings at the particles from ``k(x_i, u_j)``."""

    def __init__(self, rule, states, gram):
        self.rule, self.states, self.gram = rule, states, gram

    def prior(self, particles, a):
        """The particles' embedding projected on the training states, and what the posterior step
        reuses (``k(x_i, u_j)``)."""
        cross = self.rule.kernel_x_(self.states, particles, check_input=False)
        return self.rule.projection(cross @ a, check_input=False), cross

    def at_particles(self, cross, particles, p, a):
        """The posterior (``p`` over the training states) and prior (``a`` over the particles)
        embeddings evaluated at the particles."""
        return cross.T @ p, self.rule.kernel_x_(particles, check_input=False) @ a

    def herd(self, p, cross, particles, n, training):
        if training:
            columns = np.asfortranarray(self.gram)  # contiguous columns, as in herd_with_particles
            return self.states[herd(self.gram @ p, lambda j: columns[:, j], n)]
        picked = herd_with_particles(self.gram, cross, self.rule.kernel_x_(particles, check_input=False), p, n)
        return np.vstack([self.states, particles])[picked]


class _FeatureStates:
    """The state kernel with explicit features ``phi`` (``G_x = F F^T``): nothing ``n x n`` is formed."""

    def __init__(self, rule, states, features):
        self.rule, self.states, self.features = rule, states, features

    def prior(self, particles, a):
        FU = self.rule.kernel_x_.features(particles, check_input=False)
        return self.rule.feature_projection(a @ FU, check_input=False), FU

    def at_particles(self, FU, particles, p, a):
        return FU @ (self.features.T @ p), FU @ (a @ FU)

    def herd(self, p, FU, particles, n, training):
        FX = self.features
        F = FX if training else np.vstack([FX, FU])
        picked = herd(F @ (FX.T @ p), lambda j: F @ F[j], n)
        return (self.states if training else np.vstack([self.states, particles]))[picked]


class _Herding:
    """Herding (Kanagawa et al. 2016): equally weighted particles picked to match the posterior
    embedding; the estimate is over the training states."""

    def __init__(self, candidates):
        self.training = candidates == "training"

    def __call__(self, filt, p, view):
        model = filt.model_
        filt._set_estimate("post", p @ model.states, weighted_covariance(model.states, clipped_weights(p)))
        filt.belief.replace(model.kernel_states.herd(p, view, filt.belief.particles, filt.n_particles, self.training))


class _Ratio:
    """The embedding ratio: each predicted particle's weight multiplied by ``max(0, m(u)) / m_0(u)``;
    systematic resampling when the effective sample size is low."""

    def __call__(self, filt, p, view):
        belief, a = filt.belief, filt.belief.weights
        posterior, prior = filt.model_.kernel_states.at_particles(view, belief.particles, p, a)
        # an exact Gaussian kernel mean is positive at its own weighted points; an approximated one
        # can vanish or turn negative far from the landmarks, where the ratio is undefined: weight 0
        # (at particles that already have weight 0 it does not matter)
        defined = prior > np.finfo(float).tiny
        if not defined[a > 0].all():
            filt._record("undefined_ratio", _FALLBACKS["undefined_ratio"])
        if not belief.reweight(np.where(defined, np.maximum(posterior, 0.0) / np.where(defined, prior, 1.0), 0.0)):
            filt._record("unsupported", _FALLBACKS["unsupported"])
            filt._keep_prediction()
            return
        filt._estimate_particles("post")
        belief.resample_if_due(filt.ess_threshold, filt._rng)


@persistent("observation", "states", "state_gram", "state_features", "fit_diagnostics", "resample", "candidates",
            holds={"observation": "LearnedObservationModel"})
class KernelMonteCarloModel(SharedModel):
    """What :meth:`KernelMonteCarloFilter.fit` learns: the observation side only.

    Read-only once built and shared by copies of the filter (see
    :class:`~kbfilter.filters.kbf.FilterModel`). The representation of the state kernel (a Gram
    matrix, or explicit features) is chosen here once.

    Parameters
    ----------
    observation : LearnedObservationModel
        The feature map, the gate and kernel Bayes' rule.
    states : ndarray of shape (n, dim_x)
        The training states.
    state_gram : ndarray of shape (n, n) or None
        The state kernel's Gram matrix of the training states (herding's candidates); None when
        the state kernel has explicit features.
    state_features : ndarray of shape (n, r) or None
        The training states' features ``F`` (``G_x = F F^T``) for a state kernel with explicit
        features (``approximation="nystrom"`` or ``"rff"``), else None.
    fit_diagnostics : collections.Counter
        Fallbacks taken while fitting.
    resample : {"herding", "ratio"}
        How the update turns the posterior into particles, chosen at fit.
    candidates : {"both", "training"}
        Where herding picks the particles from.
    """

    def __init__(self, observation, states, state_gram, state_features, fit_diagnostics, resample="herding",
                 candidates="both"):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        states = check_saved_matrix(states, "states")
        n = states.shape[0]
        if n != observation.rule.n_train_:
            raise ValueError(f"states: expected the {observation.rule.n_train_} training states of the observation "
                             f"model, got {n}")
        if (state_gram is None) == (state_features is None):
            raise ValueError("state_gram, state_features: expected the state kernel's Gram matrix or its features, "
                             "one of them")
        if state_gram is not None and check_saved_matrix(state_gram, "state_gram").shape != (n, n):
            raise ValueError(f"state_gram: expected shape ({n}, {n}), one row and column a training state, got "
                             f"{state_gram.shape}")
        if state_features is not None and check_saved_matrix(state_features, "state_features").shape[0] != n:
            raise ValueError(f"state_features: expected {n} rows, one a training state, got {state_features.shape[0]}")
        self.observation = observation
        self.states = states
        self.state_gram = state_gram
        self.state_features = state_features
        self.fit_diagnostics = fit_diagnostics
        self.resample = check_choice(resample, "resample", ("herding", "ratio"))
        self.candidates = check_choice(candidates, "candidates", ("both", "training"))
        rule = observation.rule
        self.kernel_states = (_ExactStates(rule, states, state_gram) if state_features is None
                              else _FeatureStates(rule, states, state_features))
        self.posterior_step = _Herding(candidates) if resample == "herding" else _Ratio()


@persistent("model_", "rng_state", "belief", "weights", "x", "P", "x_prior", "P_prior", "x_post", "P_post",
            *TUNING_RECORD,
            holds={"model_": "KernelMonteCarloModel", "belief": "ParticleBelief", "motion": "System",
                   "transition": "System", "kernel_x": "Kernel", "kernel_z": "Kernel", "features": "TransformerMixin",
                   **tuning_record_holds("System", "Kernel", "TransformerMixin")})
class KernelMonteCarloFilter(Persistent, HoldsParticles, SmoothsParticleMoments, DrawsFromOwnGenerator,
                             PredictiveLikelihood, LearnedFilter):
    """Kernel Monte Carlo filter: a known, sampled motion model and a learned observation model.

    Each step: ``predict(u)`` moves every particle by a draw of ``motion``; ``update(z)``
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
    motion : System or callable
        The motion model: a system with ``sample_transition(X, rng)`` (or ``(X, rng, u=u)`` for a
        controlled one such as :class:`~kbfilter.systems.RobotInRoom`), or a callable
        ``motion(X, u, rng)`` returning the next state of each row of ``X``. A kbfilter system
        is saved with the filter; a filter holding another callable cannot be saved.
    n_particles : int, default=1000
        The number of particles, kept fixed (at most :data:`~kbfilter.filters.particles.MAX_PARTICLES`).
    rule : {"iw", "original"}, default="iw"
        The update: importance-weighted KBR with KuLSIF weights or the original KBR
        (see :class:`~kbfilter.KernelBayesRule`).
    kernel_x, kernel_z : Kernel, optional
        Kernels on states and observations. By default Gaussian with the median heuristic, on
        standardised columns for the states and for vector observations (each column divided by
        its standard deviation, so coordinates in different units count alike; see
        :ref:`own-data`), on raw distances for images and feature maps. A kernel passed in is
        used as it is (``GaussianKernel(standardise=True)`` standardises).
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
        Seeds the initial particles and the motion's draws.
    transition : deprecated
        The old name of ``motion`` (a ``FutureWarning`` at fit); ``transition`` means the
        learned transition of :class:`~kbfilter.KernelBayesFilter`.

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
    log_likelihood, likelihood : float or None
        The learned predictive density of the last observation given to :meth:`update` (None after
        a missing one; computed when read), as the kernel Bayes filter's, with the predicted particles' kernel mean at
        the training states (clipped and normalised) as the mixture's weights.
    y, S, mahalanobis : ndarray, ndarray or float, or None
        The residual of the last observation, the predicted observation's covariance and
        ``sqrt(y^T S^{-1} y)``, from the same weights, as the kernel Bayes filter's.
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

    _noise_source = "its motion sampler and the observation model it learned"

    def __init__(self, motion=None, n_particles=1000, rule="iw", kernel_x=None, kernel_z=None, scale=1.0,
                 scale_z=None, reg_prior=1e-2, reg_update=1e-2, features="auto", resample="herding",
                 candidates="both", ess_threshold=0.5, outlier_quantile=None, approximation="exact", rank=None,
                 random_state=None, transition=None):
        self.motion = motion
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
        self.transition = transition  # deprecated: motion

    @limited_blas
    def fit(self, states, observations, *, controls=None):
        """Learn the observation model from state-observation pairs.

        Parameters
        ----------
        states : array-like of shape (n, dim_x), or a list of such arrays
            Training states (any order: only the pairs are used).
        observations : array-like of shape (n, dim_z) or (n, rows, columns[, channels]), or a list
            The observation at each training state.
        controls : ignored
            Accepted so that every filter fits with the same call; the motion is ``motion``.

        Returns
        -------
        self : KernelMonteCarloFilter
            The fitted filter, its particles drawn from the training states.
        """
        motion = check_motion(motion_of(self, warn=True))
        settings = self._checked_settings()
        X, Z, obs_shape = training_pairs(states, observations)
        if X.shape[0] < 3:
            raise ValueError(f"states: expected at least 3 training pairs, got {X.shape[0]}")
        check_model_states(motion, X, "motion")
        if settings.approximation == "exact":
            check_dense_fits(X.shape[0], EXACT_FIT_ARRAYS, "approximation='nystrom' (or 'rff')")
            # a step holds the particles' Gram matrix, about six T x N arrays, and herding among the
            # training states and the particles their joint (T + N) x (T + N) Gram matrix
            T, N = X.shape[0], self.n_particles
            joint = (T + N) ** 2 if self.resample == "herding" and self.candidates == "both" else 0
            check_memory(8.0 * (N * N + 6 * T * N + joint), "n_particles",
                         f"a step of the exact filter with {N:,} particles and {T:,} training states")
        self.n_features_in_ = X.shape[1]
        space, Z = ObservationSpace.fitted(settings.features, obs_shape, Z, X)
        # only the Fourier features draw at fit: a Generator passed as random_state is left as it
        # was for the other representations
        rng = check_rng(self.random_state) if settings.approximation == "rff" else None
        observation = settings.fit_model(space, X, Z, settings.reg_prior, rng, settings.fitted_kernels(X, Z, space))
        diagnostics = Counter(observation.fit_diagnostics)
        if settings.approximation == "nystrom" and settings.rank is None:
            report_rank_cap("KernelMonteCarloFilter", observation.short_kernels, diagnostics)
        kernel_x = observation.rule.kernel_x_
        if kernel_x.has_features:
            gram, state_features = None, kernel_x.features(X)
        else:
            gram, state_features = kernel_x(X), None
        self.model_ = KernelMonteCarloModel(observation, X, gram, state_features, diagnostics, self.resample,
                                            self.candidates)
        return self.reset()

    def check_params(self):
        check_motion(motion_of(self))
        self._checked_settings()
        return self

    def _checked_settings(self):
        """The hyperparameters, checked before any work (at fit, and at load: a file is untrusted)."""
        settings = ObservationSettings.of(self)
        check_choice(self.resample, "resample", ("herding", "ratio"))
        check_choice(self.candidates, "candidates", ("both", "training"))
        check_int(self.n_particles, "n_particles", minimum=2, maximum=MAX_PARTICLES)
        check_fraction(self.ess_threshold, "ess_threshold")
        check_rng(self.random_state)  # before any work (reset draws from it)
        return settings

    def _after_load(self):
        super()._after_load()
        self._checked_settings()
        if saved_before_fit(self, "model_"):  # fit checks the motion
            return
        check_motion(motion_of(self))
        self.n_features_in_ = self.states_.shape[1]  # derived, as fit sets it
        check_loaded_estimates(self, self.n_features_in_)
        # what the filter reports as its last update's weights over the training states
        weights = check_saved_vector(self.weights, "weights", length=self.states_.shape[0])
        if not abs(weights.sum() - 1.0) <= 1e-6:
            raise ValueError(f"weights: expected weights over the training states summing to 1, got a sum of "
                             f"{weights.sum():.6g}")
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one prediction and one update with the first training observation (see probe_loaded)
        probe_prediction(filt)
        model = filt.model_
        mu, _ = model.kernel_states.prior(filt.belief.particles, filt.belief.weights)
        raw, _ = model.observation.posterior_weights(mu, model.observation.rule.observations_[:1])
        return filt.x_prior, filt.P_prior, raw

    def _grid_for(self, obs_shape):
        # on images a coarser grid: every evaluation runs the particles
        if len(obs_shape) <= 1:
            return observation_grid(self.features, self.approximation, obs_shape)
        return MONTE_CARLO_IMAGE_GRID if self.approximation == "exact" else MONTE_CARLO_SCALABLE_IMAGE_GRID

    @property
    def states_(self):
        """The training states: ndarray of shape (n, dim_x)."""
        return self.model_.states

    @property
    def rule_(self):
        """The fitted :class:`~kbfilter.KernelBayesRule` (the observation model's)."""
        return self.model_.observation.rule

    @property
    def obs_shape_(self):
        """Shape of one training observation."""
        return self.model_.observation.space.obs_shape

    def _control_dimension(self):
        return motion_control_dimension(motion_of(self))

    @property
    def features_(self):
        """The fitted observation feature map, or None."""
        return self.model_.observation.space.features

    @property
    def observation_model_(self):
        """The learned observation model, a :class:`~kbfilter.filters.observation.LearnedObservationModel`."""
        return self.model_.observation

    # -- belief -------------------------------------------------------------------------------------
    @limited_blas
    def reset(self, prior=None):
        """Draw the particles afresh and restart the random generator from ``random_state``.

        Parameters
        ----------
        prior : (mean, cov) or array-like of shape (m, dim_x) or (dim_x,), optional
            A Gaussian to draw the particles from (with the filter's random numbers), or samples
            of the initial state (one state, of shape (dim_x,), is one sample), of which
            ``n_particles`` are picked by herding. By default the
            particles are drawn uniformly from the training states.

        Returns
        -------
        self : KernelMonteCarloFilter
            The filter with its new particles.
        """
        check_is_fitted(self, "model_")
        self._checked_settings()  # set_params after fit reaches here first: a bad value is named
        self._events = Counter()
        self._rng = check_rng(self.random_state)
        X, N = self.states_, self.n_particles
        if prior is None:
            self.belief = ParticleBelief.drawn_from(X, N, self._rng)
        elif isinstance(prior, tuple) and len(prior) == 2:
            self.belief = ParticleBelief.drawn_from_gaussian(prior, X.shape[1], N, self._rng)
        else:
            samples = check_state_samples(prior, "prior", X.shape[1])
            if len(samples) != N:
                samples = KernelMean(samples, kernel=self.rule_.kernel_x_).herd(N).points
            self.belief = ParticleBelief(samples)
        self.weights = np.full(X.shape[0], 1.0 / X.shape[0])
        self._unobserved()
        self._estimate_particles("prior", "post")
        return self

    # -- filterpy surface -------------------------------------------------------------------------------
    @limited_blas
    def predict(self, u=None):
        """Move every particle by a draw of the motion model.

        Parameters
        ----------
        u : array-like or None, default=None
            The control passed to ``motion`` (required by a controlled system).
        """
        check_is_fitted(self, "model_")
        before = self.belief.particles
        self.belief.particles = sample_next(motion_of(self), before, u, self._rng)
        self._moved(before)
        self._estimate_particles("prior")

    @limited_blas
    def update(self, z):
        """Kernel Bayes' rule with the particles as prior, then the posterior back to particles
        (``resample``).

        Parameters
        ----------
        z : array-like of shape (dim_z,) or obs_shape, or None
            The observation; ``None`` (missing) and an outlier (see ``outlier_quantile``) keep the
            predicted particles.
        """
        check_is_fitted(self, "model_")
        model = self.model_
        self._unobserved()
        prior = []

        def observed(row):
            # the particles' kernel mean at the training states, as the rule's prior and the density's weights
            prior.extend(model.kernel_states.prior(self.belief.particles, self.belief.weights))
            self._observed(model.observation, prior[0], row)

        row = self._admitted(z, model.observation, seen=observed)
        if row is None:
            self._keep_prediction()
            return
        mu, view = prior
        raw, info = model.observation.posterior_weights(mu, row)
        self._record_all(info)
        p, fallback = normalise_weights(raw)
        if fallback is not None:
            self._record(fallback, _FALLBACKS[fallback])
        if p is None:  # nothing to resample from: the prediction stands
            self._keep_prediction()
            return
        self.weights = p
        model.posterior_step(self, p, view)


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
        Indices into the training states followed by the particles (``np.vstack([states, particles])``).
    """
    n = state_gram.shape[0]
    target = np.concatenate([state_gram @ p, cross.T @ p])
    # the candidates' Gram matrix in Fortran order, so that each pick reads one contiguous column:
    # assembling it costs less than reading the C-ordered blocks' columns (one cache line an entry)
    K = np.empty((target.size, target.size), order="F")
    K[:n, :n], K[n:, :n], K[:n, n:], K[n:, n:] = state_gram, cross.T, cross, particle_gram
    return herd(target, lambda j: K[:, j], m)
