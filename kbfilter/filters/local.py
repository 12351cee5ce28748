"""The kernel Bayes filter on a bounded support: a step that costs what the belief touches.

The exact filter's belief is a weight vector over all ``T`` training states, and each step walks
all of them. With the localized (kNN) transition a state's successors are ``n_neighbors``
training states, so a belief on ``s`` states predicts onto at most ``s * n_neighbors`` of them.
:class:`LocalFilterModel` keeps the posterior on at most ``support`` states:

1. **Predict** through the sparse transition, only through the columns of the belief's support
   (a belief on more than ``support`` states, a prediction that was not updated or the uniform
   start, is first drawn as below, untilted).
2. **Draw** (in the update, when the prediction covers more than ``support`` states): systematic
   resampling of ``support`` states, with probabilities tilted towards the observation (the
   prediction times the observation kernel at ``z``, plus a share of the prediction alone);
   each drawn state carries its importance weight, so the draws are an unbiased stand-in for the
   prediction. Every state worth at least one draw is drawn; the prediction's mass on the states
   that were not is reported (``dropped_mass``).
3. **Update** with kernel Bayes' rule on the drawn states. Drawn states are a weighted sample of
   training states from the prediction, so their prior weights are ``D_i = T x`` their
   importance weights: the sample carries the prior itself, and no density ratio needs
   estimating. A prediction small enough to keep is a kernel mean on its support ``N``, projected
   as the exact filter projects it: ``mu_N = T (G_NN + T eta I)^{-1} G_NN w_N``, with ``N`` every
   training state when ``support >= T`` (the exact filter's step, to round-off). With
   ``prior_neighbors`` each drawn (or kept) state brings that many of its nearest training
   states into ``N``, and the drawn states' importance weights are projected onto all of them the
   same way: nearer to the exact filter, which projects onto every training state, and a
   posterior on up to ``(prior_neighbors + 1) * support`` states.

A step costs ``O(support * n_neighbors)`` for the prediction and ``O(support^3)`` for the update
(``O(support^2)`` an iteration where conjugate gradients converge faster than the factor),
whatever ``T``. See :ref:`local-support`.
"""

from collections import Counter
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from sklearn.neighbors import NearestNeighbors

from .._validation import check_choice, check_indices, check_int, check_positive, check_saved_matrix, check_vector
from .._warnings import recorded, reissued
from ..embedding import KernelMean, clipped_weights, weighted_covariance
from ..operators import SparseOperator
from ..persistence import persistent
from ..rules.bayes_rule import posterior_from_projection
from ..rules.conditional import ConditionalEmbedding
from ..rules.conditional_weights import neighbourhood_weights, warn_local_fallbacks
from ..rules.representations import DenseObservations, factor_recorded
from .base import SharedModel, TrainingBox, no_control, transition_events
from .chunked import completed, nearest_predecessors
from .likelihood import ObservationDensity

__all__ = ["LocalFilterModel", "localized_transition", "AUTO_LOCAL_T", "UNTILTED"]

#: ``approximation="auto"``: the exact filter up to this many training states, the local one above
AUTO_LOCAL_T = 5000
#: the draws of an update follow ``|w_i| (t_i + UNTILTED * t_bar)``: mostly the prediction times the
#: observation kernel ``t``, and a share that follows the prediction alone, so that a state the
#: observation kernel misses can still be drawn (its importance weight stays at most
#: ``1 + 1 / UNTILTED`` times the untilted one). Measured on the oscillation system (T = 20,000,
#: tuned bandwidths, 256 draws, 50 neighbours, 3 runs): 0.1 and 0.01 put the MSE 1.3 % and 1.4 % above the
#: Nystrom filter's, 1 (half and half) 2.1 %, and untilted draws 5.2 %.
UNTILTED = 0.1
#: a radial kernel's squared distances on at most this many coordinates are summed directly
#: (``cdist``); on more, through one matrix product. Measured on 1,000 points: 0.65 against 2.7 ms
#: on 2 coordinates, 1.7 against 2.8 on 8, 3.2 against 2.8 on 16 (and 0.05 against 0.6 ms on 256
#: points of 2)
DIRECT_DISTANCE_DIM = 8


class _Gram:
    """A kernel's Gram matrices between subsets of fixed points, chosen once: a radial kernel
    compares the points' coordinates in bandwidths, computed once (no per-call checks or
    dispatch, which would cost more than the arithmetic on a few hundred points); any other
    kernel is called as it is."""

    def __init__(self, kernel, points):
        self.kernel, self.points = kernel, points
        self.radial = callable(getattr(kernel, "in_bandwidths", None))
        if self.radial:
            # centred first: coordinates far from the origin would lose digits to cancellation
            self.centre = points.mean(axis=0)
            self.units = kernel.in_bandwidths(points - self.centre)
            self.direct = self.units.shape[1] <= DIRECT_DISTANCE_DIM

    def of(self, index, rows=None):
        """``k(points[index], points[index])`` or, with ``rows``, ``k(points[index], rows)``."""
        if not self.radial:
            return self.kernel(self.points[index], rows, False)
        A = self.units[index]
        B = A if rows is None else self.kernel.in_bandwidths(rows - self.centre)
        if self.direct:
            # the differences' squares summed in one pass: symmetric to the last bit and exactly 0
            # on the diagonal, as Cholesky wants
            sq = cdist(A, B, "sqeuclidean")
        else:
            a2 = np.einsum("ij,ij->i", A, A)
            b2 = a2 if rows is None else np.einsum("ij,ij->i", B, B)
            # A @ A.T is exactly symmetric (numpy computes it as one triangle), and so is
            # a2_i + a2_j: the Gram matrix is symmetric to the last bit
            sq = A @ B.T
            sq *= -2.0
            sq += a2[:, None] + b2[None, :]
            if rows is None:
                sq.flat[:: sq.shape[0] + 1] = 0.0
        return self.kernel.of_squared_distance(sq, out=sq)


def localized_transition(X, pred, kernel_x, n_neighbors, reg, queries):
    """The localized (kNN) conditional embedding of ``x_{t+1}`` given ``x_t``, read at some states.

    At ``T = 10^6`` this is most of a fit; it shows a progress bar (:mod:`kbfilter.progress`).

    Parameters
    ----------
    X : ndarray of shape (T, dim_x)
        The training states.
    pred : ndarray of int
        The states that have a successor (``X[pred + 1]`` follows ``X[pred]``).
    kernel_x : Kernel
        The fitted radial state kernel.
    n_neighbors : int
        Neighbourhood size (at most ``len(pred)`` is used).
    reg : float
        The embedding's regulariser ``lam'``.
    queries : ndarray of int, shape (q,)
        The states whose transition is wanted.

    Returns
    -------
    successors : ndarray of int, shape (q, m)
        For each query, the successors of its ``m`` nearest predecessors.
    weights : ndarray of shape (q, m)
        The weights the query gives them (a row of ``A^T``).
    reach : ndarray of shape (q,)
        Each query's distance to its ``m``-th neighbour (in the kernel's coordinates).
    diagnostics : collections.Counter
        Fallbacks taken, as ``transition_<kind>``.
    """
    pred = check_indices(pred, "pred", X.shape[0] - 1)  # each has a successor, X[pred + 1]
    queries = check_indices(queries, "queries", X.shape[0])
    embedding = ConditionalEmbedding(method="knn", n_neighbors=min(n_neighbors, len(pred)), kernel_in=kernel_x,
                                     kernel_out=kernel_x, reg=reg).fit(X[pred], X[pred + 1])
    idx, weights, reach = embedding.local_weights(X[queries], return_distance=True)
    return pred[idx] + 1, weights, reach, transition_events(embedding.diagnostics_)


def chunked_transition(X, kernel_x, n_neighbors, reg):
    """:func:`localized_transition` at every state of a log given as a dask array: the nearest
    predecessors are searched chunk against chunk and the local solves run on the workers
    (:mod:`kbfilter.filters.chunked`); the rows are those of the in-memory fit.

    Parameters
    ----------
    X : dask.array.Array of shape (T, dim_x)
        The training states, one sequence (every state but the last is a predecessor), chunked by
        rows and :func:`~kbfilter.filters.chunked.scattered` (the search's chains, a few at a time,
        each read all of them).
    kernel_x : Kernel
        The fitted radial state kernel.
    n_neighbors : int
        Neighbourhood size (at most ``T - 1`` is used).
    reg : float
        The embedding's regulariser ``lam'``.

    Returns
    -------
    successors, weights, reach, diagnostics
        As :func:`localized_transition` returns them, for all T states.
    """
    import dask

    m = min(n_neighbors, X.shape[0] - 1)
    parts = [None] * len(X.chunks[0])
    for i, part in completed([dask.delayed(recorded)(_transition_rows, Q, nearest, kernel_x, reg)
                              for Q, nearest in nearest_predecessors(X, kernel_x, m)], bounded=True):
        parts[i] = part
    reissued(w for _, caught in parts for w in caught)
    successors, weights, reach, found = zip(*(rows for rows, _ in parts))
    diagnostics = sum(found, Counter())
    warn_local_fallbacks(diagnostics, X.shape[0])  # one warning for all the chunks' neighbourhoods
    return (*(np.concatenate(column) for column in (successors, weights, reach)), transition_events(diagnostics))


def _transition_rows(Q, nearest, kernel_x, reg):
    # one chunk's rows of A^T from its neighbourhoods, and the fallbacks they took (run on a worker)
    dist, rows, inputs = nearest
    q, m = rows.shape
    found = Counter()
    weights = neighbourhood_weights(kernel_x, Q, inputs.reshape(q * m, -1), np.arange(q * m).reshape(q, m), reg,
                                    diagnostics=found, warn=False)
    return rows + 1, weights, dist[:, -1], found


def _rows(successors, weights, T):
    """``A^T`` as a sparse operator from its rows (each with the same number of entries)."""
    q, m = successors.shape
    matrix = sp.csr_matrix((weights.ravel(), successors.ravel(), np.arange(0, q * m + 1, m)), shape=(T, T))
    matrix.sort_indices()
    return SparseOperator(matrix)


#: what a local model is made of: its constructor's arguments, what a saved file holds, and what
#: :meth:`LocalFilterModel.with_update` carries over
_FIELDS = ("states", "observations", "kernel_x", "kernel_z", "space", "successors", "rule", "reg_prior", "reg_update",
           "support", "estimate", "fit_diagnostics", "covariance_scale", "predecessors", "reach", "reg_transition",
           "prior_neighbors")


@persistent(*_FIELDS, holds={"kernel_x": "Kernel", "kernel_z": "Kernel", "space": "ObservationSpace",
                                     "successors": "SparseOperator"})
class LocalFilterModel(SharedModel):
    """What :meth:`KernelBayesFilter.fit` learns with ``approximation="local"``: the training
    pairs, their exact kernels, the sparse kNN transition, and the bound on the belief's support.

    Read-only once built and shared by copies of a filter. Nothing in it is indexed by pairs of
    training states except the transition, which holds ``n_neighbors`` entries a column.

    Parameters
    ----------
    states : ndarray of shape (T, dim_x)
        The training states.
    observations : ndarray of shape (T, n_features)
        Their observations, in the space the observation kernel sees.
    kernel_x, kernel_z : Kernel
        The fitted (exact) state and observation kernels.
    space : ObservationSpace
        The feature map and the outlier gate.
    successors : SparseOperator
        ``A^T`` for the transition ``A`` over the training states (``w_pred = A w``, from the
        localized CKME): row ``j`` holds the weights state ``j`` gives its successors, so a
        prediction reads one row per state of the belief.
    rule : {"iw", "original"}
        The update.
    reg_prior, reg_update : float
        ``eta`` and ``lam`` (iw), ``eps`` and ``delta`` (original).
    support : int
        The most training states the belief keeps.
    estimate : {"mean", "raw_mean", "mode"}
        The point estimate.
    fit_diagnostics : collections.Counter
        Fallbacks taken while fitting.
    covariance_scale : float
        Multiplies every covariance the model reports.
    predecessors : ndarray of int
        The training states that have a successor in their sequence.
    reach : ndarray of shape (T,)
        Each state's distance to the farthest of its transition's neighbours (what
        :meth:`extended` compares new states with).
    reg_transition : float
        The transition's regulariser ``lam'``.
    prior_neighbors : int, default=0
        How many of its nearest training states each state of an update brings into it (0: none);
        the prior is projected onto all of them (:meth:`ratio`).
    """

    def __init__(self, states, observations, kernel_x, kernel_z, space, successors, rule, reg_prior, reg_update,
                 support, estimate, fit_diagnostics, covariance_scale, predecessors, reach, reg_transition,
                 prior_neighbors=0):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        states = check_saved_matrix(states, "states")
        observations = check_saved_matrix(observations, "observations")
        T = states.shape[0]
        if observations.shape[0] != T:
            raise ValueError(f"observations: expected one per training state ({T}), got {observations.shape[0]}")
        if not all(callable(getattr(space, name, None)) for name in ("map", "admits", "check_width")):
            raise ValueError(f"space: expected an ObservationSpace, got {type(space).__name__}")
        space.check_width(observations.shape[1], "the training observations'")
        if not (isinstance(successors, SparseOperator) and successors.shape == (T, T)
                and successors.matrix.nnz % T == 0 and np.all(np.diff(successors.matrix.indptr) == successors.matrix.nnz // T)):
            raise ValueError(f"successors: expected a sparse operator over the {T} training states, with the same "
                             f"number of successors in every row")
        predecessors = check_indices(predecessors, "predecessors", T - 1, increasing=True)
        if not predecessors.size:
            raise ValueError("predecessors: expected at least one training state with a successor")
        reach = check_vector(reach, "reach", length=T)
        if np.any(reach < 0):
            raise ValueError(f"reach: expected {T} non-negative distances")
        self.states, self.observations = states, observations
        self.kernel_x, self.kernel_z, self.space, self.successors = kernel_x, kernel_z, space, successors
        self.rule = check_choice(rule, "rule", ("iw", "original"))
        self.reg_prior = check_positive(reg_prior, "reg_prior")
        self.reg_update = check_positive(reg_update, "reg_update")
        self.support = check_int(support, "support")
        self.estimate = check_choice(estimate, "estimate", ("mean", "raw_mean", "mode"))
        self.fit_diagnostics = fit_diagnostics
        self.covariance_scale = check_positive(covariance_scale, "covariance_scale")
        self.predecessors, self.reach = predecessors, reach
        self.reg_transition = check_positive(reg_transition, "reg_transition")
        self.prior_neighbors = check_int(prior_neighbors, "prior_neighbors", minimum=0)
        #: the training states' widened bounding box (an estimate outside it is counted)
        self.box = TrainingBox(states)

    @classmethod
    def learned(cls, X, Z, pred, kernels, space, n_neighbors, reg_transition, data_found=None, transition=None,
                **settings):
        """Learn the model from the stacked training states and mapped observations.

        Parameters
        ----------
        X : ndarray of shape (T, dim_x)
            The training states.
        Z : ndarray of shape (T, n_features)
            Their observations, in the space the observation kernel sees.
        pred : ndarray of int
            The states that have a successor in their sequence.
        kernels : (Kernel, Kernel)
            The fitted state and observation kernels.
        space : ObservationSpace
            The feature map and the gate.
        n_neighbors : int
            The transition's neighbourhood size.
        reg_transition : float
            The transition's regulariser.
        data_found : collections.Counter, optional
            What the caller's checks of the data found, kept in ``fit_diagnostics``.
        transition : tuple, optional
            The transition at every state, computed already (:func:`chunked_transition`).
        **settings
            ``rule``, ``reg_prior``, ``reg_update``, ``support``, ``estimate``, ``covariance_scale``.

        Returns
        -------
        LocalFilterModel
            The model.
        """
        T = X.shape[0]
        successors, weights, reach, diagnostics = transition or localized_transition(
            X, pred, kernels[0], n_neighbors, reg_transition, np.arange(T))
        return cls(states=X, observations=Z, kernel_x=kernels[0], kernel_z=kernels[1], space=space,
                   successors=_rows(successors, weights, T), fit_diagnostics=diagnostics + (data_found or Counter()),
                   predecessors=pred,
                   reach=reach, reg_transition=reg_transition, **settings)

    def extended(self, X, Z, pred, n_neighbors, outlier_quantile, data_found=None):
        """This model with more training sequences appended: the kernels stay as fitted, and the
        transition is learned again only at the states whose neighbourhood the new states enter.

        A state keeps its row of the transition when no new predecessor is nearer than its
        farthest neighbour (``reach``): its neighbourhood, and so its local solve, is unchanged.
        The new states and the states they come near are solved anew, so the result equals
        :meth:`learned` on all the sequences with the same kernels (to round-off).

        Parameters
        ----------
        X : ndarray of shape (n, dim_x)
            The new training states, stacked.
        Z : ndarray of shape (n, n_features)
            Their observations, mapped.
        pred : ndarray of int
            Among the new states, those with a successor in their sequence.
        n_neighbors : int
            The transition's neighbourhood size (every row is learned again if it differs from
            the one this model was learned with).
        outlier_quantile : float or None
            The outlier gate's quantile, refitted on all the observations (None: no gate).
        data_found : collections.Counter, optional
            What the caller's checks of the new data found, added to ``fit_diagnostics``.

        Returns
        -------
        LocalFilterModel
            A new model over all ``T + n`` states.
        """
        T0, T = self.n, self.n + X.shape[0]
        X_all, Z_all = np.vstack([self.states, X]), np.vstack([self.observations, Z])
        pred_all = np.concatenate([self.predecessors, pred + T0])
        width = self.successors.matrix.nnz // T0
        n_neighbors = min(n_neighbors, len(pred_all))
        queries = np.arange(T)
        if n_neighbors == width and len(pred):
            # an old state's neighbourhood changes only if a new predecessor comes within its reach
            coordinates = self.kernel_x.coordinates
            nearest = NearestNeighbors(n_neighbors=1).fit(coordinates(X[pred])).kneighbors(coordinates(self.states))
            queries = np.concatenate([np.flatnonzero(nearest[0][:, 0] <= self.reach), np.arange(T0, T)])
        rows = np.empty((T, n_neighbors), dtype=self.successors.matrix.indices.dtype)
        weights = np.empty((T, n_neighbors))
        reach = np.empty(T)
        if n_neighbors == width:
            rows[:T0] = self.successors.matrix.indices.reshape(T0, width)
            weights[:T0] = self.successors.matrix.data.reshape(T0, width)
            reach[:T0] = self.reach
        found = localized_transition(X_all, pred_all, self.kernel_x, n_neighbors, self.reg_transition, queries)
        rows[queries], weights[queries], reach[queries] = found[:3]
        return LocalFilterModel(
            states=X_all, observations=Z_all, kernel_x=self.kernel_x, kernel_z=self.kernel_z,
            space=self.space.gated(Z_all, outlier_quantile),
            successors=_rows(rows, weights, T), rule=self.rule, reg_prior=self.reg_prior, reg_update=self.reg_update,
            support=self.support, estimate=self.estimate,
            fit_diagnostics=self.fit_diagnostics + found[3] + (data_found or Counter()),
            covariance_scale=self.covariance_scale, predecessors=pred_all, reach=reach,
            reg_transition=self.reg_transition, prior_neighbors=self.prior_neighbors)

    #: the settings only a step reads: a model with others is this one's data, kernels and transition
    UPDATE_SETTINGS = ("reg_update", "support", "estimate", "covariance_scale", "prior_neighbors")

    def with_update(self, **settings):
        """This model with other settings of the step, sharing everything learned at fit.

        The training pairs, the kernels and the transition do not depend on them, so the result
        equals :meth:`learned` with the new settings.

        Parameters
        ----------
        **settings
            Any of :data:`UPDATE_SETTINGS`.

        Returns
        -------
        LocalFilterModel
            A new model; this one is not changed.
        """
        unknown = sorted(set(settings) - set(self.UPDATE_SETTINGS))
        if unknown:
            raise ValueError(f"{unknown[0]}: not a setting of the step; expected one of {list(self.UPDATE_SETTINGS)}")
        model = LocalFilterModel(**{**{name: getattr(self, name) for name in _FIELDS}, **settings})
        # what the step caches from the training pairs and kernels holds for the new model too
        for name in ("_state_gram", "_observation_gram", "density", "_state_index"):
            if name in self.__dict__:
                model.__dict__[name] = self.__dict__[name]
        return model

    @property
    def n(self):
        """The number of training states, ``T``."""
        return self.states.shape[0]

    @cached_property
    def _state_gram(self):
        return _Gram(self.kernel_x, self.states)

    @cached_property
    def _observation_gram(self):
        return _Gram(self.kernel_z, self.observations)

    @cached_property
    def _state_index(self):
        # built when a prior is first placed (a tracker starting tracks) or on the first update
        # that brings in neighbours, not at fit: most runs never need it
        return NearestNeighbors(n_neighbors=1).fit(self.kernel_x.coordinates(self.states))

    def _nearest_states(self, points, k=1):
        """The ``k`` training states nearest each point, nearest first, in the state kernel's
        coordinates (where the index holds the training states)."""
        return self._state_index.kneighbors(self.kernel_x.coordinates(points), n_neighbors=k, return_distance=False)

    @cached_property
    def density(self):
        """The observation density behind the observation kernel (see
        :class:`~kbfilter.filters.likelihood.ObservationDensity`)."""
        return ObservationDensity.of(self.observations, self.kernel_z)

    #: no global rule or projection: the update is solved on the support
    observation = projection_operator = kept = transition = None
    #: no control input
    dim_u = None

    @property
    def observer(self):
        """What maps, gates and scores observations (``space`` and ``density``): the model itself."""
        return self

    @property
    def training_observations(self):
        """The training observations, in the space the observation kernel sees."""
        return self.observations

    def on_support(self, w):
        """Weights over every training state as this model holds a belief: their nonzero entries.

        Parameters
        ----------
        w : ndarray of shape (T,)
            The weights.

        Returns
        -------
        values : ndarray of shape (s,)
            The nonzero weights.
        support : ndarray of int, shape (s,)
            Their training states.
        """
        support = np.flatnonzero(w)
        return w[support], support

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
        values, support : ndarray
            The same: this model keeps a belief on its support.
        """
        return values, support

    def sample_on_states(self, points, weights):
        """A weighted sample of states as a belief: each point moved to its nearest training state.

        The local belief is a weighted sample of training states (the update reads its weights as
        the prior's own), so a prior given by samples keeps their weights on the training states
        nearest them, in the state kernel's coordinates: ``O(n log T)`` through a neighbour index
        over the training states, built on first use and shared by copies of the filter.

        Parameters
        ----------
        points : ndarray of shape (n, dim_x)
            The samples.
        weights : ndarray of shape (n,)
            Their weights.

        Returns
        -------
        values : ndarray of shape (s,)
            The summed weights of the samples each training state received (the nonzero ones).
        support : ndarray of int, shape (s,)
            Those training states.
        """
        nearest = self._nearest_states(points)[:, 0]
        support, inverse = np.unique(nearest, return_inverse=True)
        values = np.bincount(inverse, weights=weights, minlength=support.size)
        kept = values != 0
        return values[kept], support[kept]

    def dense(self, values, support):
        """A belief as weights over every training state.

        Parameters
        ----------
        values : ndarray of shape (s,)
            The weights on ``support``.
        support : ndarray of int, shape (s,)
            Their training states.

        Returns
        -------
        ndarray of shape (T,)
            The weights, zero off the support.
        """
        # np.zeros maps zeroed pages lazily: only the pages the support touches are written
        w = np.zeros(self.n)
        w[support] = values
        return w

    # -- a step -----------------------------------------------------------------------------------
    def predicted(self, values, support, u=None):
        """``A w`` through the columns of the belief's support only (a belief on more than
        ``support`` states, a prediction not yet updated, is drawn first).

        Parameters
        ----------
        values : ndarray of shape (s,)
            The belief's weights on ``support``, summing to 1.
        support : ndarray of int, shape (s,)
            Their training states.
        u : None
            A control is refused: the local model has no controlled transition.

        Returns
        -------
        values, support : ndarray
            The predicted weights (not normalised) on the states they reach, sorted.
        dropped_mass : float
            The share of the mass the draw left out (0 without a draw).
        """
        no_control(u)
        dropped = 0.0
        if support.size > self.support:
            values, support, dropped = self.drawn(values, support, np.ones(support.size))
        A = self.successors.matrix  # CSR of A^T: the columns of A
        starts, ends = A.indptr[support], A.indptr[support + 1]
        counts = ends - starts
        # the positions of every entry of the chosen columns, in one gather
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        reached, where = np.unique(A.indices[offsets], return_inverse=True)
        predicted = np.bincount(where, A.data[offsets] * np.repeat(values, counts), minlength=reached.size)
        return predicted, reached, dropped

    def drawn(self, values, support, tilt):
        """``self.support`` draws from a belief, by systematic resampling, as importance weights.

        The states are drawn with probability ``q_i`` proportional to
        ``|w_i| (t_i + UNTILTED * t_bar)`` (``t_bar``: the mean of the tilt ``t`` under ``|w|``);
        a state drawn ``c_i`` times gets the weight ``w_i c_i / (support q_i)``, whose expectation
        is ``w_i``. Systematic resampling draws every state with ``q_i >= 1 / support``.

        Parameters
        ----------
        values : ndarray of shape (s,)
            Weights summing to 1.
        support : ndarray of int, shape (s,)
            Their training states.
        tilt : ndarray of shape (s,)
            Non-negative: where the draws should concentrate (the observation kernel at the
            observation in an update; ones in a prediction). A tilt that is zero on the whole
            belief is ignored: the states are then drawn by ``|w_i|`` alone.

        Returns
        -------
        values, support : ndarray
            The drawn states and their weights.
        dropped_mass : float
            The share of the absolute mass on the states not drawn.
        """
        m = self.support
        mass = np.abs(values)
        total = mass.sum()
        q = mass * (tilt + UNTILTED * (mass @ tilt) / total)
        norm = q.sum()
        if not norm > 0:
            # the tilt vanishes on the whole belief (an observation far from every training
            # observation): it says nothing about where to draw, so the draw follows the mass alone
            q, norm = mass, total
        q = q / norm
        picks = np.minimum(np.searchsorted(np.cumsum(q), (np.arange(m) + 0.5) / m), values.size - 1)
        # the picks are sorted: each run of equal picks is one state drawn that many times
        starts = np.flatnonzero(np.diff(picks, prepend=-1))
        kept, counts = picks[starts], np.diff(starts, append=m)
        dropped = float((total - mass[kept].sum()) / total)
        return values[kept] * counts / (m * q[kept]), support[kept], dropped

    def ratio(self, values, support, row, info):
        """The prior's weight at the states the update solves on.

        A belief on more than ``support`` states is drawn, tilted to the observation, and its
        importance weights times ``T`` are the weights; otherwise the projection
        ``T (G_NN + T eta I)^{-1} G_NN w_N`` on ``N``: every training state when the model keeps
        them all (``T <= support``: the exact filter's projection), the belief's support otherwise.
        With ``prior_neighbors`` (and fewer states kept than ``T``), ``N`` is the drawn states, or
        the belief's support, and each one's ``prior_neighbors`` nearest training states, and the
        prior, zero on the states brought in, is projected onto all of them the same way.

        Parameters
        ----------
        values : ndarray of shape (s,)
            The predicted weights, summing to 1.
        support : ndarray of int, shape (s,)
            Their training states.
        row : ndarray of shape (1, d)
            The observation, mapped (the draws' tilt).
        info : dict
            Gets the fallbacks the projection takes.

        Returns
        -------
        mu : ndarray
            The weights.
        support : ndarray of int
            Their training states.
        dropped_mass : float
            The share of the mass the draw left out (0 without a draw).
        """
        T = self.n
        dropped = 0.0
        if support.size > self.support:
            values, support, dropped = self.drawn(values, support, self._observation_gram.of(support, row)[:, 0])
            if not self.prior_neighbors:
                return T * values, support, dropped
        if T <= self.support:
            values, support = self.dense(values, support), np.arange(T)
        elif self.prior_neighbors:
            values, support = self._with_neighbours(values, support)
        G = self._state_gram.of(support)
        factor = factor_recorded(G.copy(), T * self.reg_prior, "G_x + T reg_prior I (on the support)", info)
        return T * factor.solve(G @ values), support, dropped

    def _with_neighbours(self, values, support):
        """The weights on ``support`` and each state's ``prior_neighbors`` nearest training states
        (zero on the states brought in), sorted by state."""
        k = min(self.prior_neighbors + 1, self.n)  # a state is its own nearest
        reached = np.union1d(support, self._nearest_states(self.states[support], k))
        padded = np.zeros(reached.size)
        padded[np.searchsorted(reached, support)] = values
        return padded, reached

    def posterior(self, values, support, row):
        """Kernel Bayes' rule on at most ``support`` states (``(prior_neighbors + 1) * support``
        with the prior's neighbours).

        Parameters
        ----------
        values, support : ndarray
            The predicted belief (weights summing to 1, and their training states).
        row : ndarray of shape (1, d)
            The observation, mapped (see :meth:`ObservationSpace.admit`).

        Returns
        -------
        values, support : ndarray
            The posterior's weights (not normalised) on the states it keeps.
        info : dict
            The fallbacks taken.
        dropped_mass : float
            The share of the prediction's mass the draw left out.
        """
        info = {}
        mu, support, dropped = self.ratio(values, support, row, info)
        if self.rule == "iw" and np.any(mu > 0):
            # states with no prior weight get none in the iw update: leave them out of the solve
            keep = mu > 0
            mu, support = mu[keep], support[keep]
        gram = self._observation_gram
        side = DenseObservations(self.kernel_z, self.observations[support], gram.of(support), iterative=True)
        W, more = posterior_from_projection(side, self.rule, mu, gram.of(support, row), self.n, self.reg_update)
        info.update(more)
        return W[:, 0], support, info, dropped

    # -- what a belief reports --------------------------------------------------------------------
    def estimates(self, w, raw, support):
        """The point estimate and the covariance of a belief on a support.

        Parameters
        ----------
        w : ndarray of shape (s,)
            Normalised weights.
        raw : ndarray of shape (s,)
            The update's weights (for ``estimate="raw_mean"``).
        support : ndarray of int, shape (s,)
            Their training states.

        Returns
        -------
        x : ndarray of shape (dim_x,)
            The point estimate.
        P : ndarray of shape (dim_x, dim_x)
            The weighted covariance of the support's states under the clipped positive part of
            ``w``, times ``covariance_scale``.
        """
        states = self.states[support]
        if self.estimate == "mean":
            x = w @ states
        elif self.estimate == "raw_mean":
            x = raw @ states
        else:
            x = KernelMean(states, w, self.kernel_x).mode()
        return x, self.covariance_scale * weighted_covariance(states, clipped_weights(w))
