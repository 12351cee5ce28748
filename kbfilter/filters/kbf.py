"""The kernel Bayes filter (algorithms §6; Xu et al. (2022) Algorithm 2; Fukumizu (2014) "KBR for HMM").

Learns the transition (kernel sum rule on the training transitions) and the observation model
(kernel Bayes' rule) from example trajectories ``(x_t, z_t)``, then tracks the state from
observations alone. The belief is a weight vector over the training states.
"""

import copy
from collections import Counter

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .._validation import as_steps, check_choice, check_controls, check_indices, check_int, check_positive, check_rng, \
    check_saved_matrix, check_sequences, check_state_samples, check_vector, ndim_or_none
from .._warnings import warn_user
from ..embedding import KernelMean, clipped_weights, normalise_weights, probability_weights, weighted_covariance
from ..kernels import fitted_kernel
from ..linalg import NumericalWarning
from ..operators import Operator
from ..persistence import Persistent, persistent, saved_before_fit
from ..rules.conditional import ConditionalEmbedding
from ..threads import limited_blas
from .base import (OUTSIDE_MARGIN, TUNING_RECORD, LearnedFilter, SharedModel, TrainingBox, check_loaded_estimates,
                   check_param_names, probe_loaded, report_outlying_states, stacked_predecessors, tuning_record_holds)
from .chunked import checked_log, gathered, is_dask_array, scattered, search_chunks, summary_fitted_kernel
from .compression import kept_transitions
from .controlled import ControlledTransition, LowRankControlledTransition
from .likelihood import PredictiveLikelihood
from .local import AUTO_LOCAL_T, LocalFilterModel, chunked_transition
from .observation import (LearnedObservationModel, ObservationSettings, ObservationSpace, check_dense_fits,
                          nystrom_rank_rule, observation_features, observation_grid, report_rank_cap, scaled_kernel)
from .smoothing import check_smoothing_memory, kernel_smoother, local_backward_pass
from .transitions import LearnedTransition

__all__ = ["KernelBayesFilter", "FilterModel"]

# What the filter does itself when its weights cannot be normalised (see ``embedding.normalise_weights``),
# and when its estimate leaves the training states.
#: ``n_neighbors=None``: the neighbourhood of the ``knn`` transition on the exact and Nystrom paths
KNN_NEIGHBORS = 50
#: ... and with ``approximation="local"``, whose belief a prediction spreads over ``support *
#: n_neighbors`` states. Measured on the oscillation system (2 runs each, 300 test steps): at
#: T = 10^5 and tuned bandwidths, 20 neighbours gave an MSE 0.5 % below 50 neighbours', with a fit
#: of 1.6 s instead of 11 s and a step 20 % faster; at T = 20,000 and the default hyperparameters
#: 20 and 50 were equal (0.0523, 0.0524) and 10 was 1 % worse
LOCAL_NEIGHBORS = 20
#: T x T float64 arrays the exact filter's fit holds at its peak (measured with tracemalloc on the
#: oscillation system: 6.2, 6.1 and 6.0 for T = 1,000, 2,000 and 4,000; the fitted filter keeps 5)
EXACT_FIT_ARRAYS = 6

_OWN_FALLBACKS = {"clipped": "weights summed to <= 0; used their clipped, normalised positive part",
                  "collapsed": "no weight was positive; kept the previous belief",
                  "outside_training": f"the estimate left the training states' bounding box by more than "
                                      f"{OUTSIDE_MARGIN:.0%} of their range (signed weights extrapolate: a larger "
                                      f"regulariser keeps them closer to a mean)"}


@persistent("states", "kept", "predecessors", "kernel_x", "observation", "transition", "projection_operator",
            "estimate", "fit_diagnostics", "covariance_scale",
            holds={"kernel_x": "Kernel", "observation": "LearnedObservationModel",
                   "transition": ("LearnedTransition", "ControlledTransition", "LowRankControlledTransition"),
                   "projection_operator": "Operator"})
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
        states = check_saved_matrix(states, "states")
        n = states.shape[0]
        kept = check_indices(kept, "kept", increasing=True)
        if kept.shape != (n,):
            raise ValueError(f"kept: expected one index per training state ({n}), got shape {kept.shape}")
        predecessors = check_indices(predecessors, "predecessors", increasing=True)
        if not np.array_equal(kept[np.minimum(np.searchsorted(kept, predecessors + 1), n - 1)], predecessors + 1):
            raise ValueError("predecessors: expected states whose successors are among the kept states")
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
        #: the training states' widened bounding box (an estimate outside it is counted)
        self.box = TrainingBox(states)

    @property
    def observer(self):
        """What maps, gates and scores observations (``space`` and ``density``): the learned
        observation model."""
        return self.observation

    @property
    def dim_u(self):
        """The control's dimension (None without controls)."""
        return self.transition.dim_u

    @property
    def training_observations(self):
        """The training observations, in the space the observation kernel sees."""
        return self.observation.rule.observations_

    def predicted(self, values, support, u):
        """The kernel sum rule: ``A(u) w`` over every training state.

        Parameters
        ----------
        values : ndarray of shape (n,)
            The belief's weights.
        support : None
            Every state (the local model's weights sit on a support).
        u : ndarray or None
            The control (see :meth:`LearnedTransition.apply`).

        Returns
        -------
        values : ndarray of shape (n,)
            The predicted weights, not normalised.
        support : None
            Every state.
        dropped_mass : float
            0: this model drops nothing.
        """
        return self.transition.apply(values, u), None, 0.0

    @staticmethod
    def on_support(w):
        """Weights over every training state as this model holds a belief.

        Parameters
        ----------
        w : ndarray of shape (n,)
            The weights.

        Returns
        -------
        values, support : ndarray, None
            ``w`` itself, on every state.
        """
        return w, None

    def on_states(self, values, support):
        """A belief given by its weights on some training states, as this model holds it.

        Parameters
        ----------
        values : ndarray of shape (s,)
            The weights.
        support : ndarray of int, shape (s,)
            Their training states, distinct.

        Returns
        -------
        values : ndarray of shape (n,)
            The weights over every training state, zero off ``support``.
        support : None
            Every state.
        """
        w = np.zeros(self.states.shape[0])
        w[support] = values
        return w, None

    @staticmethod
    def dense(values, support):
        """A belief as weights over every training state.

        Parameters
        ----------
        values : ndarray of shape (n,)
            The weights.
        support : None
            Every state.

        Returns
        -------
        ndarray of shape (n,)
            ``values`` itself.
        """
        return values

    def posterior(self, values, support, row):
        """Kernel Bayes' rule from the predicted weights, through the projection.

        Parameters
        ----------
        values : ndarray of shape (n,)
            The predicted weights.
        support : None
            Every state.
        row : ndarray of shape (1, d)
            The observation, mapped and admitted.

        Returns
        -------
        raw : ndarray of shape (n,)
            The update's weights, not normalised.
        support : None
            Every state.
        info : dict
            The rule's fallbacks.
        dropped_mass : float
            0: this model drops nothing.
        """
        raw, info = self.observation.posterior_weights(self.projection_operator @ values, row)
        return raw, None, info, 0.0

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
        return self.box.outside(x)

    def _mean(self, w, raw):
        return w @ self.states

    def _raw_mean(self, w, raw):
        return raw @ self.states

    def _mode(self, w, raw):
        return KernelMean(self.states, w, self.kernel_x).mode()

    def estimates(self, w, raw, support=None):
        """The point estimate and the covariance of a belief.

        Parameters
        ----------
        w : ndarray of shape (n,)
            Normalised weights.
        raw : ndarray of shape (n,)
            The update's weights (for ``estimate="raw_mean"``).
        support : None
            Every state.

        Returns
        -------
        x : ndarray of shape (dim_x,)
            The point estimate.
        P : ndarray of shape (dim_x, dim_x)
            The covariance (see :meth:`covariance`).
        """
        return self.point(w, raw), self.covariance(w)

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


class _Belief:
    """Weights on a support of training states (None: on all of them). On the local path the
    weights over all ``T`` states are written out only when someone reads them, so that a step
    never touches ``T`` numbers."""

    __slots__ = ("values", "support", "_dense")

    def __init__(self, values, support):
        self.values, self.support = values, support
        self._dense = values if support is None else None

    @property
    def pair(self):
        """``(values, support)``."""
        return self.values, self.support

    def dense(self, model):
        """The weights over every training state of ``model``."""
        if self._dense is None:
            self._dense = model.dense(self.values, self.support)
        return self._dense


def _checked_weights(weights, n):
    """A belief given to :meth:`KernelBayesFilter.reset`: weights over the ``n`` training states
    summing to 1, as an array, or as ``(values, support)`` when given as a sparse array (only its
    stored entries read)."""
    if not sp.issparse(weights):
        weights = check_vector(weights, "weights", length=n)
        total = weights.sum()
    else:
        if weights.shape not in ((n,), (1, n)):
            raise ValueError(f"weights: expected a sparse array of shape (1, {n}), got shape {weights.shape}")
        row = sp.csr_array(weights.reshape(1, n))
        row.sum_duplicates()
        # the stored entries are the belief's support, explicit zeros included (as the filter kept it)
        weights = check_vector(row.data, "weights").copy(), row.indices.astype(np.intp)
        total = weights[0].sum()
    if not abs(total - 1.0) <= 1e-8:
        raise ValueError(f"weights: expected weights summing to 1, got a sum of {float(total)!r}")
    return weights


def _learned(name, doc):
    return property(lambda self: getattr(self.model_, name), doc=doc)


class _BeliefWeights:
    """``weights``: read from the belief, as a read-only array. Assigned, it bypassed the checks of
    :meth:`KernelBayesFilter.reset` (a wrong length failed in numpy's matmul at the next step, and
    the local path's support was lost) and left ``x`` as it was; a saved file's is restored as
    saved, and the filter's ``_after_load`` checks it."""

    def __init__(self, attr, doc):
        self.attr, self.__doc__ = attr, doc

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        # a read-only view: the array is the belief itself, and an edit in place (weights[:] = w)
        # bypassed the checks as an assignment did
        weights = getattr(obj, self.attr).dense(obj.model_).view()
        weights.flags.writeable = False
        return weights

    def __set__(self, obj, value):
        raise AttributeError(f"{self.name}: set the belief with reset(weights=...), which checks the weights and "
                             f"sets the estimate from them")

    def restore(self, obj, value):
        """Set the weights a saved filter held (checked by its ``_after_load``)."""
        setattr(obj, self.attr, _Belief(value, None))


class _PriorWeights(_BeliefWeights):
    """``weights_prior``: assignable (a prior built by hand, which no :meth:`KernelBayesFilter.reset`
    gives), but checked and kept on the model's support; assigned unchecked, a wrong length failed
    in numpy's matmul at the next update and the local path lost its support."""

    def __set__(self, obj, value):
        check_is_fitted(obj, "model_")
        values = _held_weights(check_vector(value, self.name, length=obj.n_train_), self.name).copy()
        setattr(obj, self.attr, _Belief(*obj.model_.on_support(values)))


def _held_weights(values, name):
    """Weights a belief can be: some entry nonzero (all zero, the next step had no state to start from:
    the local path failed, the others estimated the origin)."""
    if not np.any(values):
        raise ValueError(f"{name}: expected weights with a nonzero entry, got all zeros")
    return values


@persistent("model_",
            # the belief, so that a loaded filter continues where the saved one stopped
            "weights", "weights_prior", "x", "P", "x_prior", "P_prior", "x_post", "P_post", "dropped_mass",
            *TUNING_RECORD,
            holds={"model_": ("FilterModel", "LocalFilterModel"), "transition": "ConditionalEmbedding",
                   "kernel_x": "Kernel", "kernel_z": "Kernel", "kernel_u": "Kernel", "features": "TransformerMixin",
                   **tuning_record_holds("ConditionalEmbedding", "Kernel", "TransformerMixin")})
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
    n_neighbors : int or None
        Neighbourhood size of the ``knn`` transition, at most the logged transitions (those
        ``compress`` keeps); None is ``KNN_NEIGHBORS = 50`` on the exact and Nystrom paths and
        ``LOCAL_NEIGHBORS = 20`` with ``approximation="local"`` (where a prediction spreads the
        belief over ``support * n_neighbors`` states), or every transition of a shorter log. A
        ``knn`` ConditionalEmbedding given as ``transition`` brings its own (which must fit in the
        log too), and this one must be None.
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
        - ``"local"``: the exact kernels, the localized kNN transition, and a belief kept on at
          most ``support`` training states
          (:class:`~kbfilter.filters.local.LocalFilterModel`): a prediction reaches only the
          successors of the belief's states, and an update draws ``support`` of them, tilted
          towards the observation, and solves kernel Bayes' rule on those. O(T (dim_x + dim_z +
          n_neighbors)) memory, a step O(support * n_neighbors + support^3) whatever T (the
          first step from the uniform start walks every state once). With ``support >= T`` it
          is the exact filter with ``transition="knn"``. :meth:`partial_fit` extends it with
          more sequences. No controls, compression, smoother or kernel-mean prior on this path.
        - ``"auto"``: ``"exact"`` up to ``AUTO_LOCAL_T = 5000`` training states, ``"local"``
          above.
    rank : int or None
        ``"nystrom"``: the number of landmarks; None chooses it per kernel: landmarks are added
        until the neglected trace ``tr(G - Phi Phi^T)`` is at most ``RANK_RTOL * T * min(reg, 1)``
        (``RANK_RTOL = 0.1``) for the smallest regulariser ``reg`` the Gram matrix is solved
        with, which bounds the relative change of that solve by about ``RANK_RTOL``; at most
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
    support : int, default=256
        ``approximation="local"``: the most training states the posterior keeps (the update
        solves on that many). The error of the draws falls about as ``1 / support`` and a step
        costs about ``support^3``; see :ref:`local-support` for the measured trade-off.
    prior_neighbors : int, default=0
        ``approximation="local"`` with fewer than ``T`` states kept: each state an update solves
        on brings its ``prior_neighbors`` nearest training states (in the state kernel's
        coordinates) into the update, and the prior is projected onto all of them with
        ``reg_prior``, as the exact filter projects it onto every training state. A step then
        solves on up to ``(prior_neighbors + 1) * support`` states. 0 takes the drawn states'
        importance weights as the prior, unprojected. On images the projection is worth more
        than the states it costs (see :ref:`local-support`).

    Attributes
    ----------
    x, P : ndarray
        Current estimate and covariance (clipped normalised weights, algorithms §2).
    x_prior, P_prior, x_post, P_post : ndarray
        After the last ``predict()`` / ``update()``, as in filterpy.
    dropped_mass : float
        ``approximation="local"``: the share of the prediction's mass on the training states the
        last draw left out (each of them worth less than one draw); 0 when nothing was drawn and
        on the other paths.
    weights, weights_prior : ndarray of shape (T,)
        The current and the predicted weights over the training states, kept summing to 1 (the
        update is rescaled every step, so long runs never underflow). ``weights`` is the belief
        the next step starts from, as ``x`` is: the posterior after :meth:`update`, the
        prediction after :meth:`predict` (so that ``predict(); predict()`` goes two steps ahead).
        ``weights`` is read-only (nor can its array be changed in place): ``reset(weights=...)``
        sets the belief. ``weights_prior`` may be assigned (checked; the next :meth:`update` starts
        from it).
    sparse_weights : scipy.sparse.csr_array of shape (1, T)
        ``weights`` on the training states the belief is on (at most ``support`` of them with
        ``approximation="local"``, ``(prior_neighbors + 1) * support`` after an update with
        ``prior_neighbors``), without writing out all ``T``: what a tracker keeps per track.
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
        ``"prior_outside_training"`` (with ``approximation="local"``, a prior given to :meth:`reset`
        with samples outside that box; each goes to its nearest training state);
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
    y, S, mahalanobis : ndarray of shape (dim_z,), ndarray of shape (dim_z, dim_z), float, or None
        filterpy's names for the last observation given to :meth:`update`: its residual
        ``z - z_hat`` from the predicted observation ``z_hat = sum_j w_j z_j``, the predicted
        observation's covariance (the training observations' spread under the predicted belief,
        which holds their noise: on a linear-Gaussian system it approaches the Kalman filter's
        ``S``), and ``sqrt(y^T S^{-1} y)``, whose square is the NIS (:func:`kbfilter.stats.nis`) and
        which gates a measurement as filterpy's does. Computed when read; None where
        ``log_likelihood`` is, and for images or a feature map (the observations are then compared
        in another space).

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
                 reg_prior=1e-2, reg_update=1e-2, reg_transition=None, n_neighbors=None, estimate="mean",
                 features="auto", approximation="exact", rank=None, random_state=None, kernel_u=None,
                 compress=None, compression="herding", outlier_quantile=None, covariance_scale=1.0, support=256,
                 prior_neighbors=0):
        self.rule = rule
        self.support = support
        self.prior_neighbors = prior_neighbors
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
    def fit(self, states, observations, *, controls=None):
        """Learn the filter from one training sequence or a list of them.

        Transition pairs ``(x_t, x_{t+1})`` are taken inside each sequence only. With
        ``controls``, the transition is learned given the control, from the triples
        ``(x_t, u_{t+1}, x_{t+1})`` with the product kernel ``k_x k_u`` (see
        :class:`~kbfilter.filters.controlled.ControlledTransition`, and its low-rank form with
        ``approximation="nystrom"``), and :meth:`predict` needs a control.

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            The hidden states of the training trajectories. A ``dask.array`` (with
            ``observations`` one too) is one sequence fitted on the workers where its chunks are,
            with ``approximation`` ``"local"`` or ``"auto"``, vector (or scalar) observations and no
            controls (:mod:`kbfilter.filters.chunked`).
        observations : array-like of shape (T, dim_z) or (T, rows, columns[, channels]), or a list
            The observation at each training state (vectors or images), one list entry per state
            sequence.
        controls : array-like of shape (T, dim_u), or a list of such arrays, optional
            ``controls[t]`` is the control that moved the system from ``states[t - 1]`` to
            ``states[t]`` (what ``predict(u)`` takes before ``update(z_t)``; the first of each
            sequence is not used). Needs ``transition="exact"`` and ``approximation`` ``"exact"`` or
            ``"nystrom"``. By keyword only: a controlled system's ``simulate`` returns ``(states,
            controls, observations)``, in another order.

        Returns
        -------
        self : KernelBayesFilter
            The fitted filter, its belief reset to uniform over the training states.
        """
        settings, transition_method = self._checked_settings()
        rng = check_rng(self.random_state)
        if is_dask_array(states) or is_dask_array(observations):
            return self._fit_chunked(states, observations, controls, settings)
        xs, zs, obs_shape = check_sequences(states, observations)
        X, Z = np.vstack(xs), np.vstack(zs)
        T = X.shape[0]
        self.n_features_in_ = X.shape[1]
        if T < 3:
            raise ValueError(f"states: expected at least 3 training steps in all, got {T}")
        pred = stacked_predecessors(xs)
        if settings.approximation == "auto":
            settings.approximation = "exact" if T <= AUTO_LOCAL_T else "local"
        if settings.approximation == "local" and (controls is not None or self.compress is not None
                                                   or isinstance(self.transition, ConditionalEmbedding)):
            raise ValueError("approximation: 'local' learns the kNN transition without controls or compression; "
                             "expected controls=None, compress=None and transition 'exact' or 'knn'")
        if (transition_method == "knn" or settings.approximation == "local") and not settings.kernel_x.is_radial:
            # the neighbours are found by Euclidean distance, which only a radial kernel ranks alike
            path = "approximation='local'" if settings.approximation == "local" else "transition='knn'"
            raise ValueError(f"kernel_x: {path} needs a radial kernel (Gaussian or Laplace), whose similarity ranks "
                             f"neighbours like Euclidean distance; got {type(self.kernel_x).__name__}")
        if self.compress is not None and self.compress > len(pred):
            raise ValueError(f"compress: expected at most {len(pred)} (the logged transitions), got {self.compress}")
        if transition_method == "knn" or settings.approximation == "local":
            self._neighbours(settings.approximation == "local", len(pred) if self.compress is None else self.compress)
        if controls is not None:
            if self.compress is not None:
                raise ValueError("compress: a filter fitted with controls keeps every transition; expected None")
            if transition_method != "exact" or settings.approximation == "rff":
                raise ValueError(f"controls: a controlled transition needs transition='exact' and approximation "
                                 f"'exact' or 'nystrom', got {transition_method!r} and {settings.approximation!r}")
            U = np.vstack(check_controls(controls, xs))
        if settings.approximation == "exact":
            check_dense_fits(T if self.compress is None else self.compress, EXACT_FIT_ARRAYS,
                             "approximation='local' (or 'auto', or 'nystrom')")
        found = report_outlying_states("KernelBayesFilter", X)
        space, Z = ObservationSpace.fitted(settings.features, obs_shape, Z, X)
        reg_prior = settings.reg_prior
        reg_transition = self._reg_transition(settings)
        # one state and one observation kernel, fitted on all the training data and handed on as fitted
        kernels = settings.fitted_kernels(X, Z, space)
        kernel_x = kernels[0]
        if settings.approximation == "local":
            self.model_ = self._local_model(settings, space, X, Z, pred, kernels, reg_transition, found)
            self.reset()
            return self
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
            given = isinstance(self.transition, ConditionalEmbedding)
            embedding = clone(self.transition) if given else ConditionalEmbedding(method=self.transition)
            # the localized transition needs the radial kernel itself: its weights are sparse already
            kernel_in = kernel_x if transition_method == "knn" else rule.kernel_x_.frozen()
            embedding.set_params(kernel_in=kernel_in, kernel_out=kernel_x, reg=reg_transition)
            if transition_method == "knn" and not given:
                embedding.set_params(n_neighbors=self._neighbours(False, len(pred)))
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
        fit_diagnostics = observation.fit_diagnostics + Counter(transition.fit_diagnostics) + found
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

    def check_params(self):
        self._checked_settings()
        return self

    def with_params(self, **params):
        """This fitted filter with ``params`` set, sharing its fit where the fit does not depend on them.

        With ``approximation="local"`` (or ``"auto"`` above its threshold) the fit learns nothing
        from ``reg_update``, ``support``, ``estimate`` and ``covariance_scale``: a step reads them.
        A copy with any of those set anew answers as a fresh fit with them would, without the
        fit. :func:`~kbfilter.tune_filter` sweeps such a parameter on one fit.

        Parameters
        ----------
        **params
            Hyperparameters, as :meth:`set_params` takes them.

        Returns
        -------
        KernelBayesFilter or None
            A copy with the uniform belief (this filter is not changed), or None when ``params``
            need a new fit (any other parameter, or another approximation).

        Raises
        ------
        ValueError
            A value the filter refuses, as :meth:`fit` would, or a name that is not a parameter.

        Examples
        --------
        >>> import kbfilter as kb
        >>> kbf = kb.KernelBayesFilter(approximation="local").fit(*kb.systems.Rotation().simulate(300, rng=0))
        >>> kbf.with_params(reg_update=0.1).reg_update
        0.1
        >>> kbf.with_params(scale=0.5) is None
        True
        """
        check_is_fitted(self, "model_")
        if not (isinstance(self.model_, LocalFilterModel) and set(params) <= set(LocalFilterModel.UPDATE_SETTINGS)):
            return super().with_params(**params)  # a new fit: the names and values checked, None
        check_param_names(self, params)
        copied = copy.deepcopy(self).set_params(**params)
        settings, _ = copied._checked_settings()
        copied.model_ = self.model_.with_update(**copied._step_settings(settings))
        return copied.reset()

    def _checked_settings(self):
        """The observation model's settings and the transition's method, every hyperparameter checked."""
        settings = self._settings()
        check_int(self.support, "support")
        check_int(self.prior_neighbors, "prior_neighbors", minimum=0)
        check_rng(self.random_state)
        if isinstance(self.transition, ConditionalEmbedding):
            transition_method = self.transition.method
            if transition_method == "knn":
                check_int(self.transition.n_neighbors, "transition.n_neighbors", minimum=1)
                if self.n_neighbors is not None:
                    # two neighbourhood sizes for one transition: neither can be taken silently
                    raise ValueError(f"n_neighbors: the transition given is a ConditionalEmbedding with its own "
                                     f"n_neighbors={self.transition.n_neighbors}; expected None")
        else:
            transition_method = check_choice(self.transition, "transition", ("exact", "knn"))
        check_choice(self.estimate, "estimate", ("mean", "raw_mean", "mode"))
        check_positive(self.covariance_scale, "covariance_scale")
        if self.n_neighbors is not None:
            check_int(self.n_neighbors, "n_neighbors", minimum=1)
        self._reg_transition(settings)
        check_choice(self.compression, "compression", ("herding", "random"))
        if self.compress is not None:
            check_int(self.compress, "compress", minimum=2)
        return settings, transition_method

    def _settings(self):
        # the observation model's hyperparameters, checked; this filter adds two approximations
        return ObservationSettings.of(self, approximations=(*ObservationSettings.APPROXIMATIONS, "local", "auto"))

    def _neighbours(self, local, transitions):
        """The kNN transition's neighbourhood in a log of ``transitions`` transitions: the path's
        default (``n_neighbors=None``), at most all of them on a short log, or the value given,
        which must fit in the log (a value past it is a mistake, not a request for all of them: a
        neighbourhood of the whole log costs a solve on all of it for every state)."""
        given = isinstance(self.transition, ConditionalEmbedding)
        if self.n_neighbors is None and not given:
            return min(LOCAL_NEIGHBORS if local else KNN_NEIGHBORS, transitions)
        name = "transition.n_neighbors" if given else "n_neighbors"
        k = check_int(self.transition.n_neighbors if given else self.n_neighbors, name, minimum=1)
        if k > transitions:
            kept = "the logged transitions" if self.compress is None else "the transitions compress keeps"
            raise ValueError(f"{name}: expected at most {transitions} ({kept}), got {k}")
        return k

    def _reg_transition(self, settings):
        return settings.reg_prior if self.reg_transition is None else check_positive(self.reg_transition,
                                                                                     "reg_transition")

    def _fit_chunked(self, states, observations, controls, settings):
        # a log given as dask arrays: the local model, its summaries and transition computed on the
        # workers (kbfilter.filters.chunked)
        if (settings.approximation not in ("local", "auto") or controls is not None or self.compress is not None
                or isinstance(self.transition, ConditionalEmbedding)):
            raise ValueError("states: a log given as dask arrays is fitted with approximation='local' (or 'auto'), "
                             "the kNN transition, no controls and no compression")
        X, Z = checked_log(states, observations)
        T = X.shape[0]
        if T < 3:
            raise ValueError(f"states: expected at least 3 training steps in all, got {T}")
        obs_shape = (Z.shape[1],)
        if observation_features(settings.features, obs_shape) is not None:
            raise ValueError("features: a log given as dask arrays is compared as it is; expected 'auto' or None")
        self.n_features_in_ = X.shape[1]
        space = ObservationSpace(obs_shape, None)
        kernels = settings.fitted_kernels(X, Z, space, fit=summary_fitted_kernel)
        reg_transition = self._reg_transition(settings)
        # a fitted local filter keeps every training pair: those arrays (and only those) come here, in one
        # graph (states and observations may come from the same tasks), before the transition, whose
        # search reads the states once per row chunk from the workers
        n_neighbors = self._neighbours(True, T - 1)
        # from the chunks given: those of the checks may be larger than a search task should hold
        chunks = search_chunks(states.chunks[0], X.shape[1], n_neighbors)
        X, Z = gathered(X, Z)
        transition = chunked_transition(scattered(X, chunks), kernels[0], n_neighbors, reg_transition)
        found = report_outlying_states("KernelBayesFilter", X)
        self.model_ = self._local_model(settings, space, X, Z, np.arange(T - 1), kernels, reg_transition, found,
                                        transition)
        self.reset()
        return self

    def _local_model(self, settings, space, X, Z, pred, kernels, reg_transition, found, transition=None):
        return LocalFilterModel.learned(
            X, Z, pred, kernels, space.gated(Z, settings.outlier_quantile), self._neighbours(True, len(pred)),
            reg_transition, data_found=found, transition=transition, rule=settings.rule, reg_prior=settings.reg_prior,
            **self._step_settings(settings))

    def _step_settings(self, settings):
        # what a local model's step reads (LocalFilterModel.UPDATE_SETTINGS): at fit, and in with_params
        return dict(reg_update=settings.reg_update, support=self.support, estimate=self.estimate,
                    covariance_scale=self.covariance_scale, prior_neighbors=self.prior_neighbors)

    @limited_blas
    def partial_fit(self, states, observations):
        """Extend a filter fitted with ``approximation="local"`` by more logged sequences.

        The new sequences are appended to the training log (no transition is learned across the
        join). The kernels, their bandwidths and the feature map stay as ``fit`` chose them; the
        transition is learned again only at the new states and at the old states whose
        neighbourhood a new state enters (see
        :meth:`~kbfilter.filters.local.LocalFilterModel.extended`), and the outlier gate, if
        any, is refitted on all the observations. The result equals one ``fit`` on all the
        sequences with those kernels passed in fitted (to round-off). An unfitted filter is
        fitted. The belief is reset.

        Parameters
        ----------
        states : array-like of shape (n, dim_x), or a list of such arrays
            The new hidden states, one array per sequence.
        observations : array-like, or a list
            Their observations, shaped as the training observations.

        Returns
        -------
        self : KernelBayesFilter
            The extended filter.

        Examples
        --------
        >>> import kbfilter as kb
        >>> system = kb.systems.Rotation()
        >>> kbf = kb.KernelBayesFilter(approximation="local").fit(*system.simulate(300, rng=0))
        >>> kbf.partial_fit(*system.simulate(200, rng=1)).n_train_
        500
        """
        if not hasattr(self, "model_"):
            return self.fit(states, observations)
        model = self.model_
        if not isinstance(model, LocalFilterModel):
            raise ValueError("partial_fit: extends a filter fitted with approximation='local' (or 'auto' above "
                             f"{AUTO_LOCAL_T} training states); fit the others again on all the data")
        settings = self._settings()
        xs, zs, obs_shape = check_sequences(states, observations)
        pred = stacked_predecessors(xs)
        n_neighbors = self._neighbours(True, len(model.predecessors) + len(pred))
        if tuple(obs_shape) != model.space.obs_shape:
            raise ValueError(f"observations: expected observations of shape {model.space.obs_shape} (the training "
                             f"observations'), got {tuple(obs_shape)}")
        X, Z = np.vstack(xs), np.vstack(zs)
        if X.shape[1] != model.states.shape[1]:
            raise ValueError(f"states: expected {model.states.shape[1]} columns (the training states'), got "
                             f"{X.shape[1]}")
        Z = model.space.mapped(Z)
        found = report_outlying_states("KernelBayesFilter", X, np.vstack([model.states, X]))
        self.model_ = model.extended(X, Z, pred, n_neighbors, settings.outlier_quantile, found)
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
    observation_model_ = _learned("observer", "The learned observation model, a "
                                              ":class:`~kbfilter.filters.observation.LearnedObservationModel` "
                                              "(the :class:`~kbfilter.filters.local.LocalFilterModel` itself "
                                              "with ``approximation='local'``).")
    projection_operator_ = _learned("projection_operator", "The projection ``K``: ``mu = K w_pred`` (None with "
                                                           "``approximation='local'``).")
    fit_diagnostics_ = _learned("fit_diagnostics", "Fallbacks taken while fitting (a Counter).")

    @property
    def obs_shape_(self):
        """Shape of one training observation."""
        return self.model_.observer.space.obs_shape

    @property
    def dim_u_(self):
        """Dimension of the controls the filter was fitted with; None when fitted without."""
        check_is_fitted(self, "model_")
        return self.model_.dim_u

    def _control_dimension(self):
        model = getattr(self, "model_", None)
        return None if model is None else (model.dim_u or 0)

    @property
    def features_(self):
        """The fitted observation feature map, or None."""
        return self.model_.observer.space.features

    @property
    def rule_(self):
        """The fitted :class:`~kbfilter.KernelBayesRule` (the observation model's; None with
        ``approximation='local'``, which solves the rule on the belief's support each step)."""
        observation = self.model_.observation
        return None if observation is None else observation.rule

    @property
    def transition_(self):
        """The fitted transition's :class:`~kbfilter.ConditionalEmbedding` (None for a filter fitted
        with controls)."""
        return getattr(self.model_.transition, "embedding", None)

    @property
    def transition_operator_(self):
        """The transition ``A``: ``w_pred = A w`` (None for a filter fitted with controls; the
        transpose of the local model's ``successors`` with ``approximation="local"``)."""
        model = self.model_
        if model.transition is None:
            return model.successors.transposed()
        return getattr(model.transition, "operator", None)

    @property
    def successors_(self):
        """Indices of the successors of :attr:`predecessors_` among the stacked training states
        (None with ``approximation='local'``)."""
        predecessors = self.model_.predecessors
        return None if predecessors is None else predecessors + 1

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
        prior : KernelMean, array-like of shape (n, dim_x) or (dim_x,), or None, default=None
            A kernel mean on the state space (its weights, which must have a positive sum, are
            read as a probability's) or samples of the initial state (one state, of shape
            (dim_x,), is one sample). The exact and
            low-rank filters project it onto the training states,
            ``w = (G_x + T eps I)^{-1} G_{x,u} gamma``; with ``approximation="local"``, whose
            belief is a weighted sample of training states, each sample's weight goes to its
            nearest training state (in the state kernel's coordinates; samples outside the training
            states' bounding box are counted as ``"prior_outside_training"`` and warned about).
            ``None`` gives equal weights. With a scalar state a 1-D array is samples, even one that
            looks like weights (``n_train_`` non-negative values summing to 1), which is warned about.
        weights : array-like of shape (n,), scipy sparse array of shape (1, n), or None, default=None
            Weights over the ``n = n_train_`` training states summing to 1 (a belief kept from an earlier
            step, e.g. by a tracker that holds many tracks, as :attr:`weights` or
            :attr:`sparse_weights` gave it), used as they are; not together with ``prior``. A
            sparse array is read through its stored entries only, so with
            ``approximation="local"`` setting it costs what the belief holds, not ``n``.

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
            weights = _checked_weights(weights, T)
        elif prior is not None:
            prior = self._checked_prior(prior)
        self._events = Counter()
        self._unobserved()
        model = self.model_
        if weights is not None:
            values, support = (model.on_states(*weights) if isinstance(weights, tuple)
                               else model.on_support(weights.copy()))
        elif prior is None:
            values, support = model.on_support(np.full(T, 1.0 / T))
        else:
            values, support = self._projected(prior)
        self._belief = self._prior = _Belief(values, support)
        self.dropped_mass = 0.0
        self._set_estimate("prior", *model.estimates(values, values, support))
        self._set_estimate("post", self.x_prior, self.P_prior)
        return self

    def with_belief(self, prior=None, weights=None):
        """A copy of this fitted filter with the belief :meth:`reset` sets, sharing the fitted model.

        This filter keeps its own belief, and the copy costs what the new belief holds: this
        filter's belief is not copied (``copy.deepcopy`` would copy all ``n`` weights of a uniform
        belief). A tracker holds one belief per track and makes a filter for each of its steps.

        Parameters
        ----------
        prior, weights
            As :meth:`reset` takes them.

        Returns
        -------
        KernelBayesFilter
            The copy.

        Examples
        --------
        >>> import kbfilter as kb
        >>> kbf = kb.KernelBayesFilter(approximation="local").fit(*kb.systems.Rotation().simulate(300, rng=0))
        >>> track = kbf.with_belief(prior=[[1.0, 0.0]])  # the training state nearest (1, 0)
        >>> track.x_prior.round(2), kbf.x_prior.round(2)
        (array([0.94, 0.02]), array([0.03, 0.01]))
        """
        check_is_fitted(self, "model_")
        memo = {id(part): None for part in (self._belief, self._prior, self._measured) if part is not None}
        return copy.deepcopy(self, memo).reset(prior=prior, weights=weights)

    def _checked_prior(self, prior):
        """A user's prior as ``(points, weights)`` (see :meth:`reset`), checked before any work."""
        if isinstance(prior, tuple) and len(prior) == 2:
            # the belief has no random numbers of its own to draw from a Gaussian with
            raise ValueError("prior: expected samples of the initial state, an (n, dim_x) array, or a KernelMean; "
                             "for a Gaussian (mean, cov), pass samples of it, e.g. "
                             "np.random.default_rng(0).multivariate_normal(mean, cov, size=500)")
        dim_x = self.states_.shape[1]
        if not isinstance(prior, KernelMean):
            if dim_x > 1 and ndim_or_none(prior) == 1 and len(prior) == self.n_train_ != dim_x:
                # the shape of the weights this filter reports, passed where samples go
                raise ValueError(f"prior: expected samples of the state, an (n, {dim_x}) array, or one state of "
                                 f"length {dim_x}; got {self.n_train_} values, one a training state: weights over "
                                 f"the training states (as filter.weights gives them) go in reset(weights=...)")
            points = check_state_samples(prior, "prior", dim_x)
            if (dim_x == 1 and np.ndim(prior) == 1 and len(points) == self.n_train_ > 1 and points.min() >= 0
                    and abs(points.sum() - 1.0) <= 1e-6):
                # with a scalar state, weights and samples have one shape: the values decide, and a
                # reading that may be wrong is said
                warn_user(f"prior: {self.n_train_} non-negative values summing to 1, one a training state, read as "
                          f"samples of the state; weights over the training states (as filter.weights gives them) "
                          f"go in reset(weights=...)", UserWarning)
            return points, np.full(points.shape[0], 1.0 / points.shape[0])
        if prior.points.shape[1] != dim_x:
            raise ValueError(f"prior: expected a kernel mean on {dim_x}-dimensional states, "
                             f"got one on {prior.points.shape[1]}")
        return prior.points, probability_weights(prior.weights, "prior.weights")

    def _projected(self, prior):
        """A prior's ``(points, weights)`` as the model holds a belief (see :meth:`reset`)."""
        model, T = self.model_, self.n_train_
        if model.observation is None:
            far = model.box.count_outside(prior[0])
            if far:
                self._record("prior_outside_training", f"{far} of the prior's {len(prior[0])} samples lay outside the "
                             f"training states' bounding box; each went to its nearest training state, as far as "
                             f"the belief can go")
            values, support = model.sample_on_states(*prior)
            p = self._normalised(values, fallback=None)
            return model.on_support(np.full(T, 1.0 / T)) if p is None else (p, support)
        w = self.rule_.prior_projection(KernelMean(*prior, kernel=self.rule_.kernel_x_)) / T
        return model.on_support(self._normalised(w, fallback=np.full(T, 1.0 / T)))

    def _checked(self, w, raw, support):
        # the point estimate and covariance, counting an estimate that left the training states
        x, P = self.model_.estimates(w, raw, support)
        if self.model_.box.outside(x):
            self._record("outside_training", _OWN_FALLBACKS["outside_training"])
        return x, P

    def _normalised(self, w, fallback):
        p, rule = normalise_weights(w)
        if rule is not None:
            self._record(rule, _OWN_FALLBACKS[rule])
        return fallback if p is None else p

    def _normalised_on(self, values, support, fallback):
        """``(values, support)`` normalised, or ``fallback``'s pair when they cannot be."""
        p = self._normalised(values, fallback=None)
        return fallback.pair if p is None else (p, support)

    weights = _BeliefWeights("_belief", "The current weights over the training states (see the class's attributes).")

    @property
    def sparse_weights(self):
        """The current weights over the training states as a scipy sparse array of shape
        ``(1, n)`` holding the states the belief is on: with ``approximation="local"`` at most
        ``support`` of them, read without writing out all ``n`` weights (what a tracker keeps for
        each track; :meth:`reset` takes it back)."""
        values, support = self._belief.pair
        if support is None:
            support = np.arange(values.size)
        return sp.csr_array((values.copy(), support.copy(), np.array([0, support.size])), shape=(1, self.n_train_))

    weights_prior = _PriorWeights(
        "_prior", "The predicted weights over the training states (see the class's attributes). Assigned, they are "
        "checked (finite, one a training state, not all zero) and the next update starts from them as given, "
        "signed or not; ``x_prior`` and ``P_prior`` stay the prediction's.")

    # -- filterpy surface -----------------------------------------------------------------------------
    @limited_blas
    def predict(self, u=None):
        """Kernel sum rule through the learned transition (algorithms §6).

        Parameters
        ----------
        u : array-like of shape (dim_u,), float or None, default=None
            The control, for a filter fitted with controls (required then, refused otherwise); a
            number for a one-dimensional control.
        """
        check_is_fitted(self, "model_")
        model = self.model_
        values, support, self.dropped_mass = model.predicted(*self._belief.pair, u)
        values, support = self._normalised_on(values, support, fallback=self._belief)
        # the prediction becomes the current belief (as filterpy's x does), so predictions chain
        self._belief = self._prior = _Belief(values, support)
        self._set_estimate("prior", *self._checked(values, values, support))

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
        prior = self._prior.pair
        row = self._admitted(z, model.observer,
                             seen=lambda mapped: self._observed(model.observer, prior[0], mapped, prior[1]))
        if row is None:
            self._belief = self._prior
            self._keep_prediction()
            return
        raw, support, info, self.dropped_mass = model.posterior(*prior, row)
        self._record_all(info)
        values, kept = self._normalised_on(raw, support, fallback=self._prior)
        self._belief = _Belief(values, kept)
        # a collapsed update keeps the prediction; its point still sees the update's raw weights
        # where they sit on the same states (always, on the dense path: both supports are None)
        if kept is not support:
            raw = values
        self._set_estimate("post", *self._checked(values, raw, kept))

    def _after_load(self):
        super()._after_load()
        self._checked_settings()  # what a loaded filter is refitted with (tune_filter clones it)
        if saved_before_fit(self, "model_"):
            return
        # a saved file is untrusted: its belief must fit its model, and one step must run, so that a
        # file that would fail at first use (a tampered value deep in the model) fails here instead
        n, d = self.model_.states.shape
        self.n_features_in_ = d  # derived, as fit sets it
        for name in ("weights", "weights_prior"):
            _held_weights(check_vector(getattr(self, name, None), name, length=n), name)
        check_loaded_estimates(self, d)
        # (a file saved before the local model had no draws to record)
        self.dropped_mass = check_positive(getattr(self, "dropped_mass", 0.0), "dropped_mass", allow_zero=True)
        if self.dropped_mass > 1:
            raise ValueError(f"dropped_mass: expected a share in [0, 1], got {self.dropped_mass!r}")
        # the belief the next step starts from: the weights on their support
        weights, weights_prior = self.weights, self.weights_prior
        self._belief = _Belief(*self.model_.on_support(weights))
        self._prior = _Belief(*self.model_.on_support(weights_prior))
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one prediction and one update with the first training observation (see probe_loaded)
        filt.reset()
        model = filt.model_
        dim_u = model.dim_u
        filt.predict(None if dim_u is None else np.zeros(dim_u))
        raw = model.posterior(*filt._prior.pair, model.training_observations[:1])[0]
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
        space = self.model_.observer.space
        expected = (f"zs: expected one observation of shape {space.obs_shape} or several (no None: a missing "
                    f"observation has no density)")
        # a list with None (or none at all) would otherwise be read as one observation of the wrong length
        if zs is None or (isinstance(zs, (list, tuple)) and (not zs or any(z is None for z in zs))):
            raise ValueError(expected)
        ndim = ndim_or_none(zs)
        if ndim is None:
            raise ValueError(expected)
        single = ndim == len(space.obs_shape) or (len(space.obs_shape) == 1 and ndim == 0)
        rows = np.vstack([space.map(z) for z in ([zs] if single else as_steps(zs))])
        out = self.model_.observer.density.log_predictive(self.weights_prior, rows)
        return float(out[0]) if single else out

    # -- beyond filtering ---------------------------------------------------------------------------
    @limited_blas
    def smooth(self, zs, us=None):
        """Fixed-interval smoothing: the belief at every step of a run given the whole run.

        Runs the filter over ``zs`` from its current belief (as :meth:`batch_filter` does, and
        leaving it where ``batch_filter`` would), then the backward pass of
        :func:`~kbfilter.filters.smoothing.kernel_smoother` on its weights: the belief over the
        training states at each step, reweighted by how well each training state explains the
        observations that follow (see :ref:`smoothing`). With ``approximation="local"`` the
        backward pass is :func:`~kbfilter.filters.smoothing.local_backward_pass`, on the states
        each step's prediction and posterior covered. A step costs about what a filtering step
        costs.

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
        zs, us = self._checked_run(zs, us)
        model = self.model_
        if not isinstance(model, LocalFilterModel):
            # the filter's weights, then the smoother's log densities and smoothed weights: refused
            # now rather than after the forward pass
            check_smoothing_memory(len(zs), len(model.states), 3)
            weights = np.empty((len(zs), len(model.states)))
            for t, _ in enumerate(self._run(zs, us)):
                weights[t] = self.weights
            means, covs, _ = kernel_smoother(self, weights, zs, us)
            return means, covs
        # each step's message lives where that step's prediction went, and on the states the
        # prior's neighbours brought into its update (everywhere when the support holds every
        # state, as the exact filter's does)
        everywhere = np.arange(model.n) if model.n <= model.support else None
        beliefs, domains = [], []
        for _ in self._run(zs, us):
            beliefs.append(self._belief.pair)
            domains.append(np.union1d(self._prior.pair[1], self._belief.pair[1]) if everywhere is None else everywhere)
        rows = [None if z is None else model.space.admit(z) for z in zs]
        smoothed, events = local_backward_pass(model.successors.matrix, model.density, beliefs, domains, rows)
        for kind, count in events.items():
            warn_user(f"smooth: {kind} at {count} of {len(zs)} steps (see kbfilter.filters.smoothing)",
                      NumericalWarning)
        estimates = [model.estimates(g, g, support) for g, support in smoothed]
        return np.array([x for x, _ in estimates]), np.array([P for _, P in estimates])
