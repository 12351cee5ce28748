"""The learned observation model: the component every filter with a learned likelihood composes.

The kernel Bayes filter and the Kernel Monte Carlo filter learn the same thing from
state-observation pairs ``(x_i, z_i)``: a feature map in front of the observations, a state and an
observation kernel (scaled, and approximated as the user asked), kernel Bayes' rule fitted on them,
and an optional outlier gate. :class:`ObservationSettings` holds those hyperparameters, checked once;
:class:`ObservationSpace` is the fitted map and gate (also the nearest-neighbour particle filter's);
:class:`LearnedObservationModel` adds the fitted rule and turns a prior and an observation into
posterior weights over the training states.
"""

from collections import Counter
from functools import cached_property

import numpy as np
from sklearn.base import clone

from .._validation import check_choice, check_feature_rows, check_int, check_observation, check_positive, \
    check_square_memory, check_transformer
from .._warnings import warn_user
from ..features import GaussianBlur
from ..kernel_approximation import NystromKernel, RandomFourierKernel
from ..kernels import as_kernel, fitted_kernel
from ..linalg import NumericalWarning
from ..persistence import persistent, with_saved_layout
from ..rules.bayes_rule import KernelBayesRule
from .base import SharedModel
from .grids import BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, LOCAL_BLUR_GRID, LOCAL_GRID, SCALABLE_BLUR_GRID
from .likelihood import ObservationDensity
from .outliers import OutlierGate, check_outlier_quantile, outlier_gate

__all__ = ["ObservationSettings", "ObservationSpace", "LearnedObservationModel", "observation_grid",
           "observation_features", "mapped_observation", "scaled_kernel", "approximated_kernel", "nystrom_rank_rule",
           "report_rank_cap", "check_dense_fits", "IMAGE_FEATURES", "RANK_RTOL", "MAX_RANK", "RFF_RANK"]

#: ``approximation="nystrom"`` with ``rank=None``: landmarks are added until the neglected trace of
#: each Gram matrix is at most ``RANK_RTOL * n * min(reg, 1)`` for the regulariser ``reg`` it is
#: solved with, which bounds the relative change of each regularised solve by about ``RANK_RTOL``
RANK_RTOL = 1e-1
#: ... and at most this many
MAX_RANK = 1000
#: ``approximation="rff"`` with ``rank=None``: this many random Fourier features
RFF_RANK = 1000
#: ``features="auto"`` on image observations: on the moving sprite and the camera a blur of 3 pixels
#: beat raw pixels (0.0084 against 0.0117 MSE, 10 runs) and PCA / learned features
IMAGE_FEATURES = GaussianBlur(sigma=3.0, stride=2)


def observation_features(features, obs_shape):
    """The feature map a filter's ``features`` parameter puts in front of observations.

    Parameters
    ----------
    features : "auto", transformer or None
        The parameter.
    obs_shape : tuple of int
        The shape of one observation.

    Returns
    -------
    transformer or None
        ``"auto"``: :data:`IMAGE_FEATURES` for images (more than one axis), None for vectors;
        otherwise ``features`` itself (unfitted, not cloned).
    """
    if isinstance(features, str):
        check_choice(features, "features", ("auto",))
        return IMAGE_FEATURES if len(obs_shape) > 1 else None
    return check_transformer(features, "features", "'auto', None")


def mapped_observation(z, obs_shape, features):
    """One test observation as a (1, d) row in the space the observation kernel sees.

    Parameters
    ----------
    z : array-like
        The observation, in the training observations' shape or flattened.
    obs_shape : tuple of int
        The shape of one training observation.
    features : transformer or None
        The fitted map (:meth:`ObservationSpace.fitted`).

    Returns
    -------
    ndarray of shape (1, d)
        The observation after ``features``.
    """
    z = check_observation(z, obs_shape)[None, :]
    if features is None:
        return z
    row = np.asarray(features.transform(z), dtype=np.float64)
    # a map fitted on finite training features may still overflow on a new observation (a log of a
    # value below the training range): named here, not met as a NaN likelihood or a collapsed belief
    if not np.all(np.isfinite(row)):
        raise ValueError("z: the feature map gave NaN or infinite values for this observation")
    return row


def nystrom_rank_rule(rank, reg):
    """The landmark cap and relative trace tolerance of a Nystrom factorisation solved with ``n reg I``.

    Parameters
    ----------
    rank : int or None
        The filter's ``rank``: that many landmarks exactly (tolerance 0), or None for the default
        rule, landmarks until the neglected trace is at most ``RANK_RTOL * min(reg, 1)`` times
        the trace (at most ``MAX_RANK``).
    reg : float
        The smallest regulariser the Gram matrix is solved with.

    Returns
    -------
    max_rank : int
        The most landmarks.
    tol : float
        The neglected trace allowed, relative to the trace.
    """
    # The solve (G + n reg I)^{-1} G changes by at most tr(E) / (n reg) when G loses E, but the solve
    # itself is about ||G|| / (n reg) once n reg exceeds ||G|| (at most n for the normalised kernels
    # here), and the filter normalises its weights: past reg = 1 the tolerance must stop growing, or
    # the error is as large as the weights (reg = 10 kept no landmark at all)
    return (MAX_RANK, RANK_RTOL * min(reg, 1.0)) if rank is None else (rank, 0.0)


def approximated_kernel(kernel, approximation, rank, reg, rng):
    """``kernel`` as ``approximation`` represents it, for Gram matrices regularised by ``n reg I``.

    Parameters
    ----------
    kernel : Kernel
        The (unfitted) kernel.
    approximation : {"exact", "nystrom", "rff"}
        ``"exact"`` (and any kernel that already has explicit features) keeps ``kernel``.
    rank : int or None
        Landmarks (``"nystrom"``) or features (``"rff"``); None: for Nystrom, landmarks until the
        neglected trace is at most ``RANK_RTOL * n * reg`` (at most ``MAX_RANK``), for Fourier
        features ``RFF_RANK``.
    reg : float
        The smallest regulariser the Gram matrix is solved with.
    rng : numpy.random.Generator
        Seeds the Fourier features.

    Returns
    -------
    Kernel
        The kernel to fit.
    """
    if approximation == "exact" or kernel.has_features:
        return kernel
    if approximation == "nystrom":
        max_rank, tol = nystrom_rank_rule(rank, reg)
        return NystromKernel(kernel, rank=max_rank, tol=tol)
    return RandomFourierKernel(kernel, rank=RFF_RANK if rank is None else rank,
                               random_state=int(rng.integers(2**31 - 1)))


def scaled_kernel(kernel, name, scale, standardise=False):
    """An unfitted clone of ``kernel`` (see :func:`~kbfilter.kernels.as_kernel`) with its
    bandwidth multiplied by ``scale`` (kernels without a ``scale`` parameter are left as they are).

    Parameters
    ----------
    kernel : Kernel or None
        The kernel; None is the Gaussian kernel with the median heuristic.
    name : str
        The argument's name, for error messages.
    scale : float
        The multiplier.
    standardise : bool, default=False
        Whether the default kernel (``kernel=None``) standardises its inputs' columns.

    Returns
    -------
    Kernel
        The scaled clone (a fitted kernel taken from another model, see
        :meth:`~kbfilter.kernels.Kernel.frozen`, is returned as it is, with ``scale`` 1).

    Raises
    ------
    ValueError
        When ``kernel`` is such a fitted kernel and ``scale`` is not 1.
    """
    kernel = as_kernel(kernel, name, standardise)
    if "scale" in kernel.get_params() and scale != 1:
        if getattr(kernel, "frozen_", False):
            # a fitted kernel handed on is shared, not cloned: scaling it would change it for its
            # owner too, and its fitted bandwidth would ignore the new scale
            raise ValueError(f"{name}: a fitted kernel taken from another model is used as it is, so its "
                             f"bandwidth cannot be multiplied by {scale!r}; pass an unfitted kernel, or a "
                             f"multiplier of 1")
        kernel.set_params(scale=kernel.scale * scale)
    return kernel


def report_rank_cap(owner, short, diagnostics):
    """Count and warn when Nystrom kernels stopped at ``MAX_RANK`` landmarks before their tolerance.

    Parameters
    ----------
    owner : str
        The class named in the warning.
    short : list of str
        The kernels that stopped short (e.g. ``LearnedObservationModel.short_kernels``); nothing
        happens when it is empty.
    diagnostics : collections.Counter
        Gets ``"rank_cap"`` counted once when any kernel stopped short.
    """
    if short:
        diagnostics["rank_cap"] += 1
        warn_user(f"{owner}: the {' and '.join(short)} kernel reached MAX_RANK = {MAX_RANK} landmarks before "
                  f"the rank rule's tolerance; the approximation is coarser than stated (a wider bandwidth or a "
                  f"larger regulariser needs fewer)", NumericalWarning)


def observation_grid(features, approximation, obs_shape):
    """The learned observation model's default grid, for :func:`~kbfilter.tune_filter`.

    Parameters
    ----------
    features : "auto", transformer or None
        The filter's ``features``.
    approximation : str
        The filter's ``approximation``.
    obs_shape : tuple of int
        The shape of one training observation.

    Returns
    -------
    dict
        :data:`~kbfilter.filters.grids.DEFAULT_GRID` for vectors
        (:data:`~kbfilter.filters.grids.LOCAL_GRID` with ``approximation="local"``); for images,
        :data:`~kbfilter.filters.grids.BLUR_GRID` behind the default blur
        (:data:`~kbfilter.filters.grids.SCALABLE_BLUR_GRID` on approximated kernels,
        :data:`~kbfilter.filters.grids.LOCAL_BLUR_GRID` on a bounded support),
        :data:`~kbfilter.filters.grids.IMAGE_GRID` on raw pixels (``features=None``) and
        :data:`~kbfilter.filters.grids.FEATURE_GRID` behind any other feature map.
    """
    if len(obs_shape) <= 1:
        return LOCAL_GRID if approximation == "local" else DEFAULT_GRID
    features = observation_features(features, obs_shape)
    if features is None:
        return IMAGE_GRID
    if not isinstance(features, GaussianBlur):
        return FEATURE_GRID
    if approximation == "local":
        return LOCAL_BLUR_GRID
    return BLUR_GRID if approximation == "exact" else SCALABLE_BLUR_GRID


class ObservationSettings:
    """The learned observation model's hyperparameters, checked once before any work.

    The filters that compose the model keep these as flat parameters of their own (so that
    ``get_params`` / ``set_params`` and tuning grids see them); :meth:`of` reads them from one.
    Their meaning is documented on :class:`~kbfilter.KernelBayesFilter`.

    Parameters
    ----------
    rule, kernel_x, kernel_z, scale, scale_z, reg_prior, reg_update, features, approximation, rank, outlier_quantile
        As the filters take them.
    approximations : tuple of str, default=APPROXIMATIONS
        The values of ``approximation`` the filter accepts.
    """

    #: the representations every filter composing the model can use
    APPROXIMATIONS = ("exact", "nystrom", "rff")
    PARAMS = ("rule", "kernel_x", "kernel_z", "scale", "scale_z", "reg_prior", "reg_update", "features",
              "approximation", "rank", "outlier_quantile")

    def __init__(self, rule, kernel_x, kernel_z, scale, scale_z, reg_prior, reg_update, features, approximation,
                 rank, outlier_quantile, approximations=APPROXIMATIONS):
        self.rule = check_choice(rule, "rule", ("iw", "original"))
        self.approximation = check_choice(approximation, "approximation", approximations)
        self.rank = None if rank is None else check_int(rank, "rank")
        self.outlier_quantile = check_outlier_quantile(outlier_quantile)
        self.scale = check_positive(scale, "scale")
        self.scale_z = self.scale if scale_z is None else check_positive(scale_z, "scale_z")
        self.reg_prior = check_positive(reg_prior, "reg_prior")
        self.reg_update = check_positive(reg_update, "reg_update")
        # unfitted, scaled clones: the parameters themselves are never changed. The default state
        # kernel standardises its columns (states mix units); the default observation kernel's
        # choice waits for the observations (see fitted_kernels)
        self.kernel_x = scaled_kernel(kernel_x, "kernel_x", self.scale, standardise=True)
        self.kernel_z = None if kernel_z is None else scaled_kernel(kernel_z, "kernel_z", self.scale_z)
        self.features = features

    @classmethod
    def of(cls, estimator, approximations=APPROXIMATIONS):
        """The settings of a filter whose parameters include :attr:`PARAMS`.

        Parameters
        ----------
        estimator : BaseEstimator
            The filter.
        approximations : tuple of str, default=APPROXIMATIONS
            The values of ``approximation`` the filter accepts (the kernel Bayes filter adds its
            own).

        Returns
        -------
        ObservationSettings
            The checked settings.
        """
        return cls(**{name: getattr(estimator, name) for name in cls.PARAMS}, approximations=approximations)

    def fitted_kernels(self, X, Z, space, fit=fitted_kernel):
        """The state and observation kernels fitted once, frozen to be handed on as they are.

        With ``kernel_z=None`` the observation kernel is Gaussian with the median heuristic, on
        standardised columns when the observations are vectors compared as they are (their
        entries may be in different units: a range and a bearing), on the raw distances for
        images and for the output of a feature map (whose columns are comparable already, or
        ordered by variance, as PCA's are, and standardising would inflate the noise ones).

        Parameters
        ----------
        X : ndarray of shape (T, dim_x)
            All the training states.
        Z : ndarray of shape (T, n_features)
            All the training observations, mapped.
        space : ObservationSpace
            Where ``Z`` lives (:meth:`ObservationSpace.fitted`).
        fit : callable, default=fitted_kernel
            ``fit(kernel, name, data)`` returns the kernel fitted on ``data``
            (:func:`~kbfilter.filters.chunked.summary_fitted_kernel` for dask arrays).

        Returns
        -------
        kernel_x, kernel_z : Kernel
            Fitted (e.g. the median heuristic resolved on ``X`` and ``Z``) and frozen
            (:meth:`~kbfilter.kernels.Kernel.frozen`).
        """
        kernel_z = self.kernel_z
        if kernel_z is None:
            raw_vectors = len(space.obs_shape) <= 1 and space.features is None
            kernel_z = scaled_kernel(None, "kernel_z", self.scale_z, standardise=raw_vectors)
        return fit(self.kernel_x, "kernel_x", X).frozen(), fit(kernel_z, "kernel_z", Z).frozen()

    def fit_model(self, space, X, Z, state_reg, rng, kernels):
        """Fit kernel Bayes' rule on the pairs ``(X, Z)`` and the outlier gate on ``Z``.

        Parameters
        ----------
        space : ObservationSpace
            From :meth:`ObservationSpace.fitted` (with ``features``).
        X : ndarray of shape (n, dim_x)
            The training states the rule weighs.
        Z : ndarray of shape (n, n_features)
            Their observations, mapped by ``space``.
        state_reg : float
            The smallest regulariser the state Gram matrix is solved with (the Nystrom rank rule
            keeps enough landmarks for it).
        rng : numpy.random.Generator or None
            Seeds the random Fourier features (needed only for ``approximation="rff"``).
        kernels : (Kernel, Kernel)
            The state and observation kernels from :meth:`fitted_kernels`; the rule approximates
            them as ``approximation`` asks without fitting them again.

        Returns
        -------
        LearnedObservationModel
            The fitted model, with its gate.
        """
        kernel_x, kernel_z = kernels
        rule = KernelBayesRule(
            method=self.rule,
            kernel_x=approximated_kernel(kernel_x, self.approximation, self.rank, state_reg, rng),
            kernel_z=approximated_kernel(kernel_z, self.approximation, self.rank, self.reg_update, rng),
            reg_prior=self.reg_prior, reg_update=self.reg_update,
        ).fit(X, Z)
        return LearnedObservationModel(space.gated(Z, self.outlier_quantile), rule, Counter(rule.diagnostics_))


@persistent("obs_shape", "features", "gate", holds={"features": "TransformerMixin", "gate": "OutlierGate"})
class ObservationSpace(SharedModel):
    """Where observations are compared: the fitted feature map, and the outlier gate in its space.

    Read-only once built and shared by copies of a filter.

    Parameters
    ----------
    obs_shape : tuple of int
        The shape of one training observation.
    features : transformer or None
        The fitted feature map (None: the flattened observation itself).
    gate : OutlierGate or None
        The gate (None: every observation is used).
    """

    def __init__(self, obs_shape, features=None, gate=None):
        # built by fit, or from a saved file (untrusted): each part must be what fit makes
        if not (isinstance(obs_shape, (tuple, list)) and len(obs_shape) <= 3
                and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 < d < 2**31
                        for d in obs_shape)):
            raise ValueError(f"obs_shape: expected a tuple of at most 3 positive sizes, got {obs_shape!r}")
        if features is not None and not callable(getattr(features, "transform", None)):
            raise ValueError(f"features: expected a fitted transformer or None, got {type(features).__name__}")
        if gate is not None and not isinstance(gate, OutlierGate):
            raise ValueError(f"gate: expected an OutlierGate or None, got {type(gate).__name__}")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.features = features
        self.gate = gate

    def _after_load(self):
        # a feature map from a file must map an observation of this shape to one finite row: a
        # tampered setting (an activation or a component count) fails only when it is first used
        if self.features is not None:
            row = np.asarray(self.features.transform(np.zeros((1, int(np.prod(self.obs_shape))))), dtype=np.float64)
            if row.ndim != 2 or row.shape[0] != 1 or not np.all(np.isfinite(row)):
                raise ValueError("features: the loaded feature map does not map an observation to one finite row")

    def check_width(self, width, whose):
        """Refuse mapped observations of ``width`` columns that this space cannot have made: with
        no feature map, an observation of ``obs_shape`` flattened.

        Parameters
        ----------
        width : int
            The columns of the mapped training observations.
        whose : str
            Whose they are, for the message (``"the rule's"``).
        """
        if self.features is None and int(np.prod(self.obs_shape)) != width:
            raise ValueError(f"space: observations of shape {self.obs_shape} do not match {whose} {width} columns")

    @classmethod
    def fitted(cls, features, obs_shape, Z, X):
        """Fit the feature map a filter's ``features`` parameter asks for, and map the observations.

        Parameters
        ----------
        features : "auto", transformer or None
            The parameter (see :func:`observation_features`); a map with an ``image_shape`` parameter
            left at None is given ``obs_shape``. It is cloned, never fitted in place.
        obs_shape : tuple of int
            The shape of one observation.
        Z : ndarray of shape (T, dim_z)
            The flattened training observations.
        X : ndarray of shape (T, dim_x)
            The training states (some maps learn from them).

        Returns
        -------
        space : ObservationSpace
            Without a gate.
        Z : ndarray of shape (T, n_features)
            The observations in the space the observation kernel sees.
        """
        features = observation_features(features, obs_shape)
        if features is None:
            return cls(obs_shape), Z
        features = clone(features)
        if "image_shape" in features.get_params() and features.image_shape is None:
            features.set_params(image_shape=obs_shape)  # e.g. GaussianBlur
        try:
            mapped = with_saved_layout(features.fit(Z, X)).transform(Z)
        except (ValueError, TypeError, IndexError) as exc:
            if type(features).__module__.partition(".")[0] == "kbfilter":
                raise  # the library's own maps name their parameters
            raise ValueError(f"features: {type(features).__name__} failed on the training observations "
                             f"({exc})") from exc
        return cls(obs_shape, features), check_feature_rows(mapped, Z.shape[0])

    def gated(self, Z, quantile):
        """This space with the outlier gate of ``quantile`` fitted on ``Z``.

        Parameters
        ----------
        Z : ndarray of shape (n, n_features)
            The training observations, mapped into this space.
        quantile : float or None
            The checked ``outlier_quantile`` (None: no gate).

        Returns
        -------
        ObservationSpace
            A new space with the same feature map.
        """
        return ObservationSpace(self.obs_shape, self.features, outlier_gate(Z, quantile))

    def mapped(self, Z):
        """Training observations (flattened, already checked) in this space, checked as the
        observation kernel needs them.

        Parameters
        ----------
        Z : ndarray of shape (n, dim_z)
            The observations.

        Returns
        -------
        ndarray of shape (n, d)
            After the feature map (``Z`` itself without one).
        """
        return Z if self.features is None else check_feature_rows(self.features.transform(Z), Z.shape[0])

    def map(self, z):
        """One observation, checked, as a row in this space (see :func:`mapped_observation`).

        Parameters
        ----------
        z : array-like
            The observation, flat or in the training observations' shape.

        Returns
        -------
        ndarray of shape (1, d)
            The observation after the feature map.
        """
        return mapped_observation(z, self.obs_shape, self.features)

    def admits(self, row, nearest=None):
        """Whether the gate lets a mapped observation through.

        Parameters
        ----------
        row : ndarray of shape (1, d)
            The observation, from :meth:`map`.
        nearest : float, optional
            Its distance to the nearest training observation, if already known.

        Returns
        -------
        bool
            True without a gate.
        """
        if self.gate is None:
            return True
        return self.gate.admits(row) if nearest is None else self.gate.admits_distance(nearest)

    def admit(self, z):
        """The observation ``z`` mapped to a (1, d) row, or None when the gate sets it aside.

        Parameters
        ----------
        z : array-like
            The observation, flat or in the training observations' shape (checked here, once).

        Returns
        -------
        ndarray of shape (1, d) or None
            None when the gate sets the observation aside.
        """
        row = self.map(z)
        return row if self.admits(row) else None


@persistent("space", "rule", "fit_diagnostics", holds={"space": "ObservationSpace", "rule": "KernelBayesRule"})
class LearnedObservationModel(SharedModel):
    """The fitted observation model: the observation space and kernel Bayes' rule on the training pairs.

    Read-only once built and shared by copies of a filter. Built by
    :meth:`ObservationSettings.fit_model`.

    Parameters
    ----------
    space : ObservationSpace
        The feature map and the gate.
    rule : KernelBayesRule
        The fitted rule.
    fit_diagnostics : collections.Counter
        Fallbacks taken while fitting.
    """

    def __init__(self, space, rule, fit_diagnostics):
        if not isinstance(space, ObservationSpace):
            raise ValueError(f"space: expected an ObservationSpace, got {type(space).__name__}")
        if not (isinstance(rule, KernelBayesRule) and hasattr(rule, "states_")):
            raise ValueError(f"rule: expected a fitted KernelBayesRule, got {type(rule).__name__}")
        space.check_width(rule.observations_.shape[1], "the rule's")
        self.space = space
        self.rule = rule
        self.fit_diagnostics = fit_diagnostics

    @cached_property
    def density(self):
        """The observation density behind the observation kernel (an
        :class:`~kbfilter.filters.likelihood.ObservationDensity` over the training observations,
        in the space the kernel sees): what the likelihood and the smoother use."""
        return ObservationDensity.of(self.rule.observations_, self.rule.kernel_z_)

    @property
    def short_kernels(self):
        """The Nystrom kernels (``"states"``, ``"observations"``) that stopped at ``MAX_RANK``
        before their tolerance."""
        return [name for name, k in (("states", self.rule.kernel_x_), ("observations", self.rule.kernel_z_))
                if not getattr(k, "converged_", True)]

    def admit(self, z):
        """The observation ``z`` mapped to a (1, d) row, or None when the gate sets it aside.

        Parameters
        ----------
        z : array-like
            The observation, flat or in the training observations' shape (checked here, once).

        Returns
        -------
        ndarray of shape (1, d) or None
            None when the gate sets the observation aside.
        """
        return self.space.admit(z)

    def posterior_weights(self, mu, row):
        """Kernel Bayes' rule: the posterior's weights over the training states.

        Parameters
        ----------
        mu : ndarray of shape (n,)
            The prior's embedding projected on the training states (see
            :meth:`~kbfilter.KernelBayesRule.projection`).
        row : ndarray of shape (1, d)
            The observation, from :meth:`admit`.

        Returns
        -------
        weights : ndarray of shape (n,)
            The update's weights, not normalised.
        info : dict
            Fallbacks the rule took, kind -> message.
        """
        # the row was checked where it entered (admit)
        W, info = self.rule.weights_from_projection(mu, self.rule.observation_vectors(row, check_input=False),
                                                   check_input=False)
        return W[:, 0], info


def check_dense_fits(n, arrays, instead):
    """Refuse, before any work, an exact fit on ``n`` training states whose ``n x n`` arrays would
    not fit in the machine's physical memory (the process would be killed part way, or swap for
    hours); nothing is checked where the platform does not say how much memory it has.

    Parameters
    ----------
    n : int
        The training states the exact filter keeps.
    arrays : int
        How many ``n x n`` float64 arrays its fit holds at its peak (measured for each filter).
    instead : str
        What to use instead, for the message (the filter's approximations that scale).
    """
    check_square_memory(n, arrays, "states", f"the exact filter on {n:,} training states",
                        f"use {instead}, or fewer training states")
