"""Sequential filter objects (filterpy-style, 1-D ``x`` and ``z``)."""

from .classical import ExtendedKalman, ParticleFilter, UnscentedKalman
from .kbf import KernelBayesFilter

__all__ = ["KernelBayesFilter", "ExtendedKalman", "UnscentedKalman", "ParticleFilter"]
