"""Kernel Bayes' rule: original (Fukumizu et al.) and importance-weighted with KuLSIF (Xu et al.).

algorithms §5. The likelihood ``p(z | x)`` is learned from training pairs ``(x_i, z_i)``; the
prior on states is a kernel mean; the posterior is a kernel mean over the training states.
"""

from collections import Counter
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    check_array,
    check_choice,
    check_feature_rows,
    check_matrix,
    check_positive,
    check_same_length,
    check_saved_matrix,
    check_square_memory,
    check_transformer,
    check_vector,
    check_within_magnitude,
    ndim_or_none,
)
from .._warnings import warn_user
from ..embedding import KernelMean
from ..kernels import fitted_kernel
from ..linalg import NumericalWarning, Woodbury, check_order, pivoted_cholesky, ridge_factor
from ..persistence import Persistent, persistent, saved_before_fit, with_saved_layout
from ..threads import limited_blas
from ._checks import prior_sample
from .representations import (LOW_RANK_RTOL, DenseObservations, DenseStates, FeatureObservations, FeatureStates,
                              LowRankObservations, TransformedFeatures, original_update)

__all__ = ["kulsif_weights", "KernelBayesRule", "iw_from_ratio", "posterior_from_projection"]

# Residual diagonal, relative to the largest, below which a pivoted Cholesky factor is at round-off.
_ROUNDOFF_RTOL = 1e-14


@limited_blas
def kulsif_weights(states, prior, kernel=None, reg=0.1):
    """KuLSIF density-ratio weights ``r = max(0, n (G_x + n reg I)^{-1} g)`` (algorithms §5.2).

    ``r_i`` estimates ``pi(x_i) / p(x_i)``: the ratio of the prior's density to the density the
    ``states`` were drawn from, with ``g = G_{x,u} gamma`` the prior embedding at the states.

    Parameters
    ----------
    states : array-like of shape (n, d)
        Draws from ``p``.
    prior : KernelMean
        The prior ``pi`` as a weighted sample (its weights scaled to sum to one; the sum must be
        positive).
    kernel : Kernel, optional
        Gaussian with the median heuristic on ``states`` by default.
    reg : float
        ``eta``.

    Returns
    -------
    ndarray of shape (n,)
        The non-negative weights ``r_i``.

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(0, np.sqrt(2), size=(2000, 1))          # p = N(0, 2)
    >>> prior = kb.KernelMean(rng.normal(0, 1, size=(2000, 1)))  # pi = N(0, 1)
    >>> r = kb.kulsif_weights(x, prior, kb.GaussianKernel(np.sqrt(2)), reg=1e-3)
    >>> i = int(np.argmin(np.abs(x[:, 0])))                      # near 0 the ratio is sqrt 2
    >>> round(float(r[i]), 1)
    1.4
    """
    states = check_matrix(states, "states", min_samples=2)
    points, weights = prior_sample(prior, states.shape[1])
    reg = check_positive(reg, "reg")
    kernel = fitted_kernel(kernel, "kernel", states)
    n = states.shape[0]
    G = kernel(states)
    g = kernel(states, points) @ weights
    return np.maximum(0.0, n * ridge_factor(G, n * reg, "G_x + n reg I").solve(g))


def iw_from_ratio(side, r, obs, n, reg_update):
    """The iw update from density-ratio weights ``r`` on the states an observation side holds.

    Rows with ``r_i = 0`` get ``w_i = 0`` and are left out of the solve; if every ``r_i`` is 0,
    the stated fallback ``r = 1`` (CKME regression) is used and recorded.

    Parameters
    ----------
    side : DenseObservations, LowRankObservations or FeatureObservations
        The observations' representation (see :mod:`kbfilter.rules.representations`).
    r : ndarray of shape (m,)
        Non-negative weights at its states.
    obs : ndarray of shape (m, q) or (r, q)
        Observation vectors, from ``side.vectors``.
    n : int
        The number of training states the regulariser is scaled by (``n lam``).
    reg_update : float
        ``lam``.

    Returns
    -------
    W : ndarray of shape (m, q)
        The weights, one column per observation.
    info : dict
        The fallbacks taken, kind -> sentence.
    """
    info = {}
    if not np.any(r > 0):
        info["uniform_ratio"] = "every KuLSIF weight is 0; using r = 1 (CKME regression)"
        r = np.ones_like(r)
    S = np.flatnonzero(r > 0)
    W = np.zeros((r.shape[0], obs.shape[1]))
    W[S] = side.iw(r, S, np.sqrt(r[S])[:, None], n * reg_update, obs, info)
    return W, info


def posterior_from_projection(side, method, mu, obs, n, reg_update):
    """Kernel Bayes' rule's weights from the projected prior ``mu`` at the states ``side`` holds.

    Parameters
    ----------
    side : DenseObservations, LowRankObservations or FeatureObservations
        The observations' representation.
    method : {"iw", "original"}
        The rule.
    mu : ndarray of shape (m,)
        The projected prior at those states.
    obs : ndarray
        Observation vectors, from ``side.vectors``.
    n : int
        The number of training states the regularisers are scaled by.
    reg_update : float
        ``lam`` (iw) or ``delta`` (original).

    Returns
    -------
    W, info
        As :meth:`KernelBayesRule.weights_from_projection` returns them.
    """
    if method == "iw":
        W, info = iw_from_ratio(side, np.maximum(0.0, mu), obs, n, reg_update)
    else:
        W, info = original_update(side, mu, obs, n, reg_update)
    if np.any(W.sum(axis=0) <= 0):
        info["nonpositive_sum"] = ("posterior weights sum to <= 0; the normalised mean falls back to "
                                   "clipped weights")
    return W, info


@persistent("states_", "observations_", "n_train_", "kernel_x_", "kernel_z_", "features_", "reg_update_",
            "prior_factor_", "Phi_", "G_z_", "solver_", "obs_factor_", "obs_residual_", "obs_norm_", "diagnostics_",
            holds={"kernel_x": "Kernel", "kernel_z": "Kernel", "kernel_x_": "Kernel", "kernel_z_": "Kernel",
                   "features": "TransformerMixin", "features_": "TransformerMixin",
                   "prior_factor_": ("SPDFactor", "Woodbury")})
class KernelBayesRule(Persistent, BaseEstimator):
    """Kernel Bayes' rule with a likelihood learned from pairs ``(x_i, z_i)`` (algorithms §5).

    A fitted rule is never changed by using it: each update returns the fallbacks it took.

    Parameters
    ----------
    method : {"iw", "original"}
        ``"iw"``: importance-weighted KBR with KuLSIF weights (Xu et al. 2022),
        ``w = sqrt(D) (sqrt(D) G_z sqrt(D) + n lam I)^{-1} sqrt(D) k_z(z)`` with
        ``D = diag(max(0, n (G_x + n eta I)^{-1} g))``, solved only on the support of ``D``.
        ``"original"``: Fukumizu et al. (2013),
        ``w = Lambda G_z ((Lambda G_z)^2 + delta I)^{-1} Lambda k_z(z)``,
        ``Lambda = diag(n (G_x + n eps I)^{-1} g)``.
    kernel_x, kernel_z : Kernel, optional
        Kernels on states and observations (Gaussian, median heuristic, by default). A kernel
        with an explicit feature map (:class:`~kbfilter.kernel_approximation.NystromKernel`,
        :class:`~kbfilter.kernel_approximation.RandomFourierKernel`, ``LinearKernel``) is used
        through its features and no ``n x n`` matrix is formed: on the states the projection is
        ``n F (F^T F + n eta I)^{-1} F^T`` (:meth:`projection_operator`); on the observations the
        update takes the push-through form (iw) or Woodbury on the features (original, exact).
    reg_prior : float
        ``eta`` (iw) or ``eps`` (original): regulariser of the prior's projection.
    reg_update : float
        ``lam`` (iw) or ``delta`` (original): regulariser of the update.
    features : transformer, optional
        Explicit observation features (``fit``/``transform``, e.g. ``sklearn``'s ``RBFSampler``
        or ``PCA``). The observation kernel is then the linear kernel on them and the iw update
        uses the push-through form ``w = D Phi (Phi^T D Phi + n lam I)^{-1} phi(z)``: O(n r^2).
        A ``LinearKernel`` as ``kernel_z`` is the same with the observations as features.
    solver : {"auto", "dense"}
        How the update is solved, chosen once at fit (``solver_``). ``"dense"``: on the full
        ``G_z`` (restricted to the support of ``D`` for iw). ``"auto"``: explicit features use
        the push-through form; otherwise, when ``G_z`` is numerically of low rank, a pivoted
        Cholesky factor ``G_z ~ L L^T`` with residual ``E`` and Woodbury, O(n r^2) a step instead
        of O(n^3). For iw the factor is used only while its error bound
        ``max(r) tr(E) / (n lam)`` is at most 1e-9 relative (``E`` is cut to ~1e-12 n lam in
        trace); a step whose bound is larger is solved densely. For the original rule, whose
        squared operator amplifies ``E``, the factor goes down to round-off and the update differs
        from the dense one by at most about :meth:`original_error_bound` relative, which grows as
        ``1 / delta``: measured on the oscillation system (T = 500, along a filtering run),
        2e-8, 3e-6 and 3e-4 at ``delta`` = 1e-2, 1e-4 and 1e-6 (5 % of the bound or less),
        against 4e-10, 3e-8 and 6e-6 between two dense solvers. Choose ``"dense"`` with a small
        ``delta`` when that difference matters.

    Attributes
    ----------
    solver_ : {"dense", "low_rank", "features"}
        The strategy chosen at fit.
    diagnostics_ : collections.Counter
        Fallbacks taken while fitting (``"jitter"``, ``"lu"`` on the prior's Gram matrix).
        Fallbacks taken by an update are returned with it (see :meth:`weights_from_projection`)
        and recorded in the posterior's ``info``.

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(500, 1)); z = x + 0.3 * rng.normal(size=(500, 1))
    >>> kbr = kb.KernelBayesRule(reg_prior=1e-3, reg_update=1e-3).fit(x, z)
    >>> prior = kb.KernelMean(rng.normal(0.5, 0.5, size=(300, 1)))
    >>> post = kbr.posterior(prior, [1.0])
    >>> round(float(post.mean()[0]), 1)   # exact Gaussian posterior mean: 0.87
    0.9
    """

    def __init__(self, method="iw", kernel_x=None, kernel_z=None, reg_prior=0.2, reg_update=0.2, features=None,
                 solver="auto"):
        self.method = method
        self.kernel_x = kernel_x
        self.kernel_z = kernel_z
        self.reg_prior = reg_prior
        self.reg_update = reg_update
        self.features = features
        self.solver = solver

    @limited_blas
    def fit(self, states, observations):
        """Precompute everything that does not depend on the prior or the observation.

        Parameters
        ----------
        states : array-like of shape (n, dim_x)
            Training states ``x_i``.
        observations : array-like of shape (n, dim_z)
            The observation ``z_i`` made at each state.

        Returns
        -------
        self : KernelBayesRule
            The fitted rule.
        """
        check_choice(self.method, "method", ("iw", "original"))
        check_choice(self.solver, "solver", ("auto", "dense"))
        check_transformer(self.features, "features")
        X = check_within_magnitude(check_matrix(states, "states", min_samples=2), "states")
        Z = check_within_magnitude(check_matrix(observations, "observations", min_samples=2), "observations")
        check_same_length("states", X, "observations", Z)
        reg_prior = check_positive(self.reg_prior, "reg_prior")
        self.reg_update_ = check_positive(self.reg_update, "reg_update")
        n = X.shape[0]
        self.states_, self.observations_, self.n_train_ = X, Z, n
        self.n_features_in_ = X.shape[1]
        self.kernel_x_ = fitted_kernel(self.kernel_x, "kernel_x", X)
        kernel_z = None if self.features is not None else fitted_kernel(self.kernel_z, "kernel_z", Z)
        dense_x = not self.kernel_x_.has_features
        dense_z = kernel_z is not None and not kernel_z.has_features
        # measured with tracemalloc: the states' Gram matrix and its factor, then the observations'
        # Gram matrix beside the factor, each built with a temporary of its size
        arrays = max(2 * dense_x, dense_x + 2 * dense_z)
        if arrays:
            check_square_memory(n, arrays, "states", f"kernel Bayes' rule on {n:,} training pairs",
                                "use kernels with explicit features (NystromKernel, RandomFourierKernel), or fewer "
                                "pairs")
        self.diagnostics_ = Counter()
        name = "G_x + n reg_prior I"
        if self.kernel_x_.has_features:
            # G_x = F F^T: the projection is F (F^T F + n eta I)^{-1} F^T, no n x n matrix
            self.prior_factor_ = Woodbury(self.kernel_x_.features(X), n * reg_prior)
            event = self.prior_factor_.inner.event
        else:
            self.prior_factor_ = ridge_factor(self.kernel_x_(X), n * reg_prior, name, warn=False)
            event = self.prior_factor_.event
            if event is not None:
                warn_user(f"KernelBayesRule: {self.prior_factor_.describe(name)}", NumericalWarning)
        if event is not None:
            self.diagnostics_[event] += 1
        self.features_, self.kernel_z_, self.G_z_ = None, None, None
        if self.features is not None:
            self.features_ = with_saved_layout(clone(self.features).fit(Z))
            self.Phi_ = check_feature_rows(self.features_.transform(Z), n)
        else:
            self.kernel_z_ = kernel_z
            # a kernel with an explicit feature map (linear, Nystrom, Fourier) gives Phi directly
            self.Phi_ = self.kernel_z_.features(Z) if self.kernel_z_.has_features else None
            if self.Phi_ is None:
                self.G_z_ = self.kernel_z_(Z)
        self._choose_solver(n)
        self._represent()
        return self

    def _after_load(self):
        check_choice(self.method, "method", ("iw", "original"))
        if saved_before_fit(self, "states_"):
            return
        # a saved file is untrusted: the fitted values must be ones fit could have produced
        states = check_saved_matrix(getattr(self, "states_", None), "states_")
        observations = check_saved_matrix(getattr(self, "observations_", None), "observations_")
        self.n_features_in_ = states.shape[1]  # derived, as fit sets it
        n = self.n_train_
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n == states.shape[0]
                == observations.shape[0]):
            raise ValueError(f"n_train_: expected the number of training states ({states.shape[0]}) and "
                             f"observations ({observations.shape[0]}), got {n!r}")
        check_positive(getattr(self, "reg_update_", None), "reg_update_")
        check_order(self.prior_factor_, n, "prior_factor_", "one row per training state")
        solver = check_choice(getattr(self, "solver_", None), "solver_", ("features", "low_rank", "dense"))
        needed = {"features": ("Phi_",), "low_rank": ("G_z_", "obs_factor_"), "dense": ("G_z_",)}[solver]
        for name in ("G_z_", "Phi_", "obs_factor_"):
            value = getattr(self, name, None)
            if value is None and name not in needed:
                continue
            shape = check_saved_matrix(value, name, allow_1d=False).shape
            expected = (n, n) if name == "G_z_" else (n, shape[1])
            if shape != expected:
                raise ValueError(f"{name}: expected one row per training pair ({n}) for the {solver!r} solver"
                                 f"{', and as many columns' if name == 'G_z_' else ''}, got shape {shape}")
        # (a file may hold a plain value where a fitted feature map or nothing belongs)
        if not (self.features_ is None or isinstance(self.features_, TransformerMixin)):
            raise ValueError(f"features_: expected a fitted feature map or None, got {self.features_!r}")
        for name in ("obs_residual_", "obs_norm_"):
            value = getattr(self, name, None)
            if isinstance(value, bool) or not isinstance(value, Real) or not value >= 0:
                raise ValueError(f"{name}: expected a non-negative number (or inf), got {value!r}")
        self._represent()

    def _represent(self):
        """The strategies every later call goes through, from what fit chose (also after a load)."""
        states = FeatureStates if self.kernel_x_.has_features else DenseStates
        self._states_side = states(self.kernel_x_, self.states_, self.prior_factor_)
        if self.solver_ == "features":
            transform = (TransformedFeatures(self.features_) if self.features_ is not None
                         else self.kernel_z_.features)
            self._observations_side = FeatureObservations(transform, self.Phi_, self.G_z_, self.obs_factor_)
        elif self.solver_ == "low_rank":
            self._observations_side = LowRankObservations(self.kernel_z_, self.observations_, self.G_z_,
                                                          self.obs_factor_, self.obs_residual_, self.obs_norm_)
        else:
            self._observations_side = DenseObservations(self.kernel_z_, self.observations_, self.G_z_)

    def _choose_solver(self, n):
        # G_z is often numerically of low rank: G_z = L L^T + E with E tiny. The updates then cost
        # O(n r^2) by Woodbury instead of O(n^3) (original) or O(|S|^3) (iw). For iw, E is cut to
        # ~1e-12 n lam in trace; the original update squares an ill-conditioned operator, so its
        # factor goes down to round-off (residual diagonal <= _ROUNDOFF_RTOL of the largest).
        # With explicit features, G_z = Phi Phi^T exactly and Phi is the factor (E = 0).
        self.obs_factor_, self.obs_residual_, self.obs_norm_ = None, np.inf, np.inf
        if self.Phi_ is not None:
            self.solver_ = "features"
            if self.method == "original":
                if self.solver == "dense" or self.Phi_.shape[1] >= max(n // 3, 1):
                    self.G_z_ = self.Phi_ @ self.Phi_.T
                else:
                    self.obs_factor_, self.obs_residual_, self.obs_norm_ = self.Phi_, 0.0, 0.0
            return
        self.solver_ = "dense"
        if self.solver == "dense" or n < 64:
            return
        G = self.G_z_
        diag = np.diag(G).copy()
        scale = max(diag.max(), 1e-300)
        rtol = LOW_RANK_RTOL * 1e-3 * self.reg_update_ / scale if self.method == "iw" else _ROUNDOFF_RTOL
        L, _ = pivoted_cholesky(diag, lambda i: G[:, i], n // 3, tol=rtol)
        residual = float(diag.sum() - np.sum(L * L))
        if L.shape[1] < n // 3:
            self.obs_factor_, self.obs_residual_ = L, max(residual, 0.0)
            if self.method == "original":  # what original_error_bound needs
                self.obs_norm_ = float(np.linalg.eigvalsh(L.T @ L)[-1]) if L.shape[1] else 0.0
            self.solver_ = "low_rank"

    # -- the pieces -------------------------------------------------------------------------
    def prior_values(self, prior):
        """``g = G_{x,u} gamma``: the prior embedding at the training states.

        Parameters
        ----------
        prior : KernelMean or None
            A weighted sample on the state space, read as a probability (its weights scaled to
            sum to one; the sum must be positive); None is the uniform embedding of the training
            states.

        Returns
        -------
        ndarray of shape (n,)
            ``g``.
        """
        check_is_fitted(self, "prior_factor_")
        return self._states_side.prior_values(prior)

    def projection(self, g, check_input=True):
        """``mu = n (G_x + n eps I)^{-1} g``: the prior projected on the training states.

        Parameters
        ----------
        g : ndarray of shape (n,) or (n, k)
            Prior values at the training states (see :meth:`prior_values`).
        check_input : bool, default=True
            False skips the checks of ``g``, for an array the caller built from checked parts.

        Returns
        -------
        ndarray of the shape of ``g``
            ``mu``.
        """
        if check_input:
            g = self._over_states(g, "g", columns=True)
        return self._states_side.projection(g)

    def prior_projection(self, prior):
        """``mu = n (G_x + n eps I)^{-1} g`` for a prior: :meth:`projection` of :meth:`prior_values`.

        With a feature kernel on the states (``G_x = F F^T``, ``g = F gamma``) it is computed as
        ``n F (F^T F + n eps I)^{-1} gamma``, which stays accurate however small ``eps`` is.

        Parameters
        ----------
        prior : KernelMean or None
            As for :meth:`prior_values`.

        Returns
        -------
        ndarray of shape (n,)
            ``mu``.
        """
        check_is_fitted(self, "prior_factor_")
        return self._states_side.prior_projection(prior)

    def feature_projection(self, gamma, check_input=True):
        """:meth:`prior_projection` of the prior whose feature-space mean is ``gamma``.

        For a state kernel with explicit features ``phi`` (``G_x = F F^T``), a prior
        ``sum_j a_j k(., y_j)`` has prior values ``g = F gamma`` with ``gamma = sum_j a_j phi(y_j)``;
        then ``mu = n F (F^T F + n eps I)^{-1} gamma``, in O(n r).

        Parameters
        ----------
        gamma : ndarray of shape (r,)
            The prior's mean feature vector.
        check_input : bool, default=True
            False skips the check that ``gamma`` is finite, for a vector the caller built from
            checked parts.

        Returns
        -------
        ndarray of shape (n,)
            ``mu``.
        """
        check_is_fitted(self, "prior_factor_")
        if check_input:
            gamma = check_vector(gamma, "gamma")
        return self._states_side.feature_projection(gamma)

    def projection_operator(self):
        """The projection ``g -> n (G_x + n eps I)^{-1} G_x g`` as an operator on weights over the
        training states: what a filter applies to its predicted weights every step.

        Dense (n x n) for an exact state kernel; for a kernel with explicit features ``F``
        (e.g. :class:`~kbfilter.kernel_approximation.NystromKernel`), the low-rank
        ``n F (F^T F + n eps I)^{-1} F^T``, O(n r) memory and work.

        Returns
        -------
        Operator
            Of shape (n, n).
        """
        check_is_fitted(self, "prior_factor_")
        return self._states_side.projection_operator()

    def ratio(self, g):
        """KuLSIF weights ``max(0, n (G_x + n eta I)^{-1} g)`` from prior values ``g``.

        Parameters
        ----------
        g : ndarray of shape (n,)
            Prior values at the training states (see :meth:`prior_values`).

        Returns
        -------
        ndarray of shape (n,)
            The non-negative weights.
        """
        return np.maximum(0.0, self.projection(g))

    def observation_vectors(self, Z, check_input=True):
        """``k_z(z)`` for each row of ``Z`` as columns (n, q); ``phi(z)`` (r, q) with features.

        Parameters
        ----------
        Z : array-like of shape (q, dim_z) or (dim_z,)
            Observations.
        check_input : bool, default=True
            False skips the checks, for a (q, dim_z) float array the caller has already checked
            (a filter checks each observation once, where it enters).

        Returns
        -------
        ndarray of shape (n, q) or (r, q)
            One column per observation.
        """
        if check_input:
            check_is_fitted(self, "prior_factor_")
            Z = self._check_observations(Z)
        return self._observations_side.vectors(Z, check_input)

    def _check_observations(self, Z):
        Z = check_array(Z, "z")
        if Z.ndim == 1:
            Z = Z[None, :]
        return check_matrix(Z, "z", n_features=self.observations_.shape[1], allow_1d=False)

    def weights_from_ratio(self, r, obs, check_input=True):
        """IW update from density-ratio weights ``r`` and observation vectors.

        Rows with ``r_i = 0`` get ``w_i = 0`` and are left out of the solve, which changes nothing
        in the result. If every ``r_i`` is 0, the stated fallback ``r = 1`` (plain CKME regression
        from the observation) is used and recorded.

        Parameters
        ----------
        r : ndarray of shape (n,)
            Non-negative density-ratio weights (see :meth:`ratio`).
        obs : ndarray
            As for :meth:`weights_from_projection`.
        check_input : bool, default=True
            False skips the checks of ``r`` and ``obs``, for arrays the caller has checked or
            computed with this rule.

        Returns
        -------
        W, info
            As :meth:`weights_from_projection` returns them.
        """
        if check_input:
            r, obs = self._density_ratio(r, "r"), self._observation_columns(obs)
        return iw_from_ratio(self._observations_side, r, obs, self.n_train_, self.reg_update_)

    def _density_ratio(self, r, name):
        """``r`` checked as density-ratio weights at the training states: finite, none negative."""
        r = self._over_states(r, name)
        if np.any(r < 0):
            raise ValueError(f"{name}: expected non-negative density-ratio weights")
        return r

    def _over_states(self, v, name, columns=False):
        """``v`` checked as a finite vector over the training states (or, with ``columns``, columns
        of them)."""
        check_is_fitted(self, "prior_factor_")
        if not (columns and np.ndim(v) == 2):
            return check_vector(v, name, length=self.n_train_)
        v = check_matrix(v, name, allow_1d=False)
        if v.shape[0] != self.n_train_:
            raise ValueError(f"{name}: expected {self.n_train_} rows (one per training state), got shape {v.shape}")
        return v

    def _observation_columns(self, obs):
        """``obs`` checked as :meth:`observation_vectors` gives them: finite, one column each."""
        length = self._observations_side.vector_length
        obs = np.asarray(obs, dtype=np.float64) if not isinstance(obs, np.ndarray) else obs
        if obs.ndim != 2 or obs.shape[0] != length or obs.shape[1] == 0:
            raise ValueError(f"obs: expected observation vectors of shape ({length}, q), as observation_vectors "
                             f"gives them, got shape {obs.shape}")
        if obs.dtype.kind not in "fiu" or not np.all(np.isfinite(obs)):
            raise ValueError("obs: expected finite real observation vectors")
        return obs

    def original_error_bound(self, mu):
        """First-order bound on the relative difference between the original rule's low-rank
        update and the dense one, for the projected prior ``mu``.

        ``2 max(mu)^2 ||G_z||_2 tr(E) / delta``, where ``G_z = L L^T + E`` is the factorisation
        chosen at fit (``obs_norm_ = ||L L^T||_2``, ``obs_residual_ = tr(E)``): ``(Lambda G_z)^2``
        moves by at most ``2 ||Lambda||^2 ||G_z|| ||E||`` and its inverse is at most ``1 / delta``.
        0 when the update is dense.

        Parameters
        ----------
        mu : ndarray of shape (n,)
            The projected prior (see :meth:`projection`).

        Returns
        -------
        float
            The bound (0 for a dense update).
        """
        mu = self._over_states(mu, "mu")
        if self.method != "original" or self.obs_factor_ is None:
            return 0.0
        return 2 * float(np.max(mu * mu)) * self.obs_norm_ * self.obs_residual_ / self.reg_update_

    def weights_from_projection(self, mu, obs, check_input=True):
        """Posterior weights from the projected prior and observation vectors.

        Parameters
        ----------
        mu : ndarray of shape (n,)
            The projected prior (see :meth:`projection`).
        obs : ndarray
            Observation vectors (see :meth:`observation_vectors`).
        check_input : bool, default=True
            False skips the checks of ``mu`` and ``obs``, for arrays the caller has computed with
            this rule from checked input (a filter, every step).

        Returns
        -------
        W : ndarray of shape (n, q)
            Posterior weights over the training states, one column per observation.
        info : dict
            The fallbacks taken by this update, kind -> sentence: ``"uniform_ratio"``,
            ``"regression"``, ``"nonpositive_sum"``, ``"jitter"``, ``"lu"``.
        """
        if check_input:
            mu, obs = self._over_states(mu, "mu"), self._observation_columns(obs)
        return posterior_from_projection(self._observations_side, self.method, mu, obs, self.n_train_,
                                         self.reg_update_)

    # -- the public rule ----------------------------------------------------------------------
    @limited_blas
    def posterior(self, prior, z):
        """Posterior embedding over the training states for one observation ``z`` (1-D).

        Parameters
        ----------
        prior : KernelMean or None
            The prior on the state space, as for :meth:`prior_values`; None for the uniform
            embedding of the training states.
        z : array-like of shape (dim_z,)
            The observation.

        Returns
        -------
        KernelMean
            Its ``info`` holds the fallbacks taken (kind -> sentence), each also warned about
            with a :class:`~kbfilter.NumericalWarning`.
        """
        mu = self.prior_projection(prior)
        W, info = self.weights_from_projection(mu, self.observation_vectors(self._as_single(z)), check_input=False)
        return self._embeddings(self.states_, W, self.kernel_x_, info, mu)[0]

    def _as_single(self, z):
        check_is_fitted(self, "prior_factor_")
        if z is not None and ndim_or_none(z) == 0:
            z = [z]  # a number is an observation of length 1
        # through the checks, not numpy's own conversion: a string or None is named z
        return check_vector(z, "z", length=self.observations_.shape[1])[None, :]

    @staticmethod
    def _embeddings(states, W, kernel, info, prior):
        # an observation whose posterior has no positive weight (beyond the observation kernel's reach
        # of every training observation, say) tells nothing the rule can use: its posterior is the
        # prior, as the filters keep their belief then. Each posterior reports the fallbacks of the
        # shared solve and those of its own column
        shared = {kind: message for kind, message in info.items() if kind != "nonpositive_sum"}
        infos = [dict(shared, nonpositive_sum=info["nonpositive_sum"]) if total <= 0 and "nonpositive_sum" in info
                 else shared for total in W.sum(axis=0)]
        collapsed = ~np.any(W > 0, axis=0)
        prior = np.maximum(prior, 0.0)
        if np.any(collapsed) and prior.sum() > 0:
            W = W.copy()
            W[:, collapsed] = (prior / prior.sum())[:, None]
            returned = "no posterior weight was positive; returned the prior on the training states"
            for j in np.flatnonzero(collapsed):
                infos[j] = dict(shared, collapsed=returned)
        for message in dict.fromkeys(message for one in infos for message in one.values()):
            warn_user(f"KernelBayesRule: {message}", NumericalWarning)
        return [KernelMean(states, W[:, j], kernel, info=infos[j]) for j in range(W.shape[1])]

    @limited_blas
    def posterior_batch(self, prior, Z):
        """Posterior embeddings for many observations (rows of ``Z``) under the same prior.

        Parameters
        ----------
        prior : KernelMean or None
            The prior, as in :meth:`posterior`.
        Z : array-like of shape (q, dim_z)
            The observations.

        Returns
        -------
        list of KernelMean
            One per observation, as :meth:`posterior` returns.
        """
        mu = self.prior_projection(prior)
        W, info = self.weights_from_projection(mu, self.observation_vectors(Z), check_input=False)
        return self._embeddings(self.states_, W, self.kernel_x_, info, mu)

    @limited_blas
    def posterior_given_ratio(self, ratio, z):
        """IW posterior with given density-ratio weights (e.g. the true ``pi / p``), for studies.

        Parameters
        ----------
        ratio : array-like of shape (n,)
            Non-negative weights ``pi(x_i) / p(x_i)``.
        z : array-like of shape (dim_z,)
            The observation.

        Returns
        -------
        KernelMean
            The posterior embedding over the training states.
        """
        ratio = self._density_ratio(ratio, "ratio")
        W, info = self.weights_from_ratio(ratio, self.observation_vectors(self._as_single(z)), check_input=False)
        return self._embeddings(self.states_, W, self.kernel_x_, info, ratio)[0]
