"""Error and warning types for bad user input.

`InputError` is the project-wide base for "the user gave us something we cannot use": the
main CLI catches it, prints its message (always ONE line: file, row, field, what is allowed)
and exits with status 2. Other packages subclass it for their own inputs.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input; the message is one line that says what is wrong and what is allowed."""


class TraceError(InputError):
    """A trace file or workload spec cannot be used (missing column, bad cell, bad option...)."""


class TraceWarning(UserWarning):
    """A trace was usable but needed fixing, e.g. rows out of arrival order were sorted."""
