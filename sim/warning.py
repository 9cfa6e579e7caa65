"""The warning class of a run's findings (sim.cli prints each as `servesim: warning:`)."""

from __future__ import annotations


class RunWarning(UserWarning):
    """Said once at the end of a run (e.g. steps priced outside a fit's ranges), or when a
    configuration is set up that likely does not do what was meant."""
