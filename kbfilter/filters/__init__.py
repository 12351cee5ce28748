"""Sequential filter objects (filterpy-style, 1-D ``x`` and ``z``)."""

from .classical import ExtendedKalman, InteractingMultipleModel, ParticleFilter, UnscentedKalman
from .kbf import KernelBayesFilter
from .kmc import KernelMonteCarloFilter
from .motion import LearnedMotion, LearnedMotionFilter
from .nearest import NearestImage, NearestNeighbourParticleFilter
from .smoothing import kernel_smoother
from .window import WindowRegressor

__all__ = ["KernelBayesFilter", "KernelMonteCarloFilter", "LearnedMotion", "LearnedMotionFilter", "NearestImage", "NearestNeighbourParticleFilter", "WindowRegressor", "ExtendedKalman", "UnscentedKalman", "ParticleFilter", "InteractingMultipleModel", "kernel_smoother"]
