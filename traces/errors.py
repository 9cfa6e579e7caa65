"""Error and warning types for bad user input.

`InputError` is the project-wide base for "the user gave us something we cannot use": the
main CLI catches it, prints its message (always ONE line: file, row, field, what is allowed)
and exits with status 2. Other packages subclass it for their own inputs.
"""

from __future__ import annotations

import reprlib


class InputError(ValueError):
    """Bad user input; the message is one line that says what is wrong and what is allowed."""


class TraceError(InputError):
    """A trace file or workload spec cannot be used (missing column, bad cell, bad option...)."""


class TraceWarning(UserWarning):
    """A trace was usable but needed fixing, e.g. rows out of arrival order were sorted."""


ECHO_MAX = 80  # characters of a user's value quoted back in an error message


def clip(text: str, limit: int = ECHO_MAX) -> str:
    """``text`` on one line, cut to ``limit`` characters (an echoed value can be huge: a
    YAML alias bomb, a whole file pasted into --set)."""
    flat = " ".join(text[: 4 * limit].split())
    if len(flat) <= limit and len(text) <= 4 * limit:
        return flat
    return flat[: limit - 3] + "..."


def clip_repr(value: object, limit: int = ECHO_MAX) -> str:
    """``repr(value)`` bounded in work and length (a nested list of millions of items
    is not rendered whole)."""
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 8
    r.maxlevel = 3
    return clip(r.repr(value), limit)
