"""Fixed-interval smoothing of a belief over the training states (a forward-backward pass).

The kernel Bayes filter's belief at step ``t`` is a weight vector ``a_t`` over the training states
``x_1..x_n``, given the observations up to ``t``. Treat the training states as the states of a
hidden Markov model: the learned transition moves weights from state ``i`` to state ``j`` with
``A[j, i]``, and the learned observation density (:mod:`kbfilter.filters.likelihood`) gives
``l_t(j) = p(z_t | x_j)``. The smoothed belief given the whole run is then the filter's belief
times a backward message,

    g_t ~ a_t * b_t,      b_t = A^T (l_{t+1} * b_{t+1}),      b_T = 1,

``b_t(i)`` being (up to a constant) the probability of the observations after ``t`` from state
``x_i``: ``A^T v`` is the learned conditional expectation of ``v`` one step ahead, the same kernel
sum rule the prediction applies, transposed. The backward pass costs one transposed transition
and one evaluation of the density a step: the order of a filtering step, on the exact and the
scalable paths alike. With ``approximation="local"`` the messages are held on the states each
step's prediction covered (:func:`local_backward_pass`).

Why this route rather than the Rauch-Tung-Striebel form ``g_t = a_t * A^T (g_{t+1} / A a_t)`` on
the same weights: the learned weights may be negative or near zero where the data are thin, and
the division by the predicted weights then blows up (measured: smoothed errors hundreds of times
the filter's on the rotation benchmark); the backward message divides by nothing. Its rules:

- ``b_t`` is clipped at 0 (the learned transition's signed weights can push it below) and scaled
  to a maximum of 1 (long runs never underflow); with no positive entry it is reset to 1
  (``"smoother_collapsed"``: the step keeps the filter's belief);
- ``a_t * b_t`` keeps its signs, as the filter's weights do, unless the signed terms cancel
  (positive sum below ``CANCELLATION`` times the sum of magnitudes), when its clipped positive
  part is used (``"smoother_clipped"``);
- a step without an observation (missing, or set aside by the outlier gate) has ``l = 1``.
"""

from collections import Counter

import numpy as np

from sklearn.utils.validation import check_is_fitted

from .._validation import check_matrix, check_memory
from .._warnings import warn_user
from ..embedding import clipped_weights, weighted_cross_covariance
from ..linalg import NumericalWarning, psd_solve
from ..threads import limited_blas
from .base import checked_run

__all__ = ["kernel_smoother", "backward_pass", "local_backward_pass", "gaussian_backward_pass",
           "SmoothsParticleMoments", "CANCELLATION"]

#: the smoothed weights keep their signs unless their sum is below this fraction of the sum of their
#: magnitudes (then their clipped positive part is used: a near-zero sum would blow the mean up)
CANCELLATION = 0.1


def check_smoothing_memory(n_steps, n, arrays):
    """Refuse, before any work, a run whose smoothing over all ``n`` training states would not fit
    in memory: the backward pass holds ``arrays`` arrays of ``n_steps x n`` floats at once.

    Parameters
    ----------
    n_steps : int
        The steps of the run.
    n : int
        The training states the weights are over.
    arrays : int
        How many ``n_steps x n`` arrays are held at the peak.
    """
    check_memory(8.0 * arrays * n_steps * n, "zs", f"smoothing {n_steps:,} steps over {n:,} training states",
                 "smooth the run in pieces, or fit with approximation='local' (its smoother holds each step's "
                 "support only)")


def _beliefs(weights, n_steps, n, per):
    """The filter's posterior weights of a run: ``n_steps`` rows over ``n`` training states, each
    summing to 1 as the filter keeps them (rescaled rows would change the backward pass's answer)."""
    weights = check_matrix(weights, "weights", n_features=n, allow_1d=False)
    if weights.shape[0] != n_steps:
        raise ValueError(f"weights: expected one row per {per} ({n_steps}), got {weights.shape[0]}")
    off = np.flatnonzero(np.abs(weights.sum(axis=1) - 1.0) > 1e-6)
    if off.size:
        raise ValueError(f"weights: expected the filter's weights, each row summing to 1; row {off[0]} sums to "
                         f"{weights[off[0]].sum():.6g}")
    return weights


def backward_pass(transition, weights, log_emissions, controls=None):
    """Smoothed weights from the filter's weights, its transition and the observations' log densities.

    Parameters
    ----------
    transition : LearnedTransition, ControlledTransition or LowRankControlledTransition
        The filter's transition (``adjoint(v, u)`` applies ``A(u)^T``).
    weights : ndarray of shape (n_steps, n)
        The filter's posterior weights at each step, each row summing to 1 (to 1e-6).
    log_emissions : ndarray of shape (n, n_steps)
        ``log p(z_t | x_j)`` up to a constant per step (``-inf`` where the density is 0); a column
        of zeros for a step without an observation.
    controls : sequence of array-like, optional
        ``controls[t]`` is the control that moved the system to step ``t`` (as ``batch_filter``
        takes them); needed for a transition learned with controls.

    Returns
    -------
    smoothed : ndarray of shape (n_steps, n)
        The smoothed weights, each summing to 1.
    events : collections.Counter
        How often each rule of the module docstring was needed.
    """
    log_emissions = np.asarray(log_emissions, dtype=np.float64)
    if log_emissions.ndim != 2:
        raise ValueError(f"log_emissions: expected an array of shape (n, n_steps), got shape {log_emissions.shape}")
    n, n_steps = log_emissions.shape
    weights = _beliefs(weights, n_steps, n, "column of log_emissions")
    if np.any(np.isnan(log_emissions) | (log_emissions == np.inf)):
        raise ValueError("log_emissions: expected log densities (finite, or -inf where a density is 0)")
    empty = np.flatnonzero(~np.isfinite(log_emissions).any(axis=0))
    if empty.size:
        raise ValueError(f"log_emissions: column {empty[0]} is -inf at every training state (an observation of "
                         f"density 0 everywhere); expected a finite entry in every column")
    if controls is not None and len(controls) != n_steps:
        raise ValueError(f"controls: expected one control per step ({n_steps}), got {len(controls)}")
    smoothed = np.empty_like(weights)
    smoothed[-1] = weights[-1]
    events = Counter()
    message = np.ones(n)
    for t in range(n_steps - 2, -1, -1):
        column = log_emissions[:, t + 1]
        u = None if controls is None else controls[t + 1]
        message = _scaled(transition.adjoint(np.exp(column - column.max()) * message, u), events)
        smoothed[t] = _product(weights[t], message, events)
    return smoothed, events


def local_backward_pass(transposed, density, beliefs, domains, rows):
    """:func:`backward_pass` for a belief on a bounded support (``approximation="local"``): each
    backward message is held on the training states the filter's prediction covered at its step.

    The smoothed belief at step ``t`` needs the message ``b_t`` only on the states the belief is
    on, and ``b_t`` there needs ``b_{t+1}`` only on their successors, which the prediction of step
    ``t + 1`` covers. So the message of each step is computed on that prediction's support (its
    *domain*); a successor outside the next domain, reached only from a state the filter predicted
    but did not keep, carries no message. A step costs ``O(s k)`` for a domain of ``s`` states
    with ``k`` successors each, the order of a filtering step; with every training state as each
    domain it is :func:`backward_pass` itself.

    Parameters
    ----------
    transposed : scipy.sparse.csr_matrix of shape (T, T)
        ``A^T``, the same number of entries a row: row ``i`` holds ``A[j, i]`` for the successors
        ``j`` of state ``i``, with sorted indices.
    density : ObservationDensity
        The learned observation density over the ``T`` training observations.
    beliefs : list of (ndarray, ndarray of int)
        The filter's normalised posterior at each step: its weights and their training states.
    domains : list of ndarray of int
        Each step's domain, sorted, holding that step's belief's states.
    rows : list of ndarray of shape (1, d) or None
        Each step's observation in the density's space, None without one (missing, or set aside).

    Returns
    -------
    smoothed : list of (ndarray, ndarray of int)
        The smoothed weights (each summing to 1) on the states of each step's belief.
    events : collections.Counter
        How often each rule of the module docstring was needed.
    """
    width = transposed.nnz // transposed.shape[0]
    successors = transposed.indices.reshape(-1, width)
    weights = transposed.data.reshape(-1, width)
    smoothed = [None] * len(beliefs)
    smoothed[-1] = beliefs[-1]
    events = Counter()
    later, message = domains[-1], np.ones(domains[-1].size)
    for t in range(len(beliefs) - 2, -1, -1):
        if rows[t + 1] is not None:
            log = density.restricted(later).log_components(rows[t + 1])[:, 0]
            message = np.exp(log - log.max()) * message
        here = domains[t]
        reached = successors[here]
        at = np.minimum(np.searchsorted(later, reached), later.size - 1)
        carried = np.where(later[at] == reached, message[at], 0.0)
        message = _scaled(np.einsum("ij,ij->i", weights[here], carried), events)
        values, support = beliefs[t]
        smoothed[t] = _product(values, message[np.searchsorted(here, support)], events), support
        later = here
    return smoothed, events


def _scaled(message, events):
    """A backward message clipped at 0 and scaled to a maximum of 1, or all ones when no entry is
    positive (counted as ``"smoother_collapsed"``)."""
    message = np.maximum(message, 0.0)
    top = message.max()
    if top > 0:
        return message / top
    events["smoother_collapsed"] += 1
    return np.ones(message.size)


def _product(w, message, events):
    g = w * message
    if g.sum() > CANCELLATION * np.abs(g).sum():
        return g / g.sum()
    p = clipped_weights(g)
    if p is None:  # no state the filter believes in can produce what follows
        events["smoother_collapsed"] += 1
        return w
    events["smoother_clipped"] += 1
    return p


def kernel_smoother(filt, weights, zs, us=None):
    """Fixed-interval smoothing of a fitted kernel Bayes filter's stored beliefs, in the spirit of
    filterpy's ``rts_smoother``.

    Parameters
    ----------
    filt : KernelBayesFilter
        The fitted filter that produced ``weights``.
    weights : array-like of shape (n_steps, n)
        Its posterior weights (``filt.weights``) after each ``update`` of the run (``n`` is
        ``filt.n_train_``, the training states it keeps), each row summing to 1 as the filter
        keeps them (to 1e-6).
    zs : sequence of array-like or None
        The observations of those steps (None: missing).
    us : sequence of array-like, optional
        The controls, as ``batch_filter`` takes them, for a filter fitted with controls.

    Returns
    -------
    means : ndarray of shape (n_steps, dim_x)
        The smoothed estimates (the filter's point estimate of the smoothed weights).
    covs : ndarray of shape (n_steps, dim_x, dim_x)
        Their covariances.
    smoothed : ndarray of shape (n_steps, n)
        The smoothed weights.

    Warns
    -----
    NumericalWarning
        When a rule of the backward pass (:mod:`kbfilter.filters.smoothing`) was needed, with its
        count.
    """
    model = getattr(filt, "model_", None)
    if not all(hasattr(model, name) for name in ("states", "transition", "observation")):
        # an unfitted filter, or one whose belief is not weights over training states (the particle
        # filters): the backward pass reads the learned transition and observation model
        advice = ("fit it first" if model is None else
                  "its belief is not weights over training states; call its own smooth(zs) if it has one")
        raise ValueError(f"filt: expected a fitted KernelBayesFilter, the one that produced the weights; got "
                         f"{type(filt).__name__} without such a model ({advice})")
    if model.observation is None:
        raise ValueError("filt: kernel_smoother smooths weights over all the training states; a filter with "
                         "approximation='local' keeps its belief on a support: call filt.smooth(zs)")
    zs, us = checked_run(zs, us, filt.obs_shape_, model.dim_u or 0, filt.features_)
    check_smoothing_memory(len(zs), len(model.states), 2)  # the log densities and the smoothed weights
    weights = _beliefs(weights, len(zs), len(model.states), "observation")
    log_emissions = np.zeros((len(model.states), len(zs)))
    for t, z in enumerate(zs):
        row = None if z is None else model.observation.admit(z)
        if row is not None:
            log_emissions[:, t] = model.observation.density.log_components(row)[:, 0]
    smoothed, events = backward_pass(model.transition, weights, log_emissions, us)
    for kind, count in events.items():
        warn_user(f"kernel_smoother: {kind} at {count} of {len(zs)} steps (see kbfilter.filters.smoothing)",
                  NumericalWarning)
    means = np.array([model.point(g, g) for g in smoothed])
    covs = np.array([model.covariance(g) for g in smoothed])
    return means, covs, smoothed


def gaussian_backward_pass(means, covs, means_p, covs_p, cross):
    """The Rauch-Tung-Striebel backward pass on a run's filtered and predicted moments.

    With ``C_t = Cov(x_t, x_{t+1})`` under the filter's belief at ``t`` and its prediction of
    ``t + 1``, the smoother's gain is ``G_t = C_t P_{t+1|t}^{-1}`` and

        m_t^s = m_t + G_t (m_{t+1}^s - m_{t+1|t}),     P_t^s = P_t + G_t (P_{t+1}^s - P_{t+1|t}) G_t^T.

    For a linear model ``x_{t+1} = F x_t + noise``, ``C_t = P_t F^T`` and this is the Kalman
    smoother (Rauch, Tung and Striebel 1965); for a model a filter moves sample by sample (a
    particle filter), ``C_t`` is the weighted covariance of each sample before and after its move,
    and the pass is the Gaussian smoother of those moments.

    Parameters
    ----------
    means, covs : ndarray of shape (T, d), (T, d, d)
        The filtered means and covariances.
    means_p, covs_p : ndarray of shape (T, d), (T, d, d)
        The predicted ones (row ``t`` is the prediction of step ``t``).
    cross : sequence of T - 1 arrays of shape (d, d)
        ``cross[t] = C_t``, the covariance of step ``t``'s state with step ``t + 1``'s.

    Returns
    -------
    means, covs : ndarray of shape (T, d), (T, d, d)
        The smoothed moments.
    singular : list of int
        The steps ``t + 1`` whose predicted covariance was singular, inverted through its
        pseudo-inverse (the caller reports them).
    """
    xs, Ps, singular = means.copy(), covs.copy(), []
    for t in range(len(means) - 2, -1, -1):
        # the gain C P^{-1}, by a solve with the symmetric predicted covariance
        G, pseudo = psd_solve(covs_p[t + 1], cross[t].T)
        G = G.T
        if pseudo:
            singular.append(t + 1)
        xs[t] = means[t] + G @ (xs[t + 1] - means_p[t + 1])
        Ps[t] = covs[t] + G @ (Ps[t + 1] - covs_p[t + 1]) @ G.T
    return xs, Ps, singular


class SmoothsParticleMoments:
    """Mixin for a particle filter whose ``predict`` moves each particle by a draw of the law of
    its next state (a simulator, or learned motion): ``smooth``, the Rauch-Tung-Striebel backward
    pass on the particles' moments (:func:`gaussian_backward_pass`).

    A particle before and after its move is a draw of the pair ``(x_t, x_{t+1})``, so their
    weighted cross-covariance is ``Cov(x_t, x_{t+1})``: no density of the motion is needed. The
    filter's ``predict`` calls :meth:`_moved` with the particles it moved from.
    """

    # smooth() collects each prediction's Cov(x_t, x_{t+1}) here while it runs; None otherwise
    _crosses = None

    def _moved(self, before):
        """Record the move from ``before`` to the current particles, while :meth:`smooth` runs."""
        if self._crosses is not None:
            self._crosses.append(weighted_cross_covariance(before, self.belief.particles, self.belief.weights))

    @limited_blas
    def smooth(self, zs, us=None):
        """Fixed-interval smoothing: the belief at every step of a run given the whole run.

        Runs :meth:`batch_filter` over ``zs`` (the filter is left where it leaves it), then the
        Rauch-Tung-Striebel backward pass on the filtered and predicted means and covariances
        (:func:`~kbfilter.filters.smoothing.gaussian_backward_pass`), with each step's
        ``Cov(x_t, x_{t+1})`` the weighted covariance of every particle before and after its
        move: no linearisation and no density of the motion is needed, and on a linear-Gaussian
        motion, with many particles, it is the Kalman smoother. The smoothed belief is Gaussian
        where the filter's is not (a belief with several modes is smoothed by its first two
        moments). The pass runs across a lost track drawn afresh (the learned-motion filter's
        ``reacquire``): after a dropout that is what bridges it (cutting the run there, under a
        radar, left the dropouts' predictions as they were: 960 m inside them against 539 m on
        the recorded aircraft), and a track that really jumped drags the steps before the jump
        towards it. A predicted covariance that is singular is inverted through its
        pseudo-inverse, counted as ``"pseudo_inverse"``.

        Parameters
        ----------
        zs : iterable of array-like or None, or array-like
            The observations, as :meth:`batch_filter` takes them.
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
        >>> from kbfilter.filters import LearnedMotionFilter
        >>> from kbfilter.systems import ConstantVelocity, PositionFixes
        >>> model = ConstantVelocity(step=1.0, accel=0.5, sensor=PositionFixes(3.0), speed=10.0)
        >>> tracks = [model.simulate(200, rng=s, burn_in=0)[0] for s in range(5)]
        >>> filt = LearnedMotionFilter(model, inputs=(2, 3), n_particles=500, random_state=0)
        >>> filt = filt.fit(tracks, [x[:, :2] for x in tracks])
        >>> states, fixes = model.simulate(100, rng=9, burn_in=0)
        >>> means, covs = filt.reset().smooth(fixes)
        >>> means.shape, covs.shape
        ((100, 4), (100, 4, 4))
        """
        check_is_fitted(self, "model_")
        zs, us = self._checked_run(zs, us)
        self._crosses = []
        try:
            rows = list(self._run(zs, us))
            crosses = self._crosses
        finally:
            del self._crosses  # back to the class's None: predict collects nothing outside smooth
        if not rows:
            raise ValueError("zs: expected at least one observation")
        means, covs, means_p, covs_p = (np.array(col) for col in zip(*rows))
        # the moves into steps 1 .. T - 1 (a first step from the first observation has none)
        xs, Ps, singular = gaussian_backward_pass(means, covs, means_p, covs_p, crosses[len(crosses) - len(rows) + 1:])
        for step in singular:
            self._record("pseudo_inverse", f"smooth: the predicted covariance of step {step} was singular; "
                                           f"conditioned through its pseudo-inverse")
        return xs, 0.5 * (Ps + np.swapaxes(Ps, 1, 2))
