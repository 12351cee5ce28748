"""The benchmark's catalogue: which systems, which methods, and how each method is built.

A method is a named recipe: a factory that builds the estimator for a system, its kind (how the
runner treats it), and, for the kernel Bayes filters, the grid it is tuned on. Adding a method
is adding one entry here; nothing elsewhere parses method names.
"""

import inspect
from dataclasses import dataclass, field
from typing import Callable

from sklearn.decomposition import PCA

from .._validation import check_choice
from ..features import GaussianBlur, LearnedFeatures
from ..filters import (ExtendedKalman, KernelBayesFilter, KernelMonteCarloFilter, NearestImage,
                       NearestNeighbourParticleFilter, ParticleFilter, UnscentedKalman, WindowRegressor)
from ..systems import CameraOrientation, MovingSprite, Oscillation, RobotInRoom, Rotation
from ..tuning import (BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, MONTE_CARLO_IMAGE_GRID,
                      MONTE_CARLO_SCALABLE_IMAGE_GRID, NEIGHBOUR_GRID, SCALABLE_BLUR_GRID, SCALABLE_GRID)

__all__ = ["Method", "SYSTEMS", "CATALOGUE", "METHODS", "DEFAULT_METHODS", "PROTOCOLS", "REFERENCE", "GATE_QUANTILE",
           "observes_images", "reference_method", "make_system"]

SYSTEMS = {"rotation": Rotation, "oscillation": Oscillation, "sprite": MovingSprite, "camera": CameraOrientation,
           "localization": RobotInRoom}


def make_system(name, params=None):
    """The benchmark system ``name``, built with ``params`` in place of its defaults.

    Parameters
    ----------
    name : str
        A name in :data:`SYSTEMS`.
    params : dict, optional
        Keyword arguments of the system's class, e.g. ``{"distinct_walls": False}`` for
        ``localization``.

    Returns
    -------
    System
        A new instance.

    Raises
    ------
    ValueError
        Naming ``system_params`` when a parameter is not one of the class's or its value is refused.
    """
    cls = SYSTEMS[check_choice(name, "system", tuple(SYSTEMS))]
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise ValueError(f"system_params: expected a dict of {cls.__name__}'s parameters, got {params!r}")
    accepted = list(inspect.signature(cls).parameters)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"system_params: {cls.__name__} has no parameter {unknown[0]!r}; it takes "
                         f"{', '.join(accepted) or 'none'}")
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"system_params: {exc}") from exc


#: the studies' protocols: (runs, training lengths). Rotation and oscillation follow Xu et al.
#: (2022, section 6.2); the image systems use 10 runs of 1,000 training steps; localization
#: adds the 200 poses of Fukumizu (2014) and a longer log.
PROTOCOLS = {"rotation": (30, (500, 1000)), "oscillation": (30, (500, 1000)), "sprite": (10, (1000,)),
             "camera": (10, (1000,)), "localization": (10, (200, 1000, 5000))}

#: the method the others are compared with (Wilcoxon p-values, wins)
REFERENCE = "kbf-iw"
#: where the question is another method's: the Kernel Monte Carlo filter on the robot
_REFERENCES = {"localization": "kmc-iw-ratio-blur-gated"}


def reference_method(system, chosen=None):
    """The method a system's benchmark compares the others with.

    Parameters
    ----------
    system : str
        A name in :data:`SYSTEMS`.
    chosen : str or None, default=None
        The user's choice (``--reference``), which wins when given.

    Returns
    -------
    str
        ``chosen``, or else a name in :data:`CATALOGUE`: :data:`REFERENCE` unless the system's
        study asks about another method.
    """
    return _REFERENCES.get(system, REFERENCE) if chosen is None else chosen


def observes_images(system):
    """True when the system's observations are images (more than one axis)."""
    return system.obs_shape is not None and len(system.obs_shape) > 1


@dataclass(frozen=True)
class Method:
    """One benchmark method.

    Attributes
    ----------
    name : str
    kind : {"tuned", "trained", "known_model", "oracle"}
        ``tuned``: learned from the training run, hyperparameters chosen by ``tune_filter`` on
        ``grid``; ``trained``: learned with its defaults; ``known_model``: given the true
        system; ``oracle``: given the true system and what generated each observation (a
        reference, not a competitor).
    build : callable
        ``build(system, rng)`` returns an unfitted estimator or a ready filter.
    grids : dict
        For ``tuned`` methods: ``{"vectors": grid, "images": grid}`` by the kind of observation.
    description : str
    stochastic : bool
        Its estimates depend on its random draws (a particle filter): the runner can average it
        over several seeds (``filter_seeds``).
    """

    name: str
    kind: str
    build: Callable
    grids: dict = field(default_factory=dict)
    description: str = ""
    stochastic: bool = False

    def grid(self, system):
        """The tuning grid for ``system`` (None for methods that are not tuned)."""
        if self.kind != "tuned":
            return None
        return self.grids["images" if observes_images(system) else "vectors"]


def _kbf(rule, features=None, **params):
    return lambda system, rng: KernelBayesFilter(rule=rule, features=features() if features else None, **params)


_RAW = {"vectors": DEFAULT_GRID, "images": IMAGE_GRID}
_FEATURES = {"vectors": FEATURE_GRID, "images": FEATURE_GRID}
_BLUR = {"vectors": BLUR_GRID, "images": BLUR_GRID}
_BLUR_SCALABLE = {"vectors": SCALABLE_GRID, "images": SCALABLE_BLUR_GRID}
_SCALABLE = {"vectors": SCALABLE_GRID, "images": IMAGE_GRID}
_MONTE_CARLO = {"vectors": DEFAULT_GRID, "images": MONTE_CARLO_IMAGE_GRID}
_MONTE_CARLO_SCALABLE = {"vectors": SCALABLE_GRID, "images": MONTE_CARLO_SCALABLE_IMAGE_GRID}
_NEIGHBOURS = {"vectors": NEIGHBOUR_GRID, "images": NEIGHBOUR_GRID}
_BLURRED = "auto"  # the filters' default map in front of image kernels: a Gaussian blur


#: the outlier gate of the ``-gated`` methods (``outlier_quantile``)
GATE_QUANTILE = 0.99


def _kmc(rule, features, resample="herding", approximation="exact", outlier_quantile=None):
    return lambda system, rng: KernelMonteCarloFilter(system, n_particles=1000, rule=rule, features=features,
                                                      resample=resample, approximation=approximation,
                                                      outlier_quantile=outlier_quantile, random_state=rng)


def _nn_pf(features, outlier_quantile=None):
    return lambda system, rng: NearestNeighbourParticleFilter(system, n_particles=1000, features=features,
                                                              outlier_quantile=outlier_quantile, random_state=rng)

CATALOGUE = {m.name: m for m in (
    Method("kbf-iw", "tuned", _kbf("iw"), _RAW, "kernel Bayes filter, importance-weighted KBR"),
    Method("kbf-original", "tuned", _kbf("original"), _RAW, "kernel Bayes filter, original KBR"),
    Method("kbf-iw-nystrom", "tuned", _kbf("iw", approximation="nystrom"), _SCALABLE,
           "IW kernel Bayes filter on Nystrom low-rank kernels (the scalable path)"),
    Method("kbf-iw-nystrom-knn", "tuned", _kbf("iw", approximation="nystrom", transition="knn"), _SCALABLE,
           "scalable IW kernel Bayes filter with the localized kNN transition"),
    Method("kbf-iw-gated", "tuned", _kbf("iw", outlier_quantile=GATE_QUANTILE), _RAW,
           "IW kernel Bayes filter, outliers gated"),
    Method("kbf-iw-blur", "tuned", _kbf("iw", lambda: GaussianBlur(sigma=3.0, stride=2)), _BLUR,
           "IW kernel Bayes filter on blurred images"),
    Method("kbf-iw-blur-gated", "tuned", _kbf("iw", lambda: GaussianBlur(sigma=3.0, stride=2),
                                              outlier_quantile=GATE_QUANTILE), _BLUR,
           "IW kernel Bayes filter on blurred images, outliers gated"),
    Method("kbf-iw-blur-nystrom-gated", "tuned",
           _kbf("iw", lambda: GaussianBlur(sigma=3.0, stride=2), approximation="nystrom",
                outlier_quantile=GATE_QUANTILE), _BLUR_SCALABLE,
           "IW kernel Bayes filter on Nystrom kernels (long logs; a controlled transition too), blurred images, "
           "outliers gated"),
    Method("kbf-original-blur", "tuned", _kbf("original", lambda: GaussianBlur(sigma=3.0, stride=2)), _BLUR,
           "original kernel Bayes filter on blurred images"),
    Method("kbf-iw-pca", "tuned", _kbf("iw", lambda: PCA(30, random_state=0)), _FEATURES,
           "IW kernel Bayes filter on 30 PCA components"),
    Method("kbf-iw-learned", "tuned", _kbf("iw", lambda: LearnedFeatures(n_pca=20)), _FEATURES,
           "IW kernel Bayes filter on learned features"),
    Method("ekf", "known_model", lambda system, rng: ExtendedKalman(system), description="extended Kalman filter"),
    Method("ukf", "known_model", lambda system, rng: UnscentedKalman(system), description="unscented Kalman filter"),
    Method("pf", "known_model", lambda system, rng: ParticleFilter(system, n_particles=1000, rng=rng),
           description="bootstrap particle filter, 1,000 particles", stochastic=True),
    Method("pf-pixel", "known_model", lambda system, rng: ParticleFilter(system, n_particles=1000, rng=rng),
           description="bootstrap particle filter with the pixel likelihood, 1,000 particles", stochastic=True),
    Method("kmc-iw", "tuned", _kmc("iw", None), _MONTE_CARLO,
           "Kernel Monte Carlo filter (sampled motion, IW-KBR update, herding), 1,000 particles", stochastic=True),
    Method("kmc-iw-blur", "tuned", _kmc("iw", _BLURRED), _MONTE_CARLO,
           "Kernel Monte Carlo filter on blurred images", stochastic=True),
    Method("kmc-iw-blur-gated", "tuned", _kmc("iw", _BLURRED, outlier_quantile=GATE_QUANTILE), _MONTE_CARLO,
           "Kernel Monte Carlo filter on blurred images, outliers gated", stochastic=True),
    Method("kmc-original-blur", "tuned", _kmc("original", _BLURRED), _MONTE_CARLO,
           "Kernel Monte Carlo filter with the original KBR, blurred images", stochastic=True),
    Method("kmc-iw-ratio", "tuned", _kmc("iw", None, "ratio"), _MONTE_CARLO,
           "Kernel Monte Carlo filter, particles weighted by the posterior-to-prior embedding ratio",
           stochastic=True),
    Method("kmc-iw-ratio-gated", "tuned", _kmc("iw", None, "ratio", outlier_quantile=GATE_QUANTILE), _MONTE_CARLO,
           "Kernel Monte Carlo filter with the embedding ratio, outliers gated", stochastic=True),
    Method("kmc-iw-ratio-blur", "tuned", _kmc("iw", _BLURRED, "ratio"), _MONTE_CARLO,
           "Kernel Monte Carlo filter with the embedding ratio, blurred images", stochastic=True),
    Method("kmc-iw-ratio-blur-gated", "tuned", _kmc("iw", _BLURRED, "ratio", outlier_quantile=GATE_QUANTILE),
           _MONTE_CARLO, "Kernel Monte Carlo filter with the embedding ratio, blurred images, outliers gated",
           stochastic=True),
    Method("kmc-iw-ratio-nystrom-gated", "tuned", _kmc("iw", None, "ratio", "nystrom", outlier_quantile=GATE_QUANTILE),
           _MONTE_CARLO_SCALABLE,
           "Kernel Monte Carlo filter with the embedding ratio on Nystrom kernels, raw pixels, outliers gated",
           stochastic=True),
    Method("kmc-iw-ratio-blur-nystrom", "tuned", _kmc("iw", _BLURRED, "ratio", "nystrom"), _MONTE_CARLO_SCALABLE,
           "Kernel Monte Carlo filter with the embedding ratio on Nystrom kernels (long logs), blurred images",
           stochastic=True),
    Method("kmc-iw-ratio-blur-nystrom-gated", "tuned",
           _kmc("iw", _BLURRED, "ratio", "nystrom", outlier_quantile=GATE_QUANTILE), _MONTE_CARLO_SCALABLE,
           "Kernel Monte Carlo filter with the embedding ratio on Nystrom kernels, blurred images, outliers gated",
           stochastic=True),
    Method("nai", "trained", lambda system, rng: NearestImage(features=None),
           description="the state of the nearest training image (no motion model)"),
    Method("nai-blur", "trained", lambda system, rng: NearestImage(features=_BLURRED),
           description="the state of the nearest training image, blurred images"),
    Method("nn-pf", "tuned", _nn_pf(None), _NEIGHBOURS,
           "particle filter with a nearest-training-images likelihood (Vlassis et al. 2002)", stochastic=True),
    Method("nn-pf-gated", "tuned", _nn_pf(None, GATE_QUANTILE), _NEIGHBOURS,
           "nearest-neighbour particle filter, outliers gated", stochastic=True),
    Method("nn-pf-blur", "tuned", _nn_pf(_BLURRED), _NEIGHBOURS,
           "nearest-neighbour particle filter on blurred images", stochastic=True),
    Method("nn-pf-blur-gated", "tuned", _nn_pf(_BLURRED, GATE_QUANTILE), _NEIGHBOURS,
           "nearest-neighbour particle filter on blurred images, outliers gated", stochastic=True),
    Method("window-mlp", "trained", lambda system, rng: WindowRegressor(),
           description="MLP on the features of the last 10 frames"),
    Method("oracle-pf", "oracle",
           lambda system, rng: ParticleFilter(system.oracle_system(), n_particles=1000, rng=rng),
           description="particle filter that sees what generated each image (a reference)", stochastic=True),
)}

METHODS = tuple(CATALOGUE)

_LOW_DIMENSIONAL = ("kbf-iw", "kbf-original", "ekf", "ukf", "pf")
_IMAGES = ("kbf-iw", "kbf-original", "kbf-iw-blur", "kbf-iw-pca", "kbf-iw-learned", "pf-pixel", "window-mlp",
           "oracle-pf")
#: what ``kbfilter bench SYSTEM`` runs when no ``--methods`` are given
DEFAULT_METHODS = {"rotation": _LOW_DIMENSIONAL, "oscillation": _LOW_DIMENSIONAL, "sprite": _IMAGES,
                   "camera": _IMAGES,
                   "localization": ("nai-blur", "nn-pf-blur-gated", "kbf-iw-blur-gated", "kmc-iw-blur",
                                    "kmc-original-blur", "kmc-iw-ratio-blur", "kmc-iw-ratio-blur-gated", "pf-pixel")}
