"""Step-time models. Importing this package registers every built-in one."""

from sim.cost import fitted, linear, roofline  # noqa: F401
from sim.cost.base import COST_MODELS, CostModel, StepShape
from sim.live import cost as live  # noqa: F401  (registers `live`; imports no torch)

__all__ = ["COST_MODELS", "CostModel", "StepShape"]
