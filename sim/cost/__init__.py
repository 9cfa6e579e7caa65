"""Step-time models. Importing this package registers every built-in one."""

from sim.cost import fitted, linear, roofline  # noqa: F401
from sim.cost.base import COST_MODELS, CostModel, StepShape

__all__ = ["COST_MODELS", "CostModel", "StepShape"]
