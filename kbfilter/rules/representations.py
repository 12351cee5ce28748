"""How kernel Bayes' rule holds its Gram matrices: the strategies it chooses once, at fit.

On the states, the prior is projected through ``(G_x + n eta I)^{-1}``: :class:`DenseStates` factors
that ``n x n`` matrix, :class:`FeatureStates` works through explicit features ``F``
(``G_x = F F^T``) with Woodbury and forms nothing ``n x n``.

On the observations, the update solves with ``G_z``: :class:`DenseObservations` on the full Gram
matrix, :class:`LowRankObservations` through a pivoted Cholesky factor ``G_z ~ L L^T`` (Woodbury,
while its error bound allows), :class:`FeatureObservations` through explicit features
``G_z = Phi Phi^T`` (the push-through form).

A rule picks one of each at fit (:meth:`~kbfilter.KernelBayesRule.fit`) and calls it; the methods
do not test what the rule holds.
"""


import numpy as np
from scipy.linalg import LinAlgWarning, lu_factor, lu_solve
from scipy.sparse.linalg import LinearOperator

from .._validation import check_feature_rows
from .._warnings import ignored
from ..linalg import Woodbury, ridge_factor, ridge_solve_iterative
from ..operators import DenseOperator, LowRankOperator
from ._checks import prior_sample

__all__ = ["DenseStates", "FeatureStates", "DenseObservations", "LowRankObservations", "FeatureObservations",
           "TransformedFeatures", "original_update", "factor_recorded", "LOW_RANK_RTOL"]

#: relative error allowed to the low-rank form of the iw update (an exact speed-up to this accuracy)
LOW_RANK_RTOL = 1e-9
#: an iterative iw update (``DenseObservations(iterative=True)``) may spend ``n / FACTOR_MATVECS``
#: products with its ``n x n`` matrix before the Cholesky factor takes over: about what the factor
#: costs (measured with the library's defaults: a factor of order 233, 488 and 1,000 took as long
#: as 24, 45 and 80 products) ...
FACTOR_MATVECS = 12
#: ... on matrices of this order or more: on smaller ones the iterations' fixed costs exceed the
#: factor's (measured on the oscillation system's observations at 0.1 x median, ridges 0.1 and 0.01:
#: 0.23 against 0.08 ms at order 150, 0.44 against 0.53 at 400, 1.4 against 6.5 at 1,000)
ITERATIVE_MIN_ORDER = 384


def factor_recorded(A, ridge, name, info):
    """The factor of ``A + ridge I`` (:func:`~kbfilter.linalg.ridge_factor`; ``A`` is overwritten)
    whose fallback (jitter, LU) is recorded in ``info``. Every ``A`` here is built symmetric (a
    Gram matrix, ``F^T F`` or ``D G D``), so it is not averaged with its transpose: in a dense
    update that pass cost about a fifth of the step."""
    factor = ridge_factor(A, ridge, name, warn=False, symmetrize=False)
    if factor.event is not None:
        info[factor.event] = factor.describe(name)
    return factor


# -- the states: the prior's projection --------------------------------------------------------------
class DenseStates:
    """``(G_x + n eta I)`` factored densely (``factor``, an SPD factor)."""

    def __init__(self, kernel, states, factor):
        self.kernel, self.states, self.factor, self.n = kernel, states, factor, states.shape[0]

    def prior_values(self, prior):
        if prior is None:
            return self.kernel(self.states).mean(axis=1)
        points, weights = prior_sample(prior, self.states.shape[1])
        return self.kernel(self.states, points) @ weights

    def projection(self, g):
        return self.n * self.factor.solve(g)

    def prior_projection(self, prior):
        return self.projection(self.prior_values(prior))

    def feature_projection(self, gamma):
        raise ValueError("gamma: feature_projection needs a state kernel with explicit features "
                         f"(e.g. NystromKernel), got {type(self.kernel).__name__}")

    def projection_operator(self):
        return DenseOperator(self.projection(self.kernel(self.states)))


class FeatureStates(DenseStates):
    """``G_x = F F^T`` through the features ``F`` (``factor``, a :class:`~kbfilter.linalg.Woodbury`)."""

    def _coefficients(self, prior):
        """``gamma`` with prior values ``g = F gamma``."""
        if prior is None:
            return self.factor.L.mean(axis=0)
        points, weights = prior_sample(prior, self.states.shape[1])
        return self.kernel.features(points).T @ weights

    def prior_values(self, prior):
        return self.factor.L @ self._coefficients(prior)

    def prior_projection(self, prior):
        return self.feature_projection(self._coefficients(prior))

    def feature_projection(self, gamma):
        gamma = np.asarray(gamma, dtype=np.float64)
        if gamma.shape != (self.factor.L.shape[1],):
            raise ValueError(f"gamma: expected shape ({self.factor.L.shape[1]},), got {gamma.shape}")
        return self.n * (self.factor.L @ self.factor.inner.solve(gamma))

    def projection_operator(self):
        F = self.factor.L
        return LowRankOperator(F, self.n * self.factor.inner.solve(F.T).T)


# -- the observations: the update -----------------------------------------------------------------------
def _scaled_inner(F, sq, nlam, name, info):
    """``Ls = sqrt(D) F`` (``F`` a fresh copy, scaled in place) and the factor of ``Ls^T Ls + n lam I``."""
    F *= sq
    return F, factor_recorded(F.T @ F, nlam, name, info)


def _dense_iw(G_S, obs_S, sq, nlam, info, fresh=False, iterative=False):
    """The iw weights through ``sqrt(D) G_S sqrt(D) + n lam I``; ``G_S`` is scaled in place when it is
    ``fresh`` (built for this call), else copied. ``iterative``: one observation is solved by
    conjugate gradients when they converge within what the factor would cost."""
    rhs = sq * obs_S
    if iterative and rhs.shape[1] == 1 and rhs.shape[0] >= ITERATIVE_MIN_ORDER:
        # D^(1/2) G D^(1/2) as an operator: the scaled matrix is only formed if the factor takes over
        n, root = sq.shape[0], sq[:, 0]
        scaled = LinearOperator((n, n), matvec=lambda v: root * (G_S @ (root * v)), dtype=np.float64)
        y = ridge_solve_iterative(scaled, nlam, rhs[:, 0], n // FACTOR_MATVECS)
        if y is not None:
            return sq * y[:, None]
    if fresh:
        G_S *= sq
        M = G_S
    else:
        M = sq * G_S
    M *= sq.T
    return sq * factor_recorded(M, nlam, "sqrt(D) G_z sqrt(D) + n lam I", info).solve(rhs)


def _dense_original(mu, G_z, K, delta):
    LG = mu[:, None] * G_z
    A = LG @ LG
    A[np.diag_indices(A.shape[0])] += delta
    return LG @ lu_solve(lu_factor(A, check_finite=False), mu[:, None] * K, check_finite=False)


def _low_rank_original(mu, L, K, delta):
    # G_z = L L^T: (Lambda G_z)^2 = P C L^T with P = Lambda L, C = L^T P (r x r); Woodbury
    P = mu[:, None] * L
    C = L.T @ P
    PC = P @ C
    y = mu[:, None] * K
    inner = C @ C
    inner[np.diag_indices(inner.shape[0])] += delta
    v = (y - PC @ lu_solve(lu_factor(inner, check_finite=False), L.T @ y, check_finite=False)) / delta
    return P @ (L.T @ v)


class DenseObservations:
    """The full observation Gram matrix ``G_z``; observation vectors are ``k_z(Z_train, z)``.

    ``factor`` (``L``, with ``residual = tr(G_z - L L^T)`` and ``norm = ||L L^T||_2``) is None here;
    :class:`LowRankObservations` sets it. ``iterative``: the iw update of one observation solves by
    conjugate gradients when they converge within what a factor would cost (a strong ridge; the
    bounded-support filter's update), else by the factor, to the same answer up to round-off.
    """

    name = "dense"
    factor, residual, norm = None, np.inf, np.inf

    def __init__(self, kernel, observations, gram, iterative=False):
        self.kernel, self.observations, self.gram, self.iterative = kernel, observations, gram, iterative

    @property
    def vector_length(self):
        """The length of an observation vector: one entry per training observation."""
        return self.observations.shape[0]

    def vectors(self, Z, check_input):
        return self.kernel(self.observations, Z, check_input)

    def iw(self, r, S, sq, nlam, obs, info):
        """The iw weights on the support ``S`` of the ratio ``r`` (``sq = sqrt(r[S])``)."""
        if S.size == self.gram.shape[0]:
            return _dense_iw(self.gram, obs, sq, nlam, info, iterative=self.iterative)
        # rows, then columns: about a quarter faster than one open-mesh (np.ix_) gather of the same entries
        return _dense_iw(self.gram[S][:, S], obs[S], sq, nlam, info, fresh=True, iterative=self.iterative)

    def original(self, mu, obs, delta):
        return _dense_original(mu, self.gram, obs, delta)

    def regression(self, K, n, delta, info):
        """The stated fallback, CKME regression ``(G_z + n delta I)^{-1} k``."""
        return factor_recorded(self.gram.copy(), n * delta, "G_z + n delta I", info).solve(K)


class LowRankObservations(DenseObservations):
    """``G_z`` and its pivoted Cholesky factor ``L`` (``G_z = L L^T + E``): Woodbury while
    ``max(r) tr(E) <= LOW_RANK_RTOL n lam`` (iw), always for the original rule."""

    name = "low_rank"

    def __init__(self, kernel, observations, gram, factor, residual, norm=np.inf):
        super().__init__(kernel, observations, gram)
        self.factor, self.residual, self.norm = factor, residual, norm

    def iw(self, r, S, sq, nlam, obs, info):
        if r.max() * self.residual > LOW_RANK_RTOL * nlam:
            return super().iw(r, S, sq, nlam, obs, info)
        # Woodbury with sqrt(D) G_z sqrt(D) ~ (sqrt(D) L)(sqrt(D) L)^T
        Ls, C = _scaled_inner(self.factor[S], sq, nlam, "L^T D L + n lam I", info)
        rhs = sq * obs[S]
        return sq * (rhs - Ls @ C.solve(Ls.T @ rhs)) / nlam

    def original(self, mu, obs, delta):
        return _low_rank_original(mu, self.factor, obs, delta)


class TransformedFeatures:
    """A fitted transformer's ``transform`` as an observation feature map (it checks its own input)."""

    def __init__(self, transformer):
        self.transformer = transformer

    def __call__(self, Z, check_input=True):
        return check_feature_rows(self.transformer.transform(Z), Z.shape[0])


class FeatureObservations:
    """Explicit observation features ``Phi`` (``G_z = Phi Phi^T``): observation vectors are
    ``phi(z)``, and the iw update takes the push-through form when there are fewer features than
    support. ``features`` maps observations (a fitted transformer, or a kernel's ``features``).

    For the original rule, ``gram`` is ``Phi Phi^T`` when the features are too many to factor by
    (``factor`` None), else ``factor`` is ``Phi`` itself. ``transform(Z, check_input)`` gives the
    features of observations: a kernel's ``features``, or :class:`TransformedFeatures`.
    """

    name = "features"
    residual, norm = np.inf, np.inf

    def __init__(self, transform, Phi, gram=None, factor=None):
        self.transform, self.Phi, self.gram, self.factor = transform, Phi, gram, factor
        if factor is not None:
            self.residual, self.norm = 0.0, 0.0

    @property
    def vector_length(self):
        """The length of an observation vector: one entry per feature."""
        return self.Phi.shape[1]

    def vectors(self, Z, check_input):
        return self.transform(Z, check_input).T

    def iw(self, r, S, sq, nlam, obs, info):
        if self.Phi.shape[1] < S.size:
            # push-through form: an r x r solve, cheaper when there are fewer features than support
            Ls, C = _scaled_inner(self.Phi[S], sq, nlam, "Phi^T D Phi + n lam I", info)
            return sq * (Ls @ C.solve(obs))
        return _dense_iw(self.Phi[S] @ self.Phi[S].T, self.Phi[S] @ obs, sq, nlam, info, fresh=True)

    def original(self, mu, obs, delta):
        K = self.Phi @ obs
        if self.factor is not None:
            return _low_rank_original(mu, self.factor, K, delta)
        return _dense_original(mu, self.gram, K, delta)

    def regression(self, obs, n, delta, info):
        K = self.Phi @ obs
        if self.gram is None:
            return Woodbury(self.Phi, n * delta).solve(K)
        return factor_recorded(self.gram.copy(), n * delta, "G_z + n delta I", info).solve(K)


def original_update(observations, mu, obs, n, delta):
    """The original rule's weights ``Lambda G_z ((Lambda G_z)^2 + delta I)^{-1} Lambda k_z(z)``,
    with its stated fallback (CKME regression) when that is singular or zero."""
    with ignored(LinAlgWarning):
        W = observations.original(mu, obs, delta)
    if np.all(np.isfinite(W)) and np.any(W != 0):
        return W, {}
    info = {"regression": "original KBR update is singular or zero; using CKME regression"}
    return observations.regression(obs, n, delta, info), info

