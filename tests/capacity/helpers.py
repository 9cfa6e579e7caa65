"""Shared pieces of the sweep and capacity tests."""

from __future__ import annotations

from pathlib import Path

from sim.cli import main

TINY = Path(__file__).with_name("tiny.yaml")


def cli(*args) -> int:
    return main([str(a) for a in args])
