"""The kernel Bayes filter on a bounded support: a step that costs what the belief touches.

The exact filter's belief is a weight vector over all ``T`` training states, and each step walks
all of them. With the localized (kNN) transition a state's successors are ``n_neighbors``
training states, so a belief on ``s`` states predicts onto at most ``s * n_neighbors`` of them.
:class:`LocalFilterModel` keeps the posterior on at most ``support`` states:

1. **Predict** through the sparse transition, only through the columns of the belief's support.
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
   training state when ``support >= T`` (the exact filter's step, to round-off).

A step costs ``O(support * n_neighbors)`` for the prediction and ``O(support^3)`` for the update,
whatever ``T``. See :ref:`local-support`.
"""

from functools import cached_property

import numpy as np

from .._validation import check_choice, check_int, check_matrix, check_positive
from ..embedding import KernelMean, clipped_weights, weighted_covariance
from ..operators import SparseOperator
from ..persistence import persistent
from ..rules.bayes_rule import posterior_from_projection
from ..rules.representations import DenseObservations, factor_recorded
from .base import SharedModel, TrainingBox
from .likelihood import ObservationDensity

__all__ = ["LocalFilterModel", "AUTO_LOCAL_T", "UNTILTED"]

#: ``approximation="auto"``: the exact filter up to this many training states, the local one above
AUTO_LOCAL_T = 5000
#: the draws of an update follow ``|w_i| (t_i + UNTILTED * t_bar)``: mostly the prediction times the
#: observation kernel ``t``, and a share that follows the prediction alone, so that a state the
#: observation kernel misses can still be drawn (its importance weight stays at most
#: ``1 + 1 / UNTILTED`` times the untilted one). Measured on the oscillation system (T = 20,000,
#: tuned bandwidths, 256 draws, 3 runs): 0.1 and 0.01 put the MSE 1.3 % and 1.4 % above the
#: Nystrom filter's, 1 (half and half) 2.1 %, and untilted draws 5.2 %.
UNTILTED = 0.1


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

    def of(self, index, rows=None):
        """``k(points[index], points[index])`` or, with ``rows``, ``k(points[index], rows)``."""
        if not self.radial:
            return self.kernel(self.points[index], rows, False)
        A = self.units[index]
        a2 = np.einsum("ij,ij->i", A, A)
        if rows is None:
            # A @ A.T is exactly symmetric (numpy computes it as one triangle), and so is
            # a2_i + a2_j: the Gram matrix is symmetric to the last bit, as Cholesky wants
            sq = A @ A.T
            b2 = a2
        else:
            B = self.kernel.in_bandwidths(rows - self.centre)
            sq = A @ B.T
            b2 = np.einsum("ij,ij->i", B, B)
        sq *= -2.0
        sq += a2[:, None] + b2[None, :]
        if rows is None:
            sq.flat[:: sq.shape[0] + 1] = 0.0
        return self.kernel.of_squared_distance(sq, out=sq)


@persistent("states", "observations", "kernel_x", "kernel_z", "space", "successors", "rule", "reg_prior",
            "reg_update", "support", "estimate", "fit_diagnostics", "covariance_scale")
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
    covariance_scale : float, default=1.0
        Multiplies every covariance the model reports.
    """

    def __init__(self, states, observations, kernel_x, kernel_z, space, successors, rule, reg_prior, reg_update,
                 support, estimate, fit_diagnostics, covariance_scale=1.0):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        for name, value in (("states", states), ("observations", observations)):
            if not (isinstance(value, np.ndarray) and value.dtype == np.float64):
                raise ValueError(f"{name}: expected a float64 array")
        states = check_matrix(states, "states")
        observations = check_matrix(observations, "observations")
        T = states.shape[0]
        if observations.shape[0] != T:
            raise ValueError(f"observations: expected one per training state ({T}), got {observations.shape[0]}")
        if not all(callable(getattr(space, name, None)) for name in ("map", "admits")):
            raise ValueError(f"space: expected an ObservationSpace, got {type(space).__name__}")
        if not (isinstance(successors, SparseOperator) and successors.shape == (T, T)):
            raise ValueError(f"successors: expected a sparse operator over the {T} training states")
        self.states, self.observations = states, observations
        self.kernel_x, self.kernel_z, self.space, self.successors = kernel_x, kernel_z, space, successors
        self.rule = check_choice(rule, "rule", ("iw", "original"))
        self.reg_prior = check_positive(reg_prior, "reg_prior")
        self.reg_update = check_positive(reg_update, "reg_update")
        self.support = check_int(support, "support")
        self.estimate = check_choice(estimate, "estimate", ("mean", "raw_mean", "mode"))
        self.fit_diagnostics = fit_diagnostics
        self.covariance_scale = check_positive(covariance_scale, "covariance_scale")
        self._box = TrainingBox(states)

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
    def density(self):
        """The observation density behind the observation kernel (see
        :class:`~kbfilter.filters.likelihood.ObservationDensity`)."""
        return ObservationDensity.of(self.observations, self.kernel_z)

    #: the fixed-interval smoother needs the whole transition; not on this model
    smoothable = False
    #: no global rule or projection: the update is solved on the support
    observation = projection_operator = kept = predecessors = transition = None
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
        if u is not None:
            raise ValueError("u: this filter was fitted without controls; expected None")
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
            observation in an update; ones in a prediction).

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
        q /= q.sum()
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
        if support.size > self.support:
            values, support, dropped = self.drawn(values, support, self._observation_gram.of(support, row)[:, 0])
            return T * values, support, dropped
        if T <= self.support:
            values, support = self.dense(values, support), np.arange(T)
        G = self._state_gram.of(support)
        M = G.copy()
        M.flat[:: M.shape[0] + 1] += T * self.reg_prior
        return T * factor_recorded(M, "G_x + T reg_prior I (on the support)", info).solve(G @ values), support, 0.0

    def posterior(self, values, support, row):
        """Kernel Bayes' rule on at most ``support`` states.

        Parameters
        ----------
        values, support : ndarray
            The predicted belief (weights summing to 1, and their training states).
        row : ndarray of shape (1, d)
            The observation, mapped (see :meth:`admit`).

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
        side = DenseObservations(self.kernel_z, self.observations[support], gram.of(support))
        W, more = posterior_from_projection(side, self.rule, mu, gram.of(support, row), self.n, self.reg_update)
        info.update(more)
        return W[:, 0], support, info, dropped

    def admit(self, z):
        """The observation mapped into the observation kernel's space, unless the gate sets it aside.

        Parameters
        ----------
        z : array-like
            The observation, flat or in the training observations' shape.

        Returns
        -------
        ndarray of shape (1, d) or None
            The mapped observation, or None when the gate sets it aside.
        """
        row = self.space.map(z)
        return row if self.space.admits(row) else None

    def outside(self, x):
        """Whether an estimate left the training states' widened bounding box (see
        :class:`~kbfilter.filters.base.TrainingBox`).

        Parameters
        ----------
        x : ndarray of shape (dim_x,)
            The estimate.

        Returns
        -------
        bool
            True when some coordinate is outside.
        """
        return self._box.outside(x)

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
