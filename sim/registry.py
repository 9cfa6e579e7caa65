"""String-keyed registries through which every policy plugs in.

A policy module registers its class with ``@REGISTRY.register("name")``; the
scenario schema and the CLI take their choices from the registry, so adding a
policy is one new file (plus its import in the package ``__init__``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from traces.errors import clip_repr

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> policy class. Names are lowercase; lookups are case-insensitive."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        key = name.lower()

        def deco(obj: T) -> T:
            if key in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[key] = obj
            obj.registry_name = key  # type: ignore[attr-defined]
            return obj

        return deco

    def get(self, name: str) -> T:
        try:
            return self._items[name.lower()]
        except KeyError:
            close = difflib.get_close_matches(name.lower(), self.names(), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise KeyError(f"unknown {self.kind} {clip_repr(name)}; {hint}choose one of: "
                           f"{', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(sorted(self._items.items()))

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._items
