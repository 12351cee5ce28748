"""State-space systems with known models: simulators, and the models classical filters need."""

from .base import System
from .circular import Oscillation, Rotation
from .camera import CameraOrientation
from .linear import ControlledLinearGaussian, LinearGaussian
from .robot import RobotInRoom
from .sprite import MovingSprite

__all__ = ["System", "Rotation", "Oscillation", "LinearGaussian", "ControlledLinearGaussian", "MovingSprite",
           "CameraOrientation", "RobotInRoom"]
