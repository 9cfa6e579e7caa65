"""The base of every configuration model a user writes (scenario, workload, policy knobs).

Pydantic's lax mode takes YAML's ``true`` / ``false`` for a number (``max_num_seqs: true``
would run with 1 sequence): a bool given for a field that takes numbers and not booleans is
refused instead, naming the field ("a number, not true"). Everything else validates as
Pydantic does.
"""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel, ValidationInfo, field_validator


def _kinds(annotation) -> set[type]:
    """The plain types a field's annotation admits (through unions, Optional, Annotated)."""
    out: set[type] = set()
    stack = [annotation]
    while stack:
        a = stack.pop()
        origin = typing.get_origin(a)
        if origin in (typing.Union, types.UnionType):
            stack.extend(typing.get_args(a))
        elif origin is typing.Annotated:
            stack.append(typing.get_args(a)[0])
        elif isinstance(a, type):
            out.add(a)
    return out


class Validated(BaseModel):
    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value, info: ValidationInfo):
        if isinstance(value, bool) and info.field_name is not None:
            kinds = _kinds(cls.model_fields[info.field_name].annotation)
            if kinds & {int, float} and bool not in kinds:
                raise ValueError("expected a number, not a boolean")
        return value
