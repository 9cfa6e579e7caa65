"""Built-in catalog of models and GPUs, looked up by name.

``get_model("Llama-3-8B")`` and ``get_gpu("h100_sxm")`` return the frozen spec objects of
``sim.config.hardware``. Lookup is case-insensitive, ignores surrounding whitespace and treats
``_`` and spaces like ``-``. An unknown name raises :class:`CatalogError` whose one-line message
lists the known names. Figures and their sources: ``sim/catalog/SOURCES.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from sim.catalog.gpus import GPUS
from sim.catalog.models import MODELS, PUBLISHED_PARAMS
from sim.config.hardware import GpuSpec, ModelSpec

__all__ = [
    "GPUS",
    "MODELS",
    "PUBLISHED_PARAMS",
    "CatalogError",
    "get_gpu",
    "get_model",
    "normalize_name",
]

_T = TypeVar("_T")


class CatalogError(KeyError, ValueError):
    """An unknown catalog name. Both a ``KeyError`` (it is a failed lookup) and a ``ValueError``
    (it is a bad configuration value), so either ``except`` clause catches it."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message, wrapping it in quotes.
        return str(self.args[0]) if self.args else ""


def normalize_name(name: str) -> str:
    """The catalog key form of ``name``: lowercase, dashes for ``_`` and whitespace runs."""
    return "-".join(name.strip().lower().replace("_", " ").split())


def _lookup(kind: str, table: Mapping[str, _T], name: str) -> _T:
    if not isinstance(name, str):
        raise CatalogError(f"{kind} name must be a string, got {type(name).__name__}")
    try:
        return table[normalize_name(name)]
    except KeyError:
        known = ", ".join(sorted(table))
        raise CatalogError(f"unknown {kind} {name!r} (`servesim catalog` lists every one); "
                           f"known: {known}") from None


def get_model(name: str) -> ModelSpec:
    """The catalog model called ``name`` (e.g. ``"llama-3-8b"``)."""
    return _lookup("model", MODELS, name)


def get_gpu(name: str) -> GpuSpec:
    """The catalog GPU called ``name`` (e.g. ``"h100-sxm"``)."""
    return _lookup("gpu", GPUS, name)
