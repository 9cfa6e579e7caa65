"""The report's sections, each an HTML fragment built from what the folder holds.

Tables come from the console's own builders (sim.report.console, plan_tables) through
``tables.from_rich``: the page and the terminal cannot disagree. A section the folder has
nothing for says so in one line rather than disappearing.
"""

from __future__ import annotations

import json
from html import escape

from sim.cost.validation import describe
from sim.report import console
from sim.report.html.flags import Serve, from_chosen, from_config
from sim.report.html.folder import Folder
from sim.report.html.notes import collect
from sim.report.html.plan import plan_tables
from sim.report.html.tables import from_rich, key_values

# `vllm bench serve`'s definitions (sim.metrics.summary), said next to the numbers
DEFINITIONS = ("TTFT = first token - arrival; TPOT = (E2E - TTFT) / (output tokens - 1), "
               "requests with more than one output token; ITL = every gap between consecutive "
               "streamed chunks (one per token; one per step under speculative decoding); "
               "E2EL = finish - arrival (as `vllm bench serve` defines them). Throughputs "
               "divide by the run's duration (first arrival to last answer, refusals "
               "included; to the end of the run when some request did not finish).")


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{body}</section>'


def para(text: str, cls: str = "") -> str:
    return f'<p class="{cls}">{escape(text)}</p>' if cls else f"<p>{escape(text)}</p>"


def run_tables(summary: dict, config: dict) -> str:
    """The tables `servesim run` prints: overview, latency, lanes and fleet when present."""
    parts = [from_rich(console.overview_table(summary, config.get("derived", {}))),
             from_rich(console.latency_table(summary["latency_ms"], "Latency")),
             para(DEFINITIONS, "note")]
    if summary.get("lanes"):
        parts.append(from_rich(console.lanes_table(summary["lanes"],
                                                   summary["slo"]["percentile"])))
    if summary.get("fleet"):
        parts.append(from_rich(console.fleet_table(summary["fleet"])))
    return "".join(parts)


def summary(f: Folder) -> str:
    if f.kind == "run":
        return section("summary", "Summary", run_tables(f.summary, f.config))
    body = plan_tables(f)
    if f.summary is not None:
        what = "chosen configuration at its capacity" if f.kind == "capacity" else "chosen point"
        body += f"<h3>The {what} (chosen/)</h3>" + run_tables(f.summary, f.config)
    else:
        body += para("No chosen point was simulated (the sweep ran without plots): "
                     "`servesim plot DIR` simulates one.", "note")
    return section("summary", "Summary", body)


def slo(f: Folder) -> str:
    if f.summary is None:
        return section("slo", "SLO verdict", para("No run to judge in this folder."))
    s = f.summary["slo"]
    budgets = sorted(((k[:-3], v) for k, v in s.items() if k.endswith("_ms")
                      and isinstance(v, dict) and "budget" in v), key=_budget_order)
    if not budgets:
        return section("slo", "SLO verdict", para("The scenario sets no SLO (slo.ttft_ms, "
                                                  "slo.tpot_ms, slo.e2el_ms)."))
    verdict = console.slo_line(s)
    rows = [(f"{k.upper()} p{s['percentile']:g}",
             f"{_ms(v['value'])} ms against {v['budget']:g} ms: {'met' if v['met'] else 'MISSED'}")
            for k, v in budgets]
    cls = "met" if s["met"] else "missed"
    return section("slo", "SLO verdict",
                   f'<p class="verdict {cls}">{escape(verdict)}</p>' + key_values(rows))


def _budget_order(item) -> int:
    order = ("ttft", "tpot", "itl", "e2el")
    return order.index(item[0]) if item[0] in order else len(order)


def _ms(v) -> str:
    return "-" if v is None else f"{v:,.1f}"


def plots(f: Folder, images: list[str]) -> str:
    if not images:
        return section("plots", "Plots", para("No plots in this folder (written with "
                                              "--no-plots)."))
    return section("plots", "Plots", "".join(images))


def deployment(f: Folder) -> str:
    serve = _serve(f)
    if serve is None:
        return section("deploy", "vllm serve", para("No run configuration in this folder."))
    if serve.missing:
        body = para(f"The `vllm serve` command: {serve.missing}")
    else:
        body = "".join(f"<pre class=cmd>{escape(line)}</pre>" for line in serve.lines)
    if serve.notes:
        body += "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in serve.notes) + "</ul>"
    return section("deploy", "vllm serve", body)


def _serve(f: Folder) -> Serve | None:
    if f.chosen is not None:
        return from_chosen(f.chosen)
    return from_config(f.config_file) if f.config_file is not None else None


def config(f: Folder) -> str:
    parts = []
    for name, text in (("chosen.yaml", f.chosen_text), ("sizing.yaml", f.sizing_text)):
        if text is not None:
            parts.append(f"<h3>{name}</h3><pre>{escape(text)}</pre>")
    if f.config is not None:
        name = "config.json" if f.kind == "run" else "chosen/config.json"
        parts.append(f"<h3>{name}</h3><pre>{escape(json.dumps(f.config, indent=2))}</pre>")
    if f.manifest is not None and f.chosen_text is None:
        parts.append("<h3>manifest.json: the scenario and plan</h3>"
                     f"<pre>{escape(json.dumps(f.manifest, indent=2, sort_keys=True))}</pre>")
    return section("config", "Resolved configuration", "".join(parts) or para("None."))


def warnings(f: Folder) -> str:
    found = collect(f)
    body = ("<ul>" + "".join(f"<li>{escape(w)}</li>" for w in found) + "</ul>" if found
            else para("None: the run stored no warning."))
    return section("warnings", "Warnings", body)


def cost_band(f: Folder) -> str:
    band = (f.chosen or {}).get("locked", {}).get("cost_error") or (f.summary or {}).get(
        "cost_error")
    if not band:
        return section("band", "Cost model error band", para("Not recorded in this folder."))
    return section("band", "Cost model error band", para(describe(band)))
