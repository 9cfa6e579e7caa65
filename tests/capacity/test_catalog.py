"""`servesim catalog`: models and GPUs with memory and the shipped calibrations."""

from __future__ import annotations

from .helpers import cli


def test_catalog_lists_models_gpus_and_calibrations(capsys):
    assert cli("catalog") == 0
    out = capsys.readouterr().out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") > 3}
    assert "llama-3-8b" in lines and "8.03" in lines["llama-3-8b"]
    assert "h100-sxm/vllm" in lines["h100-sxm"] and "79.2" in lines["h100-sxm"]
    assert "- (roofline)" in lines["l40s"]
    assert max(len(ln) for ln in out.splitlines()) > 80  # piped: natural width, nothing cut
