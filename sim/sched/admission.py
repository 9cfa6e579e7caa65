"""Admission rules: may the head of the waiting queue start now?

vLLM admits optimistically: a request starts as soon as its prompt's blocks fit,
and decode steps allocate the rest later (preempting if they run out). The seed
article's alternative estimates the KV need up front. A rule only says yes or
no; the scheduler still allocates the prompt's blocks as usual.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from pydantic import BaseModel, ConfigDict

from sim.registry import Registry
from traces.validated import Validated


class NoParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Admission(ABC):
    description = ""
    Params: type[BaseModel] = NoParams
    #: a refusal holds for a whole decode run (true when it depends only on the request and
    #: on free KV, which a decode run can only shrink)
    persistent = True

    def __init__(self, specs, limits, kv, params: BaseModel | None = None):
        self.specs, self.limits, self.kv = specs, limits, kv
        self.params = params if params is not None else self.Params()
        self.sched = None  # the scheduler consulting this rule (set by bind)

    def bind(self, scheduler) -> None:
        """Called by the scheduler that owns this rule (rules may read its progress)."""
        self.sched = scheduler

    @abstractmethod
    def allows(self, req: int, generated: int) -> bool:
        """Whether request ``req`` (with ``generated`` output tokens so far) may start now."""


ADMISSION_RULES: Registry[type[Admission]] = Registry("admission rule")


@ADMISSION_RULES.register("optimistic")
class Optimistic(Admission):
    description = "vLLM: admit when the prompt's blocks fit now; decode grows on demand"

    def allows(self, req, generated):
        return True
