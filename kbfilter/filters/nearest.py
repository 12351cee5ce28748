"""Localization baselines that look training images up by similarity.

:class:`NearestImage` answers with the state of the most similar training image (no motion, no
memory). :class:`NearestNeighbourParticleFilter` is a particle filter with the known motion
model and a likelihood built from the states of the training images nearest to the observation
(Vlassis, Terwijn and Kröse 2002): the method the robot-localization study of Kanagawa et al.
(2016) calls NN.
"""

from collections import Counter

import numpy as np
from scipy.special import logsumexp
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted

from .._validation import check_fraction, check_int, check_positive, check_rng, check_saved_matrix, \
    check_training_magnitude
from ..embedding import weighted_covariance
from ..kernels import median_distance
from ..persistence import Persistent, persistent, saved_before_fit
from ..threads import limited_blas
from .base import (TUNING_RECORD, LearnedFilter, SharedModel, check_loaded_estimates, check_model_states, check_motion,
                   motion_control_dimension, motion_of, probe_loaded, probe_prediction, sample_next, training_pairs,
                   tuning_record_holds)
from .grids import NEAREST_IMAGE_GRID, NEIGHBOUR_GRID
from .observation import ObservationSpace
from .outliers import check_outlier_quantile
from .particles import MAX_PARTICLES, DrawsFromOwnGenerator, HoldsParticles, ParticleBelief, ParticleWeightsAlias
from .smoothing import SmoothsParticleMoments

__all__ = ["NearestImage", "NearestNeighbourParticleFilter", "NeighbourLookup"]


@persistent("space", "states", "observations", "n_neighbors", holds={"space": "ObservationSpace"})
class NeighbourLookup(SharedModel):
    """What the look-up filters fit, read-only once built and shared by a filter's copies: a
    filter's ``forecast`` copies it, and filterpy's ``Saver`` deep-copies it every step, which
    would otherwise copy the training images each time.

    Parameters
    ----------
    space : ObservationSpace
        The observations' feature map and gate.
    states : ndarray of shape (n, dim_x)
        The training states.
    observations : ndarray of shape (n, d)
        The training observations in ``space`` (after its feature map), row for row with ``states``.
    n_neighbors : int
        How many neighbours a query returns (at most ``n``).

    Attributes
    ----------
    index : sklearn.neighbors.NearestNeighbors
        The neighbour index over ``observations``, built here (a saved lookup rebuilds it, and
        answers as the saved one did).
    """

    def __init__(self, space, states, observations, n_neighbors):
        # built by fit, or from a saved file (untrusted): each part must fit the others
        states = check_saved_matrix(states, "states")
        observations = check_saved_matrix(observations, "observations")
        if len(observations) != len(states):
            raise ValueError(f"observations: expected one per training state ({len(states)}), got {len(observations)}")
        if not isinstance(space, ObservationSpace):
            raise ValueError(f"space: expected an ObservationSpace, got {type(space).__name__}")
        space.check_width(observations.shape[1], "the training observations'")
        self.space, self.states, self.observations = space, states, observations
        self.n_neighbors = check_int(n_neighbors, "n_neighbors", maximum=len(states))
        self.index = NearestNeighbors(n_neighbors=self.n_neighbors).fit(observations)

    def _after_load(self):
        # a feature map from a file must make rows of the saved observations' width (fit's do; a
        # loaded space has already mapped an observation of zeros to a finite row)
        made, held = self.space.map(np.zeros(self.space.obs_shape)).shape[1], self.observations.shape[1]
        if made != held:
            raise ValueError(f"observations: {held} columns, where the feature map makes {made}")


class _ImageLookup(LearnedFilter):
    """Shared by both: the training states and a neighbour index over the observation features."""

    def _fit_lookup(self, states, observations, outlier_quantile=None, motion=None):
        X, Z, obs_shape = training_pairs(states, observations)
        check_model_states(motion, X, "motion")
        self.n_features_in_ = X.shape[1]
        space, Z = ObservationSpace.fitted(self.features, obs_shape, Z, X)
        if self.n_neighbors > len(X):
            # capped, every answer would have been the mean of the whole log, whatever the observation
            raise ValueError(f"n_neighbors: expected at most the {len(X)} training observations, got "
                             f"{self.n_neighbors}; pass a smaller n_neighbors or a longer log")
        self.model_ = NeighbourLookup(space.gated(Z, outlier_quantile), X, Z, self.n_neighbors)

    def check_params(self):
        check_int(self.n_neighbors, "n_neighbors")
        return self

    def _after_load(self):
        super()._after_load()
        if saved_before_fit(self, "model_"):  # fit checks the parameters
            return
        self.check_params()
        d = self.states_.shape[1]
        if self.n_features_in_ != d:
            raise ValueError(f"n_features_in_: expected the training states' dimension ({d}), got "
                             f"{self.n_features_in_!r}")
        check_loaded_estimates(self, d)

    @property
    def space_(self):
        """The observations' feature map and gate: :class:`~kbfilter.filters.observation.ObservationSpace`."""
        return self.model_.space

    @property
    def states_(self):
        """The training states: ndarray of shape (n, dim_x)."""
        return self.model_.states

    @property
    def index_(self):
        """The neighbour index over the training observations' features: ``NearestNeighbors``."""
        return self.model_.index

    @property
    def obs_shape_(self):
        """Shape of one training observation."""
        return self.space_.obs_shape

    @property
    def features_(self):
        """The fitted observation feature map, or None."""
        return self.space_.features

    def _neighbours(self, row):
        """Distances to the training observations nearest to the mapped observation ``row`` and
        their indices, nearest first."""
        distances, indices = self.index_.kneighbors(row)
        return distances[0], indices[0]


@persistent("model_", "n_features_in_", "x", "P", "x_prior", "P_prior", "x_post", "P_post", *TUNING_RECORD,
            holds={"model_": "NeighbourLookup", "features": "TransformerMixin",
                   **tuning_record_holds("TransformerMixin")})
class NearestImage(Persistent, _ImageLookup):
    """The state of the training image most like the observation (NAI); no dynamics.

    Parameters
    ----------
    n_neighbors : int, default=1
        Average the states of this many nearest training images (1: the nearest one's; at most
        the number of training images).
    features : "auto", transformer or None, default="auto"
        The map the images are compared through, as for :class:`~kbfilter.KernelBayesFilter`
        (images are blurred by default; None compares raw pixels).

    Examples
    --------
    >>> import kbfilter as kb
    >>> states, obs = kb.systems.Rotation().simulate(200, rng=0)
    >>> nai = NearestImage().fit(states, obs)
    >>> nai.batch_filter(obs[:3])[0].shape
    (3, 2)
    """

    def __init__(self, n_neighbors=1, features="auto"):
        self.n_neighbors = n_neighbors
        self.features = features

    @limited_blas
    def fit(self, states, observations, *, controls=None):
        """Index the training observations.

        Parameters
        ----------
        states : array-like of shape (n, dim_x), or a list of such arrays
            Training states.
        observations : array-like, or a list of arrays
            The observation at each training state.
        controls : ignored
            Accepted so that every filter fits with the same call.

        Returns
        -------
        self : NearestImage
            The fitted baseline.
        """
        self.check_params()
        self._fit_lookup(states, observations)
        return self.reset()

    def _grid_for(self, obs_shape):
        return NEAREST_IMAGE_GRID

    def reset(self):
        """Forget the last answer: the estimate is the mean training state.

        Returns
        -------
        self : NearestImage
            The baseline.
        """
        check_is_fitted(self, "model_")
        self._events = Counter()
        self._set_estimate("prior", self.states_.mean(axis=0), np.atleast_2d(np.cov(self.states_.T)))
        self._set_estimate("post", self.x, self.P)
        return self

    def predict(self, u=None):
        """Keep the last answer (no motion model).

        Parameters
        ----------
        u : ignored
            The control.
        """
        self.x_prior, self.P_prior = self.x.copy(), self.P.copy()

    @limited_blas
    def update(self, z):
        """Answer with the state(s) of the nearest training image(s).

        Parameters
        ----------
        z : array-like or None
            The observation; None keeps the last answer.
        """
        check_is_fitted(self, "model_")
        if z is None:
            self._keep_prediction()
            return
        near = self.states_[self._neighbours(self.space_.map(z))[1]]
        self._set_estimate("post", near.mean(axis=0), weighted_covariance(near))


@persistent("model_", "n_features_in_", "width_", "rng_state", "belief", "x", "P", "x_prior", "P_prior", "x_post",
            "P_post", *TUNING_RECORD,
            holds={"model_": "NeighbourLookup", "belief": "ParticleBelief", "motion": "System", "transition": "System",
                   "features": "TransformerMixin", **tuning_record_holds("System", "TransformerMixin")})
class NearestNeighbourParticleFilter(Persistent, HoldsParticles, SmoothsParticleMoments, DrawsFromOwnGenerator,
                                     ParticleWeightsAlias, _ImageLookup):
    """A particle filter whose likelihood comes from the nearest training images (NN).

    The ``n_neighbors`` training observations nearest to ``z`` vote with their states: a
    particle at ``x`` gets the likelihood ``sum_m exp(-||x - x_m||^2 / (2 h^2))`` (plus a floor of
    ``1e-3`` of its largest value, so that particles far from every vote keep a little weight),
    with ``h = scale`` times the median distance between training states.
    The prediction samples the known motion model.

    Parameters
    ----------
    motion : System or callable
        The motion model, as for :class:`~kbfilter.KernelMonteCarloFilter`.
    n_particles : int, default=1000
        The number of particles (at most :data:`~kbfilter.filters.particles.MAX_PARTICLES`).
    n_neighbors : int, default=10
        The training images that vote (at most the number of training images).
    scale : float, default=0.1
        The votes' width ``h``, as a multiple of the median distance between training states.
    features : "auto", transformer or None, default="auto"
        The map the images are compared through.
    ess_threshold : float in (0, 1], default=0.5
        Resample (systematically) when the effective sample size is below this fraction.
    outlier_quantile : float in (0, 1] or None, default=None
        Gate the observations, as :class:`~kbfilter.KernelMonteCarloFilter` does: an observation
        farther from every training observation than this quantile of their distances to their
        nearest neighbour leaves the prediction as it is. None uses every observation.
    random_state : int, Generator or None, default=None
        Seeds the particles, the motion's draws and the resampling.
    transition : deprecated
        The old name of ``motion`` (a ``FutureWarning`` at fit).

    Attributes
    ----------
    particles : ndarray of shape (n_particles, dim_x)
        The current particles.
    particle_weights : ndarray of shape (n_particles,)
        Their normalised weights (``weights`` is a deprecated name for them).
    gate_ : OutlierGate or None
        The fitted gate (see :class:`~kbfilter.filters.outliers.OutlierGate`).
    diagnostics : collections.Counter
        ``"outlier"``: the observations the gate set aside since the last reset.

    Examples
    --------
    >>> import kbfilter as kb
    >>> system = kb.systems.Rotation()
    >>> states, obs = system.simulate(300, rng=0)
    >>> nn = NearestNeighbourParticleFilter(system, n_particles=200, random_state=0).fit(states, obs)
    >>> nn.batch_filter(obs[:3])[0].shape
    (3, 2)
    """

    _noise_source = "its motion sampler and the observation model it learned"

    def __init__(self, motion=None, n_particles=1000, n_neighbors=10, scale=0.1, features="auto",
                 ess_threshold=0.5, outlier_quantile=None, random_state=None, transition=None):
        self.motion = motion
        self.n_particles = n_particles
        self.n_neighbors = n_neighbors
        self.scale = scale
        self.features = features
        self.ess_threshold = ess_threshold
        self.outlier_quantile = outlier_quantile
        self.random_state = random_state
        self.transition = transition  # deprecated: motion

    @limited_blas
    def fit(self, states, observations, *, controls=None):
        """Index the training observations; draw the particles from the training states.

        Parameters
        ----------
        states : array-like of shape (n, dim_x), or a list of such arrays
            Training states.
        observations : array-like, or a list of arrays
            The observation at each training state.
        controls : ignored
            Accepted so that every filter fits with the same call; the motion is ``motion``.

        Returns
        -------
        self : NearestNeighbourParticleFilter
            The fitted filter.
        """
        motion_of(self, warn=True)  # the deprecated name warns once a fit; check_params checks the motion
        self.check_params()
        self._fit_lookup(states, observations, self.outlier_quantile, motion_of(self))
        self.width_ = self.scale * median_distance(self.states_)
        return self.reset()

    def check_params(self):
        check_motion(motion_of(self))
        check_int(self.n_particles, "n_particles", minimum=2, maximum=MAX_PARTICLES)
        check_fraction(self.ess_threshold, "ess_threshold")
        check_outlier_quantile(self.outlier_quantile)
        check_positive(self.scale, "scale")
        return super().check_params()

    def _grid_for(self, obs_shape):
        return NEIGHBOUR_GRID

    def _after_load(self):
        super()._after_load()
        if saved_before_fit(self, "model_"):
            return
        d = self.states_.shape[1]
        if self.belief.particles.shape[1] != d:
            raise ValueError(f"belief: expected particles of the training states' dimension ({d}), got "
                             f"{self.belief.particles.shape[1]}")
        check_training_magnitude(check_positive(self.width_, "width_"), "width_")
        probe_loaded(self, self._probe)

    @staticmethod
    def _probe(filt):
        # one prediction and one update by the first training observation's neighbours (see probe_loaded)
        probe_prediction(filt)
        filt._weigh(filt.model_.observations[:1])
        return filt.x_prior, filt.P_prior, filt.belief.weights

    @property
    def gate_(self):
        """The fitted gate (see :class:`~kbfilter.filters.outliers.OutlierGate`), or None."""
        return self.space_.gate

    def reset(self):
        """Particles drawn uniformly from the training states, with equal weights.

        Returns
        -------
        self : NearestNeighbourParticleFilter
            The filter.
        """
        check_is_fitted(self, "model_")
        self.check_params()  # set_params after fit reaches here first: a bad value is named
        self._events = Counter()
        self._rng = check_rng(self.random_state)
        self.belief = ParticleBelief.drawn_from(self.states_, self.n_particles, self._rng)
        self._estimate_particles("prior", "post")
        return self

    def _control_dimension(self):
        return motion_control_dimension(motion_of(self))

    def predict(self, u=None):
        """Move every particle by a draw of the motion model.

        Parameters
        ----------
        u : array-like or None, default=None
            The control passed to ``motion``.
        """
        check_is_fitted(self, "model_")
        before = self.belief.particles
        self.belief.particles = sample_next(motion_of(self), before, u, self._rng)
        self._moved(before)
        self._estimate_particles("prior")

    @limited_blas
    def update(self, z):
        """Weight the particles by the neighbours' votes; resample when the ESS is low.

        Parameters
        ----------
        z : array-like or None
            The observation; None and an outlier (see ``outlier_quantile``) keep the prediction.
        """
        check_is_fitted(self, "model_")
        if z is None or not self._weigh(self.space_.map(z)):
            self._keep_prediction()
            return
        self._estimate_particles("post")
        self.belief.resample_if_due(self.ess_threshold, self._rng)

    def _weigh(self, row):
        """Weight the particles by the votes of the neighbours of ``row`` (an observation in the
        space), unless the gate sets it aside; whether it did not."""
        distances, neighbours = self._neighbours(row)  # the gate's nearest distance comes with the votes
        if not self.space_.admits(row, distances[0]):
            self._record("outlier")
            return False
        votes = self.states_[neighbours]
        sq = np.sum((self.belief.particles[:, None, :] - votes[None, :, :]) ** 2, axis=2)
        loglik = logsumexp(-sq / (2 * self.width_**2), axis=1)
        self.belief.reweight_log(np.logaddexp(loglik, loglik.max() + np.log(1e-3)))
        return True
