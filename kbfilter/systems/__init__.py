"""State-space systems with known models: simulators, and the models classical filters need."""

from .base import System
from .circular import Oscillation, Rotation

__all__ = ["System", "Rotation", "Oscillation"]
