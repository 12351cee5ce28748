"""Learned transitions of a controlled system: the belief over the training states moved by a control.

The transition is the conditional embedding of ``x_{t+1}`` given ``(x_t, u_{t+1})`` under the
product kernel ``k_x(x, x') k_u(u, u')`` (algorithms §3, §6). A belief ``w`` over the ``T``
training states and a control ``u`` give the predicted weights on the successors of the ``n``
logged transitions,

    beta = (G + n lam' I)^{-1} (k_u(U, u) * (K w)),

with ``G = G_x * G_u`` the product Gram matrix of the logged ``(x_t, u_{t+1})`` pairs and
``K = k_x(predecessors, all states)``. :class:`ControlledTransition` holds ``K`` and factors ``G``
densely (O(n T) memory); :class:`LowRankControlledTransition` replaces the product kernel by its
Nystrom approximation on landmark pairs, so that nothing indexed by two training states is stored
(O((n + T) r) memory and a step, for long logs).
"""

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import check_indices, check_int, check_saved_matrix, check_step_control
from ..linalg import check_order, pivoted_cholesky, ridge_factor
from ..persistence import persistent
from .base import transition_events

__all__ = ["ControlledTransition", "LowRankControlledTransition"]


class _SuccessorTransition:
    """What both controlled transitions share: weights on the logged successors, placed among the
    ``n_states`` training states."""

    @property
    def fit_diagnostics(self):
        """The fallback the factorisation needed at fit, named ``transition_<kind>`` (empty if none)."""
        event = self.factor.event
        return transition_events({} if event is None else {event: 1})

    @property
    def short_kernels(self):
        """The product kernel, when its Nystrom factorisation stopped at the landmark cap before its
        tolerance (see :func:`~kbfilter.filters.observation.report_rank_cap`)."""
        return [] if getattr(self, "converged", True) else ["transition (state x control)"]

    def apply(self, w, u):
        """The predicted weights over the training states.

        Parameters
        ----------
        w : ndarray of shape (T,)
            The current weights.
        u : array-like of shape (dim_u,)
            The control (required; checked here).

        Returns
        -------
        ndarray of shape (T,)
            ``A(u) w``; states with no predecessor get 0.
        """
        out = np.zeros(self.n_states)
        out[self.successors] = self._successor_weights(w, self._control(u))
        return out

    def adjoint(self, v, u):
        """``A(u)^T v``: values at the next step's states carried back to this step's (the
        conditional expectation the smoother's backward pass takes).

        Parameters
        ----------
        v : ndarray of shape (T,)
            Values at the training states, one step ahead.
        u : array-like of shape (dim_u,)
            The control of that step (required; checked here).

        Returns
        -------
        ndarray of shape (T,)
            ``sum_j A(u)[j, i] v[j]`` for each training state ``i``.
        """
        return self._successor_adjoint(np.asarray(v, dtype=np.float64)[self.successors], self._control(u))

    def _control(self, u):
        if u is None:
            raise ValueError(f"u: this filter was fitted with controls; expected a control of shape ({self.dim_u},)")
        return check_step_control(u, self.dim_u)


def _checked_successors(successors, per_pair, n_states):
    """The successors' indices, one a logged pair (a row of ``per_pair``), distinct and among the
    ``n_states`` training states: a saved file is untrusted, and a negative or repeated index would
    put predicted weight on the wrong state without an error."""
    pairs = np.shape(per_pair)[0] if np.ndim(per_pair) else None
    return check_indices(successors, "successors", n_states, length=pairs, distinct=True)


@persistent("cross_gram", "controls", "kernel_u", "factor", "successors", "n_states",
            holds={"kernel_u": "Kernel", "factor": "SPDFactor"})
class ControlledTransition(_SuccessorTransition):
    """The learned transition of a controlled system, ``w_pred = A(u) w`` over the training states.

    The conditional embedding of ``x_{t+1}`` given ``(x_t, u_{t+1})`` with the product kernel
    ``k_x(x, x') k_u(u, u')`` (algorithms §3, §6). For a belief ``w`` and the control ``u``, the
    predicted weights on the successors are ``beta = (G + n lam' I)^{-1} (k_u(U, u) * (K w))`` with
    ``G = G_x(predecessors) * G_u`` (elementwise) and ``K = k_x(predecessors, all states)``, both
    built once by :meth:`build`: a step costs one ``n x T`` product and one triangular solve pair,
    as without controls.

    Parameters
    ----------
    cross_gram : ndarray of shape (n, T)
        ``k_x`` between the predecessors and every training state.
    controls : ndarray of shape (n, dim_u)
        The control that followed each predecessor.
    kernel_u : Kernel
        The fitted control kernel.
    factor : SPDFactor
        The factor of ``G + n lam' I``.
    successors : ndarray of int, shape (n,)
        The index of each predecessor's successor.
    n_states : int
        ``T``.
    """

    def __init__(self, cross_gram, controls, kernel_u, factor, successors, n_states):
        self.cross_gram = cross_gram
        self.controls = controls
        self.kernel_u = kernel_u
        self.factor = factor
        self.n_states = check_int(n_states, "n_states")
        if np.shape(cross_gram)[1:] != (self.n_states,):
            raise ValueError(f"cross_gram: expected a column per training state ({self.n_states}), got shape "
                             f"{np.shape(cross_gram)}")
        self.successors = _checked_successors(successors, cross_gram, self.n_states)

    @classmethod
    def build(cls, X, predecessors, U, kernel_x, kernel_u, reg):
        """Fit the transition from the training states and controls.

        Parameters
        ----------
        X : ndarray of shape (T, dim_x)
            The training states.
        predecessors : ndarray of int
            The states that have a successor.
        U : ndarray of shape (T, dim_u)
            ``U[t]`` moved the system to ``X[t]``.
        kernel_x, kernel_u : Kernel
            Fitted kernels on states and controls.
        reg : float
            ``lam'``.

        Returns
        -------
        ControlledTransition
            The transition; its ``factor.event`` names a fallback the factorisation needed.
        """
        Xp, Up = X[predecessors], U[predecessors + 1]
        n = len(predecessors)
        G = kernel_x(Xp) * kernel_u(Up)
        return cls(kernel_x(Xp, X), Up, kernel_u, ridge_factor(G, n * reg, "transition Gram G_x * G_u + n lam' I"),
                   predecessors + 1, X.shape[0])

    def _after_load(self):
        # a saved file is untrusted, and a transition may be loaded on its own: every array a step
        # reads must be finite and of the size the others give it
        n = len(self.successors)
        check_saved_matrix(self.cross_gram, "cross_gram", allow_1d=False)
        if len(check_saved_matrix(self.controls, "controls", allow_1d=False)) != n:
            raise ValueError(f"controls: expected one control a logged pair ({n}), got {len(self.controls)}")
        check_order(self.factor, n, "factor", "one row per logged pair")

    @property
    def dim_u(self):
        """The length of a control."""
        return self.controls.shape[1]

    def _successor_weights(self, w, u):
        return self.factor.solve(self.kernel_u(self.controls, u[None, :])[:, 0] * (self.cross_gram @ w))

    def _successor_adjoint(self, v, u):
        # G + n lam' I is symmetric, so its solve is its own transpose
        return self.cross_gram.T @ (self.kernel_u(self.controls, u[None, :])[:, 0] * self.factor.solve(v))


@persistent("state_cross", "landmark_controls", "kernel_u", "landmark_factor", "features", "factor", "successors",
            "n_states", "converged", holds={"kernel_u": "Kernel", "factor": "SPDFactor"})
class LowRankControlledTransition(_SuccessorTransition):
    """The controlled transition of :class:`ControlledTransition` on a Nystrom product kernel.

    The logged pairs ``(x_t, u_{t+1})`` are factored by pivoted Cholesky of the product kernel,
    ``G ~ L L^T`` with ``L`` of shape (n, r); the ``r`` pivots are the landmark pairs
    ``(x_l, u_l)`` and ``R`` (the pivots' rows of ``L``) their lower triangular factor. A belief
    ``w`` and a control ``u`` have the mean feature
    ``psi = R^{-1} ((w^T k_x(X, x_L)) * k_u(u_L, u))``, and the predicted successor weights are, in
    the push-through form, ``beta = L (L^T L + n lam' I)^{-1} psi``. With every pair a landmark this
    is :class:`ControlledTransition` exactly. Memory and a step are O((n + T) r); no array indexed
    by two training states is formed.

    Parameters
    ----------
    state_cross : ndarray of shape (T, r)
        ``k_x`` between every training state and the landmark states.
    landmark_controls : ndarray of shape (r, dim_u)
        The landmarks' controls.
    kernel_u : Kernel
        The fitted control kernel.
    landmark_factor : ndarray of shape (r, r)
        ``R``, lower triangular.
    features : ndarray of shape (n, r)
        ``L``: the logged pairs' Nystrom features.
    factor : SPDFactor
        The factor of ``L^T L + n lam' I``.
    successors : ndarray of int, shape (n,)
        The index of each predecessor's successor.
    n_states : int
        ``T``.
    converged : bool
        False when the rank cap stopped the factorisation before its trace tolerance.
    """

    def __init__(self, state_cross, landmark_controls, kernel_u, landmark_factor, features, factor, successors,
                 n_states, converged=True):
        self.state_cross = state_cross
        self.landmark_controls = landmark_controls
        self.kernel_u = kernel_u
        self.landmark_factor = landmark_factor
        self.features = features
        self.factor = factor
        self.n_states = check_int(n_states, "n_states")
        if np.ndim(state_cross) != 2 or np.shape(state_cross)[0] != self.n_states:
            raise ValueError(f"state_cross: expected a row per training state ({self.n_states}), got shape "
                             f"{np.shape(state_cross)}")
        self.successors = _checked_successors(successors, features, self.n_states)
        self.converged = bool(converged)

    @classmethod
    def build(cls, X, predecessors, U, kernel_x, kernel_u, reg, max_rank, trace_rtol):
        """Fit the transition from the training states and controls.

        Parameters
        ----------
        X : ndarray of shape (T, dim_x)
            The training states.
        predecessors : ndarray of int
            The states that have a successor.
        U : ndarray of shape (T, dim_u)
            ``U[t]`` moved the system to ``X[t]``.
        kernel_x, kernel_u : Kernel
            Fitted kernels on states and controls.
        reg : float
            ``lam'``.
        max_rank : int
            The most landmark pairs.
        trace_rtol : float
            Stop adding landmarks once the neglected trace ``tr(G - L L^T)`` is at most
            ``trace_rtol * tr(G)`` (0: only ``max_rank`` stops it).

        Returns
        -------
        LowRankControlledTransition
            The transition; ``converged`` says whether the tolerance was reached, ``factor.event``
            names a fallback the factorisation of ``L^T L + n lam' I`` needed.
        """
        Xp, Up = X[predecessors], U[predecessors + 1]
        n = len(predecessors)
        diag = kernel_x.diag(Xp) * kernel_u.diag(Up)
        trace = float(diag.sum())

        def column(i):
            return kernel_x(Xp, Xp[i : i + 1])[:, 0] * kernel_u(Up, Up[i : i + 1])[:, 0]

        L, pivots = pivoted_cholesky(diag, column, max_rank, trace_tol=trace_rtol * trace, name="rank")
        if L.shape[1] == 0:
            raise ValueError("controls: the product kernel's Gram matrix is 0 on the logged transitions")
        residual = max(trace - float(np.einsum("ij,ij->", L, L)), 0.0)
        converged = residual <= trace_rtol * trace or L.shape[1] < min(max_rank, n)
        return cls(kernel_x(X, Xp[pivots]), Up[pivots], kernel_u, np.tril(L[pivots]), np.ascontiguousarray(L),
                   ridge_factor(L.T @ L, n * reg, "transition features L^T L + n lam' I"), predecessors + 1,
                   X.shape[0], converged)

    @property
    def dim_u(self):
        """The length of a control."""
        return self.landmark_controls.shape[1]

    def _after_load(self):
        # as ControlledTransition's; the landmark factor also goes to a triangular solve unchecked
        r = check_saved_matrix(self.features, "features", allow_1d=False).shape[1]
        check_saved_matrix(self.state_cross, "state_cross", allow_1d=False, n_features=r)
        check_saved_matrix(self.landmark_controls, "landmark_controls", allow_1d=False)
        R = check_saved_matrix(self.landmark_factor, "landmark_factor", allow_1d=False, n_features=r)
        if len(self.landmark_controls) != r or R.shape != (r, r) or np.any(np.triu(R, 1)) or not np.all(np.diag(R) > 0):
            raise ValueError(f"landmark_factor, landmark_controls: expected the {r} x {r} lower-triangular factor of "
                             f"the {r} landmark pairs, with a positive diagonal, and their {r} controls")
        check_order(self.factor, r, "factor", "one row per landmark pair")

    @property
    def rank(self):
        """The number of landmark pairs."""
        return self.landmark_factor.shape[0]

    def _successor_weights(self, w, u):
        s = (w @ self.state_cross) * self.kernel_u(self.landmark_controls, u[None, :])[:, 0]
        psi = solve_triangular(self.landmark_factor, s, lower=True, check_finite=False)
        return self.features @ self.factor.solve(psi)

    def _successor_adjoint(self, v, u):
        # the transpose of each factor of _successor_weights, in reverse order (L^T L + n lam' I is symmetric)
        psi = solve_triangular(self.landmark_factor, self.factor.solve(self.features.T @ v), lower=True, trans="T",
                               check_finite=False)
        return self.state_cross @ (psi * self.kernel_u(self.landmark_controls, u[None, :])[:, 0])
