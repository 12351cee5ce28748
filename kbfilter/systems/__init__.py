"""State-space systems with known models: simulators, and the models classical filters need."""

from .base import System, controlled_run, finite_difference_jacobian
from .circular import Oscillation, Rotation
from .camera import CameraOrientation
from .linear import ControlledLinearGaussian, LinearGaussian, LinearGaussianSensor
from .robot import RobotInRoom
from .sprite import MovingSprite
from .tracking import ConstantVelocity, CoordinatedTurn, PositionFixes, RangeBearing, dropouts

__all__ = ["System", "Rotation", "Oscillation", "LinearGaussian", "ControlledLinearGaussian", "MovingSprite",
           "CameraOrientation", "RobotInRoom", "finite_difference_jacobian", "controlled_run",
           "ConstantVelocity", "CoordinatedTurn", "PositionFixes", "RangeBearing", "dropouts", "LinearGaussianSensor"]
