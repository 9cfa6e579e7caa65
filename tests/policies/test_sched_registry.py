"""`servesim policies` lists every scheduler; a new scheduler is one class in one file."""

from __future__ import annotations

import pytest

from sim.cli import main
from sim.sched import SCHEDULERS
from sim.sched.queues import PriorityQueue
from sim.sched.vllm import VllmScheduler
from tests.policies.test_sched_experiments import p, simulate_scenario


@pytest.mark.parametrize("name", SCHEDULERS.names())
def test_every_scheduler_has_a_description_and_strict_described_params(name):
    cls = SCHEDULERS.get(name)
    assert cls.description.strip()
    assert cls.Params.model_config.get("extra") == "forbid"
    for field, info in cls.Params.model_fields.items():
        assert info.description, f"{name}.{field} has no description"


def test_policies_command_lists_every_scheduler(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # one table row per policy
    assert main(["policies"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "│ scheduler" in line]
    for name in SCHEDULERS.names():
        row = next(r for r in rows if f"│ {name} " in r)
        assert SCHEDULERS.get(name).description[:40] in row


@pytest.fixture
def shortest_prompt_first():
    """A throwaway policy, written the way a new policy file would be: one small class."""

    @SCHEDULERS.register("test-shortest-prompt-first")
    class ShortestPromptFirst(VllmScheduler):
        description = "test only: vLLM v1 with the waiting queue ordered by prompt length"

        def make_queue(self):
            return PriorityQueue(self.specs.prompt_tokens, self.specs.arrival_s)

    yield ShortestPromptFirst.registry_name
    del SCHEDULERS._items[ShortestPromptFirst.registry_name]  # keep the registry as found


def test_a_new_policy_is_one_registered_class(shortest_prompt_first, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["policies"]) == 0
    assert "test-shortest-prompt-first" in capsys.readouterr().out
    wl = {"arrival": {"process": "poisson", "rate": 30}, "num_requests": 300,
          "lengths": {"dist": "azure_conv_like"}}
    res, sjf = simulate_scenario({"scheduler": {"name": shortest_prompt_first},
                                  "engine": {"max_num_seqs": 32}, "workload": wl})
    _, fcfs = simulate_scenario({"engine": {"max_num_seqs": 32}, "workload": wl})
    assert sjf["requests"]["finished"] == 300
    assert p(sjf, "ttft", "median") < 0.5 * p(fcfs, "ttft", "median")
