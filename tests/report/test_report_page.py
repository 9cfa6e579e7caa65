"""`servesim report DIR` and --report: what the page holds, read from the folder."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from sim.cost.validation import describe
from sim.report.html.page import SIGNATURE
from tests.capacity.helpers import TINY, cli

SECTIONS = ("summary", "slo", "plots", "deploy", "config", "warnings", "band")


def page(folder: Path) -> str:
    return (folder / "report.html").read_text(encoding="utf-8")


def text(html: str) -> str:
    """The page's words, one space between them."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.parametrize("kind", ["run", "sweep", "capacity"])
def test_every_section_and_plot_is_in_one_file(folders, kind):
    folder = folders[kind]
    html = page(folder)
    assert html.encode().startswith(SIGNATURE)
    assert [s for s in SECTIONS if f'<section id="{s}">' in html] == list(SECTIONS)
    pngs = sorted((folder if kind == "run" else folder / "plots").glob("*.png"))
    assert len(pngs) == (2 if kind == "run" else 5)
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == len(pngs) and all(s.startswith("data:image/png;base64,") for s in srcs)
    # self-contained: no script, no link or resource but data: images and #anchors (URLs in
    # the config, a model's source, are text), styles inline
    assert "<script" not in html and "<link" not in html and "url(" not in html
    assert re.findall(r"\b(?:src|href)=", html) and not re.search(
        r"\b(?:src|href)=\"(?!data:image/png;base64,|#)", html)


def test_a_run_page_shows_the_summary_verdict_flags_and_band(folders):
    folder = folders["run"]
    summary = json.loads((folder / "summary.json").read_text())
    words = text(page(folder))
    ttft = summary["latency_ms"]["ttft"]
    assert f"TTFT {ttft['mean']:,.1f} {ttft['median']:,.1f} {ttft['p90']:,.1f}" in words
    tpot = summary["slo"]["tpot_ms"]
    assert summary["slo"]["met"] and tpot["budget"] == 40
    assert f"TPOT p95 {tpot['value']:.1f} ms against 40 ms: met" in words
    assert "vllm serve meta-llama/Meta-Llama-3-8B --dtype auto" in words
    assert "--max-num-seqs 1024" in words
    assert describe(summary["cost_error"]) in words  # "not validated ... cost linear"
    assert "too short to judge" in words  # the stability warning the summary stores
    assert '"prefill_token_ms": 0.05' in words  # config.json, as written


def test_a_capacity_page_shows_the_frontier_and_what_was_locked(folders):
    folder = folders["capacity"]
    words = text(page(folder))
    assert "capacity frontier (worst of seeds; tolerance 20%)" in words
    assert "max load 10" in words and "binding TPOT p95" in words
    assert "chosen.yaml # The best configuration at its capacity" in words
    locked = (folder / "chosen.yaml").read_text()
    assert "vllm serve meta-llama/Meta-Llama-3-8B" in words and "--enable-prefix-caching" in locked


def test_report_replaces_its_own_page_and_says_where(folders, capsys):
    folder = folders["sweep"]
    before = page(folder)
    assert cli("report", folder) == 0
    assert capsys.readouterr().out == f"report: {folder / 'report.html'}\n"
    assert page(folder) == before  # the same folder, the same page
    assert not [p for p in folder.parent.iterdir() if ".servesim-" in p.name]  # no lock left


def _foreign_report(tmp_path, folders) -> Path:
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(folders["run"], d)
    (d / "report.html").unlink()  # the copy kept servesim's mark (an extended attribute)
    (d / "report.html").write_text("my notes\n")
    return d


@pytest.mark.parametrize(("make", "needle"), [
    (lambda tmp, f: tmp / "nope", "nope: no such folder; give the folder `servesim run`"),
    (lambda tmp, f: (tmp / "file.txt").write_text("x") and tmp / "file.txt",
     "file.txt: not a folder"),
    (lambda tmp, f: (tmp / "mine").mkdir() or tmp / "mine",
     "mine: not a servesim results folder"),
    (_foreign_report, "report.html: a file servesim did not write is in the way"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, folders, capsys, make,
                                                         needle):
    target = make(tmp_path, folders)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code = cli("report", target)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("servesim: error: ") and needle in err
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing removed, the user's file untouched


def test_a_broken_summary_is_named(tmp_path, folders, capsys):
    import shutil

    d = tmp_path / "broken"
    shutil.copytree(folders["run"], d)
    (d / "report.html").unlink()
    (d / "summary.json").write_text("{")
    assert cli("report", d) == 2
    err = capsys.readouterr().err
    assert "summary.json: not a servesim summary (JSONDecodeError)" in err
    assert not (d / "report.html").exists()


@pytest.mark.parametrize(("kind", "edit", "needle"), [
    ("run", lambda d: _json_edit(d / "summary.json", lambda s: s.pop("kv_cache")),
     "lack what the report reads (no 'kv_cache')"),
    ("run", lambda d: _json_edit(d / "summary.json", lambda s: s["latency_ms"].update(
        ttft=None)), "lack what the report reads (AttributeError"),
    ("run", lambda d: (d / "config.json").write_text("{}"), "lack what the report reads"),
    ("capacity", lambda d: (d / "frontier.csv").write_text("a,b\n1\n"),
     "lack what the report reads (no 'cost_per_million_output_tokens')"),
])
def test_files_that_parse_but_lack_what_the_report_reads_are_named(tmp_path, folders, capsys,
                                                                   kind, edit, needle):
    # edited or cut short by hand: one line naming the folder, exit 2, no page written
    import shutil

    d = tmp_path / "edited"
    shutil.copytree(folders[kind], d)
    (d / "report.html").unlink()
    edit(d)
    assert cli("report", d) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "edited: its summary.json" in err and needle in err
    assert "Traceback" not in err and not (d / "report.html").exists()


def _json_edit(path, change) -> None:
    import json

    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_run_report_flag_writes_the_page_into_the_committed_result(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli("run", TINY, "-q", "--no-plots", "--out", out, "--report") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"report: {out / 'report.html'}"
    html = page(out)
    assert "No plots in this folder (written with --no-plots)." in html
    assert (out / ".servesim-result").is_file()


def test_capacity_target_rate_report_flag_writes_the_sizing_page(tmp_path, capsys):
    out = tmp_path / "size"
    assert cli("capacity", TINY, "--seeds", "1", "--target-rate", "15", "-j", "1", "-q",
               "--out", out, "--report") == 0  # the search released its folder's lock
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {out / 'report.html'}"
    html = page(out)
    assert "<title>tiny: servesim capacity --target-rate report</title>" in html
    assert "<h3>sizing.yaml</h3>" in html and "target_rate_req_s: 15" in text(html)


def test_a_config_that_no_longer_resolves_is_said_not_fatal(tmp_path, folders, capsys):
    import shutil

    d = tmp_path / "old"
    shutil.copytree(folders["run"], d)
    (d / "report.html").unlink()
    config = json.loads((d / "config.json").read_text())
    config["engine"]["max_num_seqs"] = 0  # as if a later servesim refused what was run
    (d / "config.json").write_text(json.dumps(config))
    assert cli("report", d) == 0
    words = text(page(d))
    assert "The `vllm serve` command: not derived from config.json: " in words
    assert "engine.max_num_seqs" in words
