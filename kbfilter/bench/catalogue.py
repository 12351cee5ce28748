"""The benchmark's catalogue: which systems, which methods, and how each method is built.

A method is a named recipe: a factory that builds the estimator for a system, its kind (how the
runner treats it), and, for the kernel Bayes filters, the grid it is tuned on. Adding a method
is adding one entry here; nothing elsewhere parses method names.
"""

from dataclasses import dataclass, field
from typing import Callable

from sklearn.decomposition import PCA

from ..features import GaussianBlur, LearnedFeatures
from ..filters import ExtendedKalman, KernelBayesFilter, ParticleFilter, UnscentedKalman, WindowRegressor
from ..systems import CameraOrientation, MovingSprite, Oscillation, Rotation
from ..tuning import BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, SCALABLE_GRID

__all__ = ["Method", "SYSTEMS", "CATALOGUE", "METHODS", "DEFAULT_METHODS", "PROTOCOLS", "REFERENCE",
           "observes_images"]

SYSTEMS = {"rotation": Rotation, "oscillation": Oscillation, "sprite": MovingSprite, "camera": CameraOrientation}

#: the studies' protocols: (runs, training lengths). Rotation and oscillation follow Xu et al.
#: (2022, section 6.2); the image systems use 10 runs of 1,000 training steps.
PROTOCOLS = {"rotation": (30, (500, 1000)), "oscillation": (30, (500, 1000)), "sprite": (10, (1000,)),
             "camera": (10, (1000,))}

#: the method the others are compared with (Wilcoxon p-values, wins)
REFERENCE = "kbf-iw"


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
    """

    name: str
    kind: str
    build: Callable
    grids: dict = field(default_factory=dict)
    description: str = ""

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
_SCALABLE = {"vectors": SCALABLE_GRID, "images": IMAGE_GRID}

CATALOGUE = {m.name: m for m in (
    Method("kbf-iw", "tuned", _kbf("iw"), _RAW, "kernel Bayes filter, importance-weighted KBR"),
    Method("kbf-original", "tuned", _kbf("original"), _RAW, "kernel Bayes filter, original KBR"),
    Method("kbf-iw-nystrom", "tuned", _kbf("iw", approximation="nystrom"), _SCALABLE,
           "IW kernel Bayes filter on Nystrom low-rank kernels (the scalable path)"),
    Method("kbf-iw-nystrom-knn", "tuned", _kbf("iw", approximation="nystrom", transition="knn"), _SCALABLE,
           "scalable IW kernel Bayes filter with the localized kNN transition"),
    Method("kbf-iw-blur", "tuned", _kbf("iw", lambda: GaussianBlur(sigma=3.0, stride=2)), _BLUR,
           "IW kernel Bayes filter on blurred images"),
    Method("kbf-original-blur", "tuned", _kbf("original", lambda: GaussianBlur(sigma=3.0, stride=2)), _BLUR,
           "original kernel Bayes filter on blurred images"),
    Method("kbf-iw-pca", "tuned", _kbf("iw", lambda: PCA(30, random_state=0)), _FEATURES,
           "IW kernel Bayes filter on 30 PCA components"),
    Method("kbf-iw-learned", "tuned", _kbf("iw", lambda: LearnedFeatures(n_pca=20)), _FEATURES,
           "IW kernel Bayes filter on learned features"),
    Method("ekf", "known_model", lambda system, rng: ExtendedKalman(system), description="extended Kalman filter"),
    Method("ukf", "known_model", lambda system, rng: UnscentedKalman(system), description="unscented Kalman filter"),
    Method("pf", "known_model", lambda system, rng: ParticleFilter(system, n_particles=1000, rng=rng),
           description="bootstrap particle filter, 1,000 particles"),
    Method("pf-pixel", "known_model", lambda system, rng: ParticleFilter(system, n_particles=1000, rng=rng),
           description="bootstrap particle filter with the pixel likelihood, 1,000 particles"),
    Method("window-mlp", "trained", lambda system, rng: WindowRegressor(),
           description="MLP on the features of the last 10 frames"),
    Method("oracle-pf", "oracle",
           lambda system, rng: ParticleFilter(system.oracle_system(), n_particles=1000, rng=rng),
           description="particle filter that sees what generated each image (a reference)"),
)}

METHODS = tuple(CATALOGUE)

_LOW_DIMENSIONAL = ("kbf-iw", "kbf-original", "ekf", "ukf", "pf")
_IMAGES = ("kbf-iw", "kbf-original", "kbf-iw-blur", "kbf-iw-pca", "kbf-iw-learned", "pf-pixel", "window-mlp",
           "oracle-pf")
#: what ``kbfilter bench SYSTEM`` runs when no ``--methods`` are given
DEFAULT_METHODS = {"rotation": _LOW_DIMENSIONAL, "oscillation": _LOW_DIMENSIONAL, "sprite": _IMAGES,
                   "camera": _IMAGES}
