"""servesim: a trace-driven discrete-event simulator of LLM serving."""

from __future__ import annotations


def version() -> str:
    """The installed servesim version (pyproject's), or "unknown" when not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("servesim")
    except PackageNotFoundError:
        return "unknown"
