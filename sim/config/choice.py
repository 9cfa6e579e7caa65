"""A registry-backed choice in the config tree: ``{name: <policy>, <its params>...}``.

The scenario says ``cost: {name: linear, base_ms: 5}``; the ``name`` picks a class
from a registry and the remaining keys must validate against that class's
``Params`` model (unknown keys rejected, each field with its unit in the help).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim.registry import Registry


def first_error(err: ValidationError) -> str:
    """One line for the first problem in a pydantic error (plus a count of the rest)."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = "unknown key"
    got = e.get("input")
    shown = "" if e["type"] in ("missing",) or isinstance(got, dict) else f" (got {got!r})"
    more = len(err.errors()) - 1
    tail = f" (and {more} more problem{'s' * (more > 1)})" if more else ""
    return f"{loc + ': ' if loc else ''}{msg}{shown}{tail}"


class RegistryChoice(BaseModel):
    """Base of ``scheduler``, ``kv`` and ``cost`` sections."""

    model_config = ConfigDict(extra="allow", frozen=True)
    registry: ClassVar[Registry]
    default: ClassVar[str]

    name: str = Field(description="Registered policy name (see `servesim policies`).")

    @model_validator(mode="after")
    def _validate_params(self):
        try:
            cls = self.registry.get(self.name)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        try:
            cls.Params(**self.extras)
        except ValidationError as e:
            allowed = ", ".join(cls.Params.model_fields) or "none"
            raise ValueError(f"{self.name}: {first_error(e)}; allowed keys: {allowed}") from None
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
