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
from ..filters.grids import (BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, LOCAL_BLUR_GRID, LOCAL_GRID,
                             MONTE_CARLO_IMAGE_GRID, MONTE_CARLO_SCALABLE_IMAGE_GRID, NEIGHBOUR_GRID,
                             SCALABLE_BLUR_GRID, SCALABLE_GRID)
from ..systems import CameraOrientation, MovingSprite, Oscillation, RobotInRoom, Rotation

__all__ = ["Method", "BenchSystem", "BENCH_SYSTEMS", "register_system", "SYSTEMS", "CATALOGUE", "METHODS",
           "DEFAULT_METHODS", "PROTOCOLS", "REFERENCE", "GATE_QUANTILE",
           "observes_images", "reference_method", "make_system"]

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


#: the method the others are compared with (Wilcoxon p-values, wins), unless a system names another
REFERENCE = "kbf-iw"


def reference_method(system, chosen=None, methods=None):
    """The method a system's benchmark compares the others with.

    Parameters
    ----------
    system : str
        A name in :data:`SYSTEMS`.
    chosen : str or None, default=None
        The user's choice (``--reference``), which wins when given.
    methods : sequence of str, optional
        The methods that run: a system's reference that is not among them cannot be compared
        with, and the first of them is the reference instead.

    Returns
    -------
    str
        ``chosen``, or else the system's reference (:attr:`BenchSystem.reference`) when it runs,
        or else the first of ``methods``.
    """
    if chosen is not None:
        return chosen
    reference = BENCH_SYSTEMS[system].reference
    return reference if methods is None or reference in methods else list(methods)[0]


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
    controls : bool
        It takes a controlled system's controls (at fit and each step); False for a method that
        reads the state from the observations alone and refuses them (the window regressor), which
        the runner then gives none.
    """

    name: str
    kind: str
    build: Callable
    grids: dict = field(default_factory=dict)
    description: str = ""
    stochastic: bool = False
    controls: bool = True

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
    Method("kbf-iw-local", "tuned", _kbf("iw", approximation="local"), {"vectors": LOCAL_GRID, "images": IMAGE_GRID},
           "IW kernel Bayes filter with its belief on at most 256 training states (a step that does not grow "
           "with T)"),
    Method("kbf-iw-blur-local", "tuned", _kbf("iw", lambda: GaussianBlur(sigma=3.0, stride=2), approximation="local",
                                              support=128, prior_neighbors=3),
           {"vectors": LOCAL_GRID, "images": LOCAL_BLUR_GRID},
           "IW kernel Bayes filter on blurred images with its belief on at most 128 training frames, each bringing "
           "its 3 nearest into the update (long logs of images)"),
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
           description="MLP on the features of the last 10 frames", controls=False),
    Method("oracle-pf", "oracle",
           lambda system, rng: ParticleFilter(system.oracle_system(), n_particles=1000, rng=rng),
           description="particle filter that sees what generated each image (a reference)", stochastic=True),
)}

METHODS = tuple(CATALOGUE)

_LOW_DIMENSIONAL = ("kbf-iw", "kbf-original", "ekf", "ukf", "pf")
_IMAGES = ("kbf-iw", "kbf-original", "kbf-iw-blur", "kbf-iw-pca", "kbf-iw-learned", "pf-pixel", "window-mlp",
           "oracle-pf")
_FRAMES = ("kbf-iw", "kbf-iw-blur", "kbf-iw-learned", "pf-pixel")


@dataclass(frozen=True)
class BenchSystem:
    """A system the benchmark runs, with everything the runner, the report and the command line
    need to know about it, registered once (:func:`register_system`).

    Parameters
    ----------
    name : str
        What ``kbfilter bench NAME`` calls it.
    factory : type
        The system's class (built with its defaults, or ``system_params``).
    protocol : (int, tuple of int)
        The study's runs and training lengths (the scenario scripts' defaults).
    default_methods : tuple of str
        What runs when no ``--methods`` are given (names in :data:`CATALOGUE`).
    quick_runs : int
        Runs of ``kbfilter bench NAME`` without ``--runs`` (fewer than 6 where 6 would not finish in
        about 5 minutes on 2 cores).
    reference : str
        The method the others are compared with.
    frame_methods : tuple of str
        The methods whose estimates the image figure (``frames.png``) marks, when they ran.
    """

    name: str
    factory: type
    protocol: tuple
    default_methods: tuple
    quick_runs: int = 6
    reference: str = REFERENCE
    frame_methods: tuple = ()


#: the registered systems, name -> :class:`BenchSystem`
BENCH_SYSTEMS = {}
# views of the registry, by the names the rest of the package and the scripts use
SYSTEMS = {}
PROTOCOLS = {}
#: what ``kbfilter bench SYSTEM`` runs when no ``--methods`` are given
DEFAULT_METHODS = {}


def register_system(system):
    """Add a system to the benchmark.

    Parameters
    ----------
    system : BenchSystem
        The system; its methods must be in :data:`CATALOGUE`.

    Returns
    -------
    BenchSystem
        ``system``.
    """
    unknown = [m for m in (*system.default_methods, system.reference, *system.frame_methods) if m not in CATALOGUE]
    if unknown:
        raise ValueError(f"system: {system.name} names methods that are not in the catalogue: {unknown}")
    BENCH_SYSTEMS[system.name] = system
    SYSTEMS[system.name] = system.factory
    PROTOCOLS[system.name] = system.protocol
    DEFAULT_METHODS[system.name] = system.default_methods
    return system


# Rotation and oscillation follow Xu et al. (2022, section 6.2); the image systems use 10 runs of
# 1,000 training steps; localization adds the 200 poses of Fukumizu (2014) and a longer log, and
# its question is the Kernel Monte Carlo filter's.
register_system(BenchSystem("rotation", Rotation, (30, (500, 1000)), _LOW_DIMENSIONAL))
register_system(BenchSystem("oscillation", Oscillation, (30, (500, 1000)), _LOW_DIMENSIONAL))
register_system(BenchSystem("sprite", MovingSprite, (10, (1000,)), _IMAGES, quick_runs=4, frame_methods=_FRAMES))
register_system(BenchSystem("camera", CameraOrientation, (10, (1000,)), _IMAGES, quick_runs=4,
                            frame_methods=_FRAMES))
register_system(BenchSystem(
    "localization", RobotInRoom, (10, (200, 1000, 5000)),
    ("nai-blur", "nn-pf-blur-gated", "kbf-iw-blur-gated", "kmc-iw-blur", "kmc-original-blur", "kmc-iw-ratio-blur",
     "kmc-iw-ratio-blur-gated", "pf-pixel"), quick_runs=2, reference="kmc-iw-ratio-blur-gated"))
