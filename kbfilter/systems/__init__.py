"""State-space systems with known models: simulators, and the models classical filters need."""

from .base import System
from .circular import Oscillation, Rotation
from .linear import LinearGaussian

__all__ = ["System", "Rotation", "Oscillation", "LinearGaussian"]
