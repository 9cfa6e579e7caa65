"""The scenario reference (markdown), generated from the config models themselves.

    python -m sim.config.reference               # print it
    python -m sim.config.reference README.md     # refresh README's copy between the markers

A test keeps README's copy equal to the generated text, so the documentation can
never drift from the schema.
"""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel

from sim.config.choice import RegistryChoice
from sim.config.scenario import Scenario


def _type_name(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "(section)"
    return f"`{field.default!r}`" if field.default is not None else "`null`"


def _submodel(tp) -> type[BaseModel] | None:
    for t in (tp, *typing.get_args(tp)):
        if isinstance(t, type) and issubclass(t, BaseModel) and not issubclass(
                t, RegistryChoice):
            return t
    return None


def _rows(model: type[BaseModel], prefix: str, seen: set) -> list[str]:
    rows = []
    for name, f in model.model_fields.items():
        key = f"{prefix}{name}"
        desc = (f.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | {_type_name(f.annotation)} | {_default(f)} | {desc} |")
        sub = _submodel(f.annotation)
        if sub is not None and sub not in seen and key.count(".") < 3:
            rows += _rows(sub, key + ".", seen | {sub})
    return rows


def _policy_section(title: str, key: str, registry) -> list[str]:
    out = [f"### `{key}` policies", "", f"`{key}: {{name: <policy>, <params>...}}`", ""]
    for name, cls in registry.items():
        out.append(f"- **`{name}`**: {cls.description}")
        for pname, f in cls.Params.model_fields.items():
            out.append(f"  - `{pname}` ({_default(f)}): {f.description}")
    return out + [""]


def reference() -> str:
    from sim.config.scenario import AdmissionChoice, CostChoice, KVChoice, SchedulerChoice

    lines = ["| key | type | default | meaning (unit) |", "|---|---|---|---|"]
    lines += _rows(Scenario, "", {Scenario})
    lines.append("")
    for title, key, choice in (("Schedulers", "scheduler", SchedulerChoice),
                               ("KV policies", "kv", KVChoice),
                               ("Admission rules", "admission", AdmissionChoice),
                               ("Cost models", "cost", CostChoice)):
        lines += _policy_section(title, key, choice.registry)
    return "\n".join(lines).rstrip() + "\n"


START, END = "<!-- scenario-reference:start -->", "<!-- scenario-reference:end -->"


def embedded(readme: str) -> str:
    """The reference text currently between README's markers."""
    return readme.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def with_reference(readme: str) -> str:
    head, rest = readme.split(START, 1)
    return f"{head}{START}\n{reference()}{END}{rest.split(END, 1)[1]}"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
        path.write_text(with_reference(path.read_text()))
    else:
        print(reference(), end="")
