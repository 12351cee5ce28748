"""Sequential filter objects (filterpy-style, 1-D ``x`` and ``z``)."""

from .classical import ExtendedKalman, ParticleFilter, UnscentedKalman
from .kbf import KernelBayesFilter
from .window import WindowRegressor

__all__ = ["KernelBayesFilter", "WindowRegressor", "ExtendedKalman", "UnscentedKalman", "ParticleFilter"]
