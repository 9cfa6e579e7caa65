"""A registry-backed choice in the config tree: ``{name: <policy>, <its params>...}``.

The scenario says ``cost: {name: linear, base_ms: 5}``; the ``name`` picks a class
from a registry and the remaining keys must validate against that class's
``Params`` model (unknown keys rejected, each field with its unit in the help). A bare
name is the choice with default parameters: ``router: least_outstanding`` (so
``--set cluster.router=least_outstanding`` works) is ``{name: least_outstanding}``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim.config.errors import describe
from sim.registry import Registry


def first_error(err: ValidationError, root: type[BaseModel] | None = None) -> str:
    """One line for the first problem in a pydantic error (plus a count of the rest)."""
    return describe(err, root)


class RegistryChoice(BaseModel):
    """Base of ``scheduler``, ``kv`` and ``cost`` sections."""

    model_config = ConfigDict(extra="allow", frozen=True)
    registry: ClassVar[Registry]
    default: ClassVar[str]

    name: str = Field(description="Registered policy name (see `servesim policies`).")

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data):
        return {"name": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _validate_params(self):
        try:
            cls = self.registry.get(self.name)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        try:
            cls.Params(**self.extras)
        except ValidationError as e:
            raise ValueError(f"{self.name}: {describe(e, cls.Params)}") from None
        return self

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def cls(self):
        return self.registry.get(self.name)

    @property
    def params(self) -> BaseModel:
        return self.cls.Params(**self.extras)
