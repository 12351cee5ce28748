"""The kernel Bayes filter (algorithms §6; Xu et al. (2022) Algorithm 2; Fukumizu (2014) "KBR for HMM").

Learns the transition (kernel sum rule on the training transitions) and the observation model
(kernel Bayes' rule) from example trajectories ``(x_t, z_t)``, then tracks the state from
observations alone. The belief is a weight vector over the training states.
"""

from collections import Counter

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .._validation import check_choice, check_controls, check_int, check_matrix, check_positive, check_rng, \
    check_sequences, check_vector
from ..embedding import KernelMean, clipped_weights, normalise_weights, weighted_covariance
from ..kernels import fitted_kernel
from ..operators import Operator
from ..persistence import Persistent, persistent
from ..rules.conditional import ConditionalEmbedding
from ..threads import limited_blas
from .base import LearnedFilter, SharedModel, checked_run, probe_loaded
from .compression import kept_transitions
from .controlled import ControlledTransition, LowRankControlledTransition
from .likelihood import PredictiveLikelihood
from .observation import (LearnedObservationModel, ObservationSettings, ObservationSpace, nystrom_rank_rule,
                          observation_grid, report_rank_cap, scaled_kernel)
from .smoothing import kernel_smoother
from .transitions import LearnedTransition

__all__ = ["KernelBayesFilter", "FilterModel"]

#: an estimate farther than this fraction of the training states' range (per coordinate) outside their
#: bounding box is counted and warned about (``diagnostics["outside_training"]``): the normalised weights
#: may be negative, so the weighted mean can extrapolate past every training state
OUTSIDE_MARGIN = 0.1

# What the filter does itself when its weights cannot be normalised (see ``embedding.normalise_weights``),
# and when its estimate leaves the training states.
_OWN_FALLBACKS = {"clipped": "weights summed to <= 0; used their clipped, normalised positive part",
                  "collapsed": "no weight was positive; kept the previous belief",
                  "outside_training": f"the estimate left the training states' bounding box by more than "
                                      f"{OUTSIDE_MARGIN:.0%} of their range (signed weights extrapolate: a larger "
                                      f"regulariser keeps them closer to a mean)"}


@persistent("states", "kept", "predecessors", "kernel_x", "observation", "transition", "projection_operator",
            "estimate", "fit_diagnostics", "covariance_scale")
class FilterModel(SharedModel):
    """What :meth:`KernelBayesFilter.fit` learns: the training states, the fitted state kernel, the
    learned observation model and transition, the projection a step applies, and the point estimate.

    It is read-only once built, so a copy of a filter shares it: ``copy.deepcopy`` returns the
    model itself. filterpy's ``Saver`` deep-copies a filter every step, and would otherwise copy
    every ``T x T`` matrix with it (42 MB a step at ``T = 1,000``).

    Parameters
    ----------
    states : ndarray of shape (n, dim_x)
        The training states the filter keeps (all ``T`` of them, stacked, unless it was compressed).
    kept : ndarray of int, shape (n,)
        Their indices among the ``T`` stacked training states.
    predecessors : ndarray of int
        Indices among the stacked training states of the states whose transition to the next
        one the filter learned from (every state that has a successor in its sequence, unless
        the filter was compressed); their successors are all kept.
    kernel_x : Kernel
        The fitted state kernel.
    observation : LearnedObservationModel
        The feature map, the gate and kernel Bayes' rule.
    transition : LearnedTransition, ControlledTransition or LowRankControlledTransition
        ``w_pred = A(u) w`` over the kept states (``apply(w, u)``).
    projection_operator : Operator
        ``mu = K w_pred`` over the kept states.
    estimate : {"mean", "raw_mean", "mode"}
        The point estimate, chosen at fit.
    fit_diagnostics : collections.Counter
        Fallbacks taken while fitting.
    covariance_scale : float, default=1.0
        Multiplies every covariance the model reports (the filter's calibration).
    """

    def __init__(self, states, kept, predecessors, kernel_x, observation, transition, projection_operator, estimate,
                 fit_diagnostics, covariance_scale=1.0):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        if not (isinstance(states, np.ndarray) and states.dtype == np.float64):
            raise ValueError("states: expected a float64 array of training states")
        states = check_matrix(states, "states")
        n = states.shape[0]
        kept = _indices(kept, "kept")
        if kept.shape != (n,):
            raise ValueError(f"kept: expected one index per training state ({n}), got shape {kept.shape}")
        predecessors = _indices(predecessors, "predecessors")
        if not isinstance(observation, LearnedObservationModel) or observation.rule.states_.shape != states.shape:
            raise ValueError("observation: expected the learned observation model of these training states")
        if not (callable(getattr(transition, "apply", None)) and callable(getattr(transition, "adjoint", None))):
            raise ValueError(f"transition: expected a learned transition, got {type(transition).__name__}")
        # an uncontrolled transition is its operator; a controlled one places weights among n_states
        operator = getattr(transition, "operator", None)
        if (operator.shape if operator is not None else (transition.n_states,) * 2) != (n, n):
            raise ValueError(f"transition: expected a transition over the {n} training states")
        if not (isinstance(projection_operator, Operator) and projection_operator.shape == (n, n)):
            raise ValueError(f"projection_operator: expected an operator of shape ({n}, {n})")
        self.states = states
        self.kept = kept
        self.predecessors = predecessors
        self.kernel_x = kernel_x
        self.observation = observation
        self.transition = transition
        self.projection_operator = projection_operator
        self.estimate = check_choice(estimate, "estimate", ("mean", "raw_mean", "mode"))
        self.fit_diagnostics = fit_diagnostics
        self.covariance_scale = check_positive(covariance_scale, "covariance_scale")
        self.point = getattr(self, f"_{estimate}")
        low, high = states.min(axis=0), states.max(axis=0)
        self._bounds = (low - OUTSIDE_MARGIN * (high - low), high + OUTSIDE_MARGIN * (high - low))

    def outside(self, x):
        """Whether the estimate ``x`` lies outside the training states' bounding box widened by
        ``OUTSIDE_MARGIN`` of their range on each side.

        Parameters
        ----------
        x : ndarray of shape (dim_x,)
            An estimate.

        Returns
        -------
        bool
            True when some coordinate is outside.
        """
        low, high = self._bounds
        return bool(np.any(x < low) or np.any(x > high))

    def _mean(self, w, raw):
        return w @ self.states

    def _raw_mean(self, w, raw):
        return raw @ self.states

    def _mode(self, w, raw):
        return KernelMean(self.states, w, self.kernel_x).mode()

    def covariance(self, w):
        """The covariance of the states under the weights ``w``.

        Parameters
        ----------
        w : ndarray of shape (n,)
            Weights over the states; their clipped positive part is used, and with no positive
            weight at all the states' spread, equally weighted.

        Returns
        -------
        ndarray of shape (dim_x, dim_x)
            The weighted covariance, times ``covariance_scale``.
        """
        return self.covariance_scale * weighted_covariance(self.states, clipped_weights(w))


def _indices(values, name):
    """``values`` as a 1-D array of non-negative integer indices."""
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iu" or (values.size and values.min() < 0):
        raise ValueError(f"{name}: expected a 1-D array of non-negative integer indices")
    return values


def _learned(name, doc):
    return property(lambda self: getattr(self.model_, name), doc=doc)


@persistent("model_",
            # the belief, so that a loaded filter continues where the saved one stopped
            "weights", "weights_prior", "x", "P", "x_prior", "P_prior", "x_post", "P_post")
class KernelBayesFilter(Persistent, PredictiveLikelihood, LearnedFilter):
    """Kernel Bayes filter: a nonparametric filter learned from example trajectories (algorithms §6).

    Parameters
    ----------
    rule : {"iw", "original"}
        The update: importance-weighted KBR with KuLSIF weights (§5.3) or the original KBR (§5.1).
    transition : {"exact", "knn"} or ConditionalEmbedding
        The transition's conditional embedding: exact CKME, localized kNN CKME (a sparse matrix
        with ``n_neighbors`` entries a column), or any :class:`~kbfilter.ConditionalEmbedding`
        as a template (e.g. ``ConditionalEmbedding(method="sparse", gamma=1e-3)``): it is cloned
        and given the filter's state kernel and ``reg_transition``; its other parameters
        (method, rank, ``gamma``, ...) are kept.
    kernel_x, kernel_z : Kernel, optional
        Kernels on states and observations. By default Gaussian with the median heuristic, on
        standardised columns for the states and for vector observations (each column divided by
        its standard deviation, so coordinates in different units count alike; see
        :ref:`own-data`), on raw distances for images and feature maps. A kernel passed in is
        used as it is (``GaussianKernel(standardise=True)`` standardises).
    kernel_u : Kernel, optional
        Kernel on controls, for a filter fitted with controls; Gaussian with the median heuristic
        on standardised columns by default (its bandwidth is multiplied by ``scale`` too).
    scale : float
        Multiplies both kernels' bandwidths (``s = scale * median``, Xu et al. (2022) §6.2's beta).
    scale_z : float or None
        A separate multiplier for the observation kernel (None: ``scale``). Raw pixels want
        about 0.1-0.2 (image noise puts a floor under image distances).
    reg_prior : float
        ``eta`` (iw) / ``eps`` (original).
    reg_update : float
        ``lam`` (iw) / ``delta`` (original).
    reg_transition : float or None
        ``lam'`` of the transition; None uses ``reg_prior`` (as Xu et al. (2022) does).
    n_neighbors : int
        Neighbourhood size of the ``knn`` transition.
    estimate : {"mean", "raw_mean", "mode"}
        The point estimate ``x``: normalised weighted mean (default), the raw mean
        ``sum_i w_i x_i`` of the update's unnormalised weights (Xu et al. (2022)), or the kernel mode.
    features : "auto", transformer or None
        A map applied to the (flattened) observations before the observation kernel, fitted as
        ``features.fit(Z, X)`` on the training observations and states: ``sklearn`` ``PCA``, or
        :class:`~kbfilter.features.GaussianBlur` / :class:`~kbfilter.features.RandomFourierFeatures` /
        :class:`~kbfilter.features.LearnedFeatures`. A map with an ``image_shape`` parameter left
        at None is given the observations' shape. ``"auto"`` (the default) puts
        ``IMAGE_FEATURES`` (a Gaussian blur of 3 pixels, every second pixel kept: the best map of
        the image benchmarks) in front of image observations and nothing in front of vectors;
        None keeps raw observations, pixels included.
        With ``kernel_z=LinearKernel()`` the update uses the feature (push-through) form.
    approximation : {"exact", "nystrom", "rff"}
        How the state and observation kernels are represented, which decides what a fitted
        filter holds and what a step costs:

        - ``"exact"``: dense ``T x T`` transition and projection; O(T^2) memory and a step.
          Best up to a few thousand training steps.
        - ``"nystrom"``: both kernels replaced by their Nystrom approximation on landmarks
          chosen by pivoted Cholesky (:class:`~kbfilter.kernel_approximation.NystromKernel`).
          The projection is ``T F (F^T F + T eta I)^{-1} F^T`` (``F``: the states' features), the
          transition the same low-rank
          form (or sparse with ``transition="knn"``), and the update the push-through form
          ``w = D Phi (Phi^T D Phi + T lam I)^{-1} phi(z)`` on the support of ``D``: O(T r)
          memory, O(T r + s r^2) a step (s: the training states the predicted belief covers),
          no ``T x T`` array anywhere. The original rule is computed exactly on the same factors
          (Woodbury). A filter fitted with controls approximates the product kernel of its
          controlled transition the same way
          (:class:`~kbfilter.filters.controlled.LowRankControlledTransition`).
        - ``"rff"``: random Fourier features of Gaussian kernels
          (:class:`~kbfilter.kernel_approximation.RandomFourierKernel`), same operators. Unbiased
          but needs many more features than Nystrom for the same accuracy; seeded by
          ``random_state``.
    rank : int or None
        ``"nystrom"``: the number of landmarks; None chooses it per kernel: landmarks are added
        until the neglected trace ``tr(G - Phi Phi^T)`` is at most ``RANK_RTOL * T * reg``
        (``RANK_RTOL = 0.1``) for the smallest regulariser ``reg`` the Gram matrix is solved
        with, which bounds the relative change of that solve by ``RANK_RTOL``; at most
        ``MAX_RANK = 1000``. Measured on rotation and oscillation (T = 4,000, four settings),
        the filter's MSE then stays within 0.06 % of the exact filter's. Narrow bandwidths need
        more landmarks (about 20 at ``scale=1``, 200-300 at ``scale=0.25``).
        ``"rff"``: the number of features (None: ``RFF_RANK = 1000``).
    random_state : int, Generator or None
        Seeds the random Fourier features and the random subset of ``compression="random"``.
    compress : int or None
        Keep only this many of the logged transitions ``(x_t, x_{t+1}, z_{t+1})``: the filter's
        training states are then their ``x_{t+1}``, its transition is learned from their
        ``(x_t, x_{t+1})`` and its observation model from their ``(x_{t+1}, z_{t+1})``, so a
        step costs ``O(compress^2)`` instead of ``O(T^2)``. None keeps everything.
    compression : {"herding", "random"}
        How ``compress`` chooses: kernel herding of the transitions' joint embedding under the
        filter's own (scaled) state and observation kernels (see :mod:`kbfilter.filters.compression`),
        or a random subset seeded by ``random_state``.
    covariance_scale : float
        Multiplies the reported covariance ``P`` (the weighted covariance of the training states).
        :func:`~kbfilter.tune_filter` sets it on the validation block so that the mean NEES
        there equals ``dim_x`` (see :ref:`smoothing`): left at 1, the weighted covariance is
        wider than the filter's errors (a mean NEES of 1.3 for the 2-D state of the rotation
        benchmark, where a consistent filter gives 2).
    outlier_quantile : float in (0, 1] or None
        Gate the observations: one farther from every training observation (after ``features``)
        than this quantile of the training observations' distances to their nearest neighbour
        is an outlier, and the update leaves the prediction as it is (counted in
        ``diagnostics["outlier"]``; see :class:`~kbfilter.filters.outliers.OutlierGate`). None
        uses every observation.

    Attributes
    ----------
    x, P : ndarray
        Current estimate and covariance (clipped normalised weights, algorithms §2).
    x_prior, P_prior, x_post, P_post : ndarray
        After the last ``predict()`` / ``update()``, as in filterpy.
    weights, weights_prior : ndarray of shape (T,)
        The current and the predicted weights over the training states, kept summing to 1 (the
        update is rescaled every step, so long runs never underflow). ``weights`` is the belief
        the next step starts from, as ``x`` is: the posterior after :meth:`update`, the
        prediction after :meth:`predict` (so that ``predict(); predict()`` goes two steps ahead).
    transition_operator_, projection_operator_ : Operator
        The transition ``A`` (``w_pred = A w``) and the projection ``K`` (``mu = K w_pred``) over
        the training states: :class:`~kbfilter.operators.DenseOperator` for the exact filter,
        :class:`~kbfilter.operators.LowRankOperator` or
        :class:`~kbfilter.operators.SparseOperator` on the scalable path.
    kernel_x_ : Kernel
        The fitted state kernel (exact, also on the scalable path; used by ``estimate="mode"``).
    diagnostics : collections.Counter
        How often each fallback was used, at fit time and since the last ``reset``: the rule's
        (``"uniform_ratio"``, ``"regression"``, ``"nonpositive_sum"``, ``"jitter"``, ``"lu"``;
        see ``KernelBayesRule``), ``"transition_jitter"`` / ``"transition_lu"`` and ``"rank_cap"``
        (the default rank rule stopped at ``MAX_RANK``) at fit, and the
        filter's own: ``"clipped"`` (weights summing to <= 0 replaced by their normalised positive
        part), ``"collapsed"`` (no positive weight at all: the previous belief is kept) and
        ``"outside_training"`` (an estimate more than ``OUTSIDE_MARGIN``, 10 %, of the training
        states' range outside their bounding box: counted and warned about, not changed);
        ``"outlier"`` counts the observations the gate set aside (``outlier_quantile``; counted,
        not warned about).
        Each kind is warned about once per reset. A loaded filter keeps its fit-time counts and
        counts steps from the load on.

    log_likelihood, likelihood : float or None
        The log predictive density of the last observation given to :meth:`update`, under the
        predicted belief (None after a missing one; computed also for an observation the gate
        set aside, and only when read): the mixture ``sum_j w_j N(z; z_j, diag(h^2))`` of the learned observation
        density (:class:`~kbfilter.filters.likelihood.ObservationDensity`: one Gaussian at each
        training observation, with the observation kernel's bandwidths), in the space the
        observation kernel sees. Sum it over a held-out run to compare two fitted filters that
        see the same space; ``likelihood`` is its exponential (see
        :class:`~kbfilter.filters.likelihood.PredictiveLikelihood`).

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> system = kb.systems.Rotation()
    >>> states, obs = system.simulate(300, rng=0)
    >>> kbf = kb.KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    >>> test_states, test_obs = system.simulate(50, rng=1)
    >>> means, covs, _, _ = kbf.batch_filter(test_obs)
    >>> bool(np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.08)   # raw z: 0.08
    True
    """

    def __init__(self, rule="iw", transition="exact", kernel_x=None, kernel_z=None, scale=1.0, scale_z=None,
                 reg_prior=1e-2, reg_update=1e-2, reg_transition=None, n_neighbors=50, estimate="mean",
                 features="auto", approximation="exact", rank=None, random_state=None, kernel_u=None,
                 compress=None, compression="herding", outlier_quantile=None, covariance_scale=1.0):
        self.rule = rule
        self.covariance_scale = covariance_scale
        self.outlier_quantile = outlier_quantile
        self.compress = compress
        self.compression = compression
        self.kernel_u = kernel_u
        self.transition = transition
        self.approximation = approximation
        self.rank = rank
        self.random_state = random_state
        self.kernel_x = kernel_x
        self.kernel_z = kernel_z
        self.scale = scale
        self.scale_z = scale_z
        self.reg_prior = reg_prior
        self.reg_update = reg_update
        self.reg_transition = reg_transition
        self.n_neighbors = n_neighbors
        self.estimate = estimate
        self.features = features

    # -- fitting ----------------------------------------------------------------------------------
    @limited_blas
    def fit(self, states, observations, controls=None):
        """Learn the filter from one training sequence or a list of them.

        Transition pairs ``(x_t, x_{t+1})`` are taken inside each sequence only. With
        ``controls``, the transition is learned given the control, from the triples
        ``(x_t, u_{t+1}, x_{t+1})`` with the product kernel ``k_x k_u`` (see
        :class:`~kbfilter.filters.controlled.ControlledTransition`, and its low-rank form with
        ``approximation="nystrom"``), and :meth:`predict` needs a control.

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            The hidden states of the training trajectories.
        observations : array-like of shape (T, dim_z) or (T, rows, columns[, channels]), or a list
            The observation at each training state (vectors or images), one list entry per state
            sequence.
        controls : array-like of shape (T, dim_u), or a list of such arrays, optional
            ``controls[t]`` is the control that moved the system from ``states[t - 1]`` to
            ``states[t]`` (what ``predict(u)`` takes before ``update(z_t)``; the first of each
            sequence is not used). Needs ``transition="exact"`` and ``approximation`` ``"exact"`` or
            ``"nystrom"``.

        Returns
        -------
        self : KernelBayesFilter
            The fitted filter, its belief reset to uniform over the training states.
        """
        settings = ObservationSettings.of(self)
        rng = check_rng(self.random_state)
        if isinstance(self.transition, ConditionalEmbedding):
            transition_method = self.transition.method
        else:
            check_choice(self.transition, "transition", ("exact", "knn"))
            transition_method = self.transition
        check_choice(self.estimate, "estimate", ("mean", "raw_mean", "mode"))
        check_positive(self.covariance_scale, "covariance_scale")
        check_int(self.n_neighbors, "n_neighbors")
        check_choice(self.compression, "compression", ("herding", "random"))
        if self.compress is not None:
            check_int(self.compress, "compress", minimum=2)
        xs, zs, obs_shape = check_sequences(states, observations)
        X, Z = np.vstack(xs), np.vstack(zs)
        T = X.shape[0]
        self.n_features_in_ = X.shape[1]
        if T < 3:
            raise ValueError(f"states: expected at least 3 training steps in all, got {T}")
        ends = np.cumsum([len(x) for x in xs])
        pred = np.setdiff1d(np.arange(T), ends - 1)
        if self.compress is not None and self.compress > len(pred):
            raise ValueError(f"compress: expected at most {len(pred)} (the logged transitions), got {self.compress}")
        if controls is not None:
            if self.compress is not None:
                raise ValueError("compress: a filter fitted with controls keeps every transition; expected None")
            if transition_method != "exact" or settings.approximation == "rff":
                raise ValueError(f"controls: a controlled transition needs transition='exact' and approximation "
                                 f"'exact' or 'nystrom', got {transition_method!r} and {settings.approximation!r}")
            U = np.vstack(check_controls(controls, xs))
        space, Z = ObservationSpace.fitted(settings.features, obs_shape, Z, X)
        reg_prior = settings.reg_prior
        reg_transition = reg_prior if self.reg_transition is None else check_positive(self.reg_transition,
                                                                                      "reg_transition")
        # one state and one observation kernel, fitted on all the training data and handed on as fitted
        kernels = settings.fitted_kernels(X, Z, space)
        kernel_x = kernels[0]
        kept = np.arange(T)
        if self.compress is not None:
            picked = kept_transitions(X[pred], X[pred + 1], Z[pred + 1], self.compress, self.compression, kernels,
                                      rng)
            pred = pred[picked]
            kept = pred + 1
        # the state Gram is solved with eta (projection) and, for the exact transition, lam'
        state_reg = min(reg_prior, reg_transition) if transition_method == "exact" else reg_prior
        observation = settings.fit_model(space, X[kept], Z[kept], state_reg, rng, kernels)
        rule = observation.rule
        if controls is None:
            embedding = (clone(self.transition) if isinstance(self.transition, ConditionalEmbedding)
                         else ConditionalEmbedding(method=self.transition, n_neighbors=self.n_neighbors))
            # the localized transition needs the radial kernel itself: its weights are sparse already
            kernel_in = kernel_x if transition_method == "knn" else rule.kernel_x_.frozen()
            embedding.set_params(kernel_in=kernel_in, kernel_out=kernel_x, reg=reg_transition)
            if transition_method == "knn":
                embedding.set_params(n_neighbors=min(embedding.n_neighbors, len(pred)))
            embedding.fit(X[pred], X[pred + 1])
            # over the kept training states: the predecessors' weights moved to their successors
            transition = LearnedTransition(
                embedding, embedding.weights_operator(X[kept]).placed(np.searchsorted(kept, pred + 1), len(kept)))
        else:
            kernel_u = fitted_kernel(scaled_kernel(self.kernel_u, "kernel_u", settings.scale, standardise=True),
                                     "kernel_u", U[pred + 1])
            if settings.approximation == "exact":
                transition = ControlledTransition.build(X, pred, U, rule.kernel_x_, kernel_u, reg_transition)
            else:  # the product kernel on Nystrom landmark pairs, at the rank rule of the other kernels
                transition = LowRankControlledTransition.build(X, pred, U, kernel_x, kernel_u, reg_transition,
                                                               *nystrom_rank_rule(self.rank, reg_transition))
        # fallbacks taken while fitting (e.g. jitter on a Gram matrix) stay counted after reset()
        fit_diagnostics = observation.fit_diagnostics + Counter(transition.fit_diagnostics)
        if settings.approximation == "nystrom" and settings.rank is None:
            report_rank_cap("KernelBayesFilter", [*observation.short_kernels, *transition.short_kernels],
                            fit_diagnostics)
        self.model_ = FilterModel(
            states=X[kept], kept=kept, predecessors=pred, kernel_x=kernel_x, observation=observation,
            transition=transition,
            # KuLSIF / KBR projection: mu = K w_pred with K = T (G_x + T eta I)^{-1} G_x
            projection_operator=rule.projection_operator(), estimate=self.estimate, fit_diagnostics=fit_diagnostics,
            covariance_scale=self.covariance_scale)
        self.reset()
        return self

    def _grid_for(self, obs_shape):
        # the learned observation model's grid
        return observation_grid(self.features, self.approximation, obs_shape)

    # -- what fit learned (read-only; shared by copies of the filter) ------------------------------
    states_ = _learned("states", "The training states the filter keeps, stacked: ndarray of shape (n, dim_x) "
                                 "(all T of them unless compressed).")
    kept_ = _learned("kept", "Indices of :attr:`states_` among the T stacked training states.")
    predecessors_ = _learned("predecessors", "Indices among the stacked training states of the states whose "
                                             "transition the filter learned (each has a successor in its sequence).")
    kernel_x_ = _learned("kernel_x", "The fitted state kernel (exact, also on the scalable path).")
    observation_model_ = _learned("observation", "The learned observation model, a "
                                                 ":class:`~kbfilter.filters.observation.LearnedObservationModel`.")
    projection_operator_ = _learned("projection_operator", "The projection ``K``: ``mu = K w_pred``.")
    fit_diagnostics_ = _learned("fit_diagnostics", "Fallbacks taken while fitting (a Counter).")

    @property
    def obs_shape_(self):
        """Shape of one training observation."""
        return self.model_.observation.space.obs_shape

    @property
    def features_(self):
        """The fitted observation feature map, or None."""
        return self.model_.observation.space.features

    @property
    def rule_(self):
        """The fitted :class:`~kbfilter.KernelBayesRule` (the observation model's)."""
        return self.model_.observation.rule

    @property
    def transition_(self):
        """The fitted transition's :class:`~kbfilter.ConditionalEmbedding` (None for a filter fitted
        with controls)."""
        return getattr(self.model_.transition, "embedding", None)

    @property
    def transition_operator_(self):
        """The transition ``A``: ``w_pred = A w`` (None for a filter fitted with controls)."""
        return getattr(self.model_.transition, "operator", None)

    @property
    def successors_(self):
        """Indices of the successors of :attr:`predecessors_` among the stacked training states."""
        return self.model_.predecessors + 1

    @property
    def n_train_(self):
        """The number of training states the filter keeps (``T``, or ``compress``)."""
        return self.model_.states.shape[0]

    # -- belief -------------------------------------------------------------------------------------
    @limited_blas
    def reset(self, prior=None, weights=None):
        """Set the belief: uniform over the training states (default), a user prior, or weights.

        Parameters
        ----------
        prior : KernelMean, array-like of shape (n, dim_x) or None, default=None
            A kernel mean on the state space or samples of the initial state. It is projected onto
            the training states, ``w = (G_x + T eps I)^{-1} G_{x,u} gamma``. ``None`` gives equal
            weights.
        weights : array-like of shape (n,) or None, default=None
            Weights over the ``n = n_train_`` training states summing to 1 (a belief kept from an earlier
            step, e.g. by a tracker that holds many tracks), used as they are; not together with
            ``prior``.

        Returns
        -------
        self : KernelBayesFilter
            The filter with its new belief.
        """
        check_is_fitted(self, "model_")
        T = self.n_train_
        if weights is not None:
            if prior is not None:
                raise ValueError("weights: expected None when a prior is given; pass one of them")
            weights = check_vector(weights, "weights", length=T)
            if not abs(weights.sum() - 1.0) <= 1e-8:
                raise ValueError(f"weights: expected weights summing to 1, got a sum of {weights.sum()!r}")
        self._events = Counter()
        self._unobserved()
        if weights is not None:
            w = weights.copy()
        elif prior is None:
            w = np.full(T, 1.0 / T)
        else:
            if not isinstance(prior, KernelMean):
                prior = KernelMean(check_matrix(prior, "prior", n_features=self.states_.shape[1]),
                                   kernel=self.rule_.kernel_x_)
            w = self.rule_.prior_projection(prior) / T
            w = self._normalised(w, fallback=np.full(T, 1.0 / T))
        self.weights = self.weights_prior = w
        self._set_estimate("prior", self.model_.point(w, w), self.model_.covariance(w))
        self._set_estimate("post", self.x_prior, self.P_prior)
        return self

    def _checked_point(self, w, raw):
        x = self.model_.point(w, raw)
        if self.model_.outside(x):
            self._record("outside_training", _OWN_FALLBACKS["outside_training"])
        return x

    def _normalised(self, w, fallback):
        p, rule = normalise_weights(w)
        if rule is not None:
            self._record(rule, _OWN_FALLBACKS[rule])
        return fallback if p is None else p

    # -- filterpy surface -----------------------------------------------------------------------------
    @limited_blas
    def predict(self, u=None):
        """Kernel sum rule through the learned transition (algorithms §6).

        Parameters
        ----------
        u : array-like of shape (dim_u,) or None, default=None
            The control, for a filter fitted with controls (required then, refused otherwise).
        """
        check_is_fitted(self, "model_")
        model = self.model_
        # the prediction becomes the current belief (as filterpy's x does), so predictions chain
        self.weights = self.weights_prior = self._normalised(model.transition.apply(self.weights, u),
                                                             fallback=self.weights)
        self._set_estimate("prior", self._checked_point(self.weights_prior, self.weights_prior),
                           model.covariance(self.weights_prior))

    @limited_blas
    def update(self, z):
        """Kernel Bayes' rule with one observation (algorithms §6).

        Parameters
        ----------
        z : array-like of shape (dim_z,) or obs_shape, or None
            The observation, flat or in the training observations' shape. ``None`` is a missing
            measurement: the posterior is the prediction, as it is for an outlier (see
            ``outlier_quantile``).
        """
        check_is_fitted(self, "model_")
        model = self.model_
        self._unobserved()
        # the predictive density of the observation is the one before the gate decides (a tracker gates with it)
        row = self._admitted(z, model.observation,
                             seen=lambda mapped: self._observed(model.observation, self.weights_prior, mapped))
        if row is None:
            self.weights = self.weights_prior
            self._keep_prediction()
            return
        raw, info = model.observation.posterior_weights(model.projection_operator @ self.weights_prior, row)
        self._record_all(info)
        self.weights = self._normalised(raw, fallback=self.weights_prior)
        self._set_estimate("post", self._checked_point(self.weights, raw), model.covariance(self.weights))

    def _after_load(self):
        super()._after_load()
        # a saved file is untrusted: its belief must fit its model, and one step must run, so that a
        # file that would fail at first use (a tampered value deep in the model) fails here instead
        n, d = self.model_.states.shape
        for name in ("weights", "weights_prior"):
            check_vector(getattr(self, name, None), name, length=n)
        for name in ("x", "x_prior", "x_post"):
            check_vector(getattr(self, name, None), name, length=d)
        for name in ("P", "P_prior", "P_post"):
            if check_matrix(getattr(self, name, None), name).shape != (d, d):
                raise ValueError(f"{name}: expected a ({d}, {d}) covariance")
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one prediction and one update with the first training observation (see probe_loaded)
        filt.reset()
        dim_u = filt.model_.transition.dim_u
        filt.predict(None if dim_u is None else np.zeros(dim_u))
        observation = filt.model_.observation
        raw, _ = observation.posterior_weights(filt.projection_operator_ @ filt.weights_prior,
                                               observation.rule.observations_[:1])
        return filt.x_prior, filt.P_prior, raw

    def log_likelihood_of(self, zs):
        """The log predictive density of candidate observations under the current belief,
        without updating it (a tracker scores measurements against the predicted belief with
        it, after :meth:`predict`; see :attr:`log_likelihood`).

        Parameters
        ----------
        zs : array-like of shape (dim_z,) or (q, dim_z), or one image or a stack of images
            One observation or several.

        Returns
        -------
        float or ndarray of shape (q,)
            The log density of each.
        """
        check_is_fitted(self, "model_")
        space = self.model_.observation.space
        single = np.ndim(zs) == len(space.obs_shape) or (len(space.obs_shape) == 1 and np.ndim(zs) == 0)
        rows = np.vstack([space.map(z) for z in ([zs] if single else zs)])
        out = self.model_.observation.density.log_predictive(self.weights_prior, rows)
        return float(out[0]) if single else out

    # -- beyond filtering ---------------------------------------------------------------------------
    @limited_blas
    def smooth(self, zs, us=None):
        """Fixed-interval smoothing: the belief at every step of a run given the whole run.

        Runs the filter over ``zs`` from its current belief (as :meth:`batch_filter` does, and
        leaving it where ``batch_filter`` would), then the backward pass of
        :func:`~kbfilter.filters.smoothing.kernel_smoother` on its weights: the belief over the
        training states at each step, reweighted by how well each training state explains the
        observations that follow (see :ref:`smoothing`). A step costs about what a filtering
        step costs.

        Parameters
        ----------
        zs : iterable of array-like or None
            The observations in time order; None is a missing measurement.
        us : iterable of array-like, optional
            The controls, as :meth:`batch_filter` takes them.

        Returns
        -------
        means : ndarray of shape (n_steps, dim_x)
            Smoothed estimates.
        covs : ndarray of shape (n_steps, dim_x, dim_x)
            Their covariances.

        Examples
        --------
        >>> import numpy as np
        >>> import kbfilter as kb
        >>> system = kb.systems.Rotation()
        >>> kbf = kb.KernelBayesFilter(reg_prior=1e-3).fit(*system.simulate(500, rng=0))
        >>> truth, zs = system.simulate(100, rng=1)
        >>> smoothed, _ = kbf.smooth(zs)
        >>> filtered = kbf.reset().batch_filter(zs)[0]
        >>> def mse(m): return np.mean(np.sum((m - truth) ** 2, axis=1))
        >>> bool(mse(smoothed) < mse(filtered))
        True
        """
        check_is_fitted(self, "model_")
        zs, us = checked_run(zs, us)
        weights = [self.weights.copy() for _ in self._run(zs, us)]
        means, covs, _ = kernel_smoother(self, np.array(weights), zs, us)
        return means, covs
