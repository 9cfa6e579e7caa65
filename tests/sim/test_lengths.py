"""Length rules as vLLM 0.32's OpenAI server applies them, through a whole `servesim run`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cli import main
from sim.sched.lengths import rejected, served_output
from tests.cli.test_cli_errors import write

# prompt 100 and 500 tokens alternating, 300 outputs asked, max_model_len 512:
# 100 + 300 fits; 500 + 300 is shortened to 12 outputs (512 - 500)
MIXED = """\
name: t
model: llama-3-8b
gpu: h100-sxm
engine: {max_model_len: 512}
workload:
  trace: t.csv
"""
ROWS = "arrival_s,prompt_tokens,output_tokens\n" + "".join(
    f"{0.1 * i:.1f},{100 if i % 2 else 500},300\n" for i in range(10)) + "1.0,512,5\n"


def test_served_output_and_rejection_rules():
    prompt, output = np.array([100, 300, 511, 512, 600]), np.array([50, 400, 10, 5, 1])
    assert served_output(prompt, output, 512, strict=False).tolist() == [50, 212, 1, 5, 1]
    assert served_output(prompt, output, 512, strict=True).tolist() == [50, 400, 10, 5, 1]
    assert rejected(prompt, [50, 212, 1, 5, 1], 512).tolist() == [False] * 3 + [True] * 2
    assert rejected(prompt, output, 512).tolist() == [False] + [True] * 4  # strict, unshortened


@pytest.mark.parametrize("strict, finished, rejected_, shortened", [
    (False, 10, 1, 5),  # the server's rule: five shortened, only the 512-token prompt refused
    (True, 5, 6, 0),  # engine.strict_max_model_len: every over-long request refused
])
def test_summary_counts_shortened_and_rejected(tmp_path, strict, finished, rejected_, shortened):
    (tmp_path / "t.csv").write_text(ROWS)
    out = tmp_path / "o"
    args = ["run", str(write(tmp_path, MIXED)), "--out", str(out), "-q", "--no-plots"]
    if strict:
        args += ["--set", "engine.strict_max_model_len=true"]
    assert main(args) == 0
    req = json.loads((out / "summary.json").read_text())["requests"]
    assert (req["finished"], req["rejected"], req["shortened"]) == (finished, rejected_, shortened)
