"""One line for a pydantic ValidationError: the field's dotted path, the rule with its unit and
reason, the value given (clipped), "did you mean" for unknown keys.

    describe(err, Scenario)
      -> "engine.max_num_seqs: must be <= 1,048,576 requests (got 10000000000): <reason>"
      -> "engine.max_num_seq: unknown key; did you mean 'max_num_seqs'?"

A field's reason for its bounds lives next to the field: ``json_schema_extra={"why": ...}``
(and ``"unit"`` where the description's first parenthesis is not the unit).
"""

from __future__ import annotations

import difflib
import re
import typing

from pydantic import BaseModel, ValidationError

from traces.errors import clip, clip_repr

# pydantic names union members in the error location: 'str', 'ModelSpec', 'function-after[..]'
_TAG = re.compile(r"^([A-Z]\w*|str|int|float|bool|none|[a-z-]+\[.*\])$")
_BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
           "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}
_NOISE = {"string_type", "model_type", "model_attributes_type", "dict_type"}


def first_loc(err: ValidationError) -> tuple:
    """Where the first meaningful problem is (union member names dropped)."""
    return _clean(_meaningful(err.errors())[0]["loc"])


def _clean(loc) -> tuple:
    return tuple(p for p in loc if not (isinstance(p, str) and _TAG.match(p)))


def describe(err: ValidationError, root: type[BaseModel] | None = None) -> str:
    """The first meaningful problem of ``err`` on one line (plus a count of the rest)."""
    errors = _meaningful(err.errors())
    e = errors[0]
    loc = _clean(e["loc"])
    path = ".".join(clip(str(p), 40) for p in loc)
    msg = _message(e, loc, root)
    more = len(errors) - 1
    tail = f" (and {more} more problem{'s' * (more > 1)})" if more else ""
    return f"{path + ': ' if path else ''}{msg}{tail}"


def _meaningful(errors: list[dict]) -> list[dict]:
    """Drop the 'should be a string' side of ``str | Spec`` when a mapping was given."""
    kept = [e for e in errors if not (e["type"] in _NOISE and isinstance(e.get("input"), dict)
                                      and len(errors) > 1)]
    return kept or errors


def _message(e: dict, loc: tuple, root) -> str:
    kind, got = e["type"], e.get("input")
    if kind == "extra_forbidden":
        return "unknown key" + _suggest(root, loc)
    if kind == "missing":
        return "missing (required)"
    info = _field(root, loc) if root is not None else None
    if kind in _BOUNDS and info is not None:
        key, sign = _BOUNDS[kind]
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        unit = extra.get("unit") or _unit(info.description or "")
        bound = e["ctx"][key]
        trivial = key in ("gt", "ge") and bound in (0, 1)  # "must be > 0" explains itself
        why = None if trivial else extra.get("why")
        rule = f"must be {sign} {_num(e['ctx'][key])}{' ' + unit if unit else ''}"
        return f"{rule} (got {_num_or_repr(got)}){': ' + why if why else ''}"
    msg = e["msg"].removeprefix("Value error, ")
    shown = "" if isinstance(got, dict) or kind == "value_error" else f" (got {clip_repr(got)})"
    return f"{clip(msg, 200)}{shown}"


def _num(x) -> str:
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.0f}" if x.is_integer() and abs(x) < 1e15 else f"{x:g}"
    return str(x)


def _num_or_repr(x) -> str:
    if isinstance(x, str):  # YAML 1.1 reads 1e300 as text; pydantic parsed it as a number
        try:
            float(x)
            return clip(x, 40)
        except ValueError:
            return clip_repr(x)
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**15:
        return f"{x:.3g}"  # a 30-digit integer is shown as 1e+29, not in full
    return _num(x) if isinstance(x, int | float) and not isinstance(x, bool) else clip_repr(x)


def _unit(description: str) -> str:
    m = re.search(r"\(([^()]{1,24})\)", description)
    return m.group(1) if m and not any(w in m.group(1) for w in ("default", "only", "e.g.")) \
        else ""


def _model_in(tp) -> type[BaseModel] | None:
    """The first pydantic model inside an annotation (Optional, unions, lists, tuples)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class whose fields the keys after ``loc`` are (list indices skipped)."""
    cls = root
    for part in loc:
        if isinstance(part, int):
            continue  # a list index: the item type came from the annotation
        fields = getattr(cls, "model_fields", None) or {}
        if part not in fields:
            return None
        cls = _model_in(fields[part].annotation)
    return cls


def _field(root, loc: tuple):
    keys = [p for p in loc if not isinstance(p, int)]
    if not keys:
        return None
    parent = _model_at(root, loc[: max(i for i, p in enumerate(loc) if p == keys[-1])])
    return (getattr(parent, "model_fields", None) or {}).get(keys[-1])


def _suggest(root, loc: tuple) -> str:
    if root is None or not loc:
        return ""
    parent = _model_at(root, loc[:-1])
    names = list(getattr(parent, "model_fields", {}) or {})
    if not names:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; allowed keys: {clip(', '.join(names), 160)}"
