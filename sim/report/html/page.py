"""The whole page: one HTML file with nothing outside it.

Invariants (the Chromium test checks them): no script, no URL but ``data:`` ones; the
Content-Security-Policy below lets the page load only inline styles and data: images, so a
reference to anything outside the file would fail loudly in a browser rather than load.
"""

from __future__ import annotations

import base64
from html import escape

from sim import version
from sim.report.html import sections
from sim.report.html.folder import Folder
from sim.report.outpath import REPORT_SIGNATURE

SIGNATURE = REPORT_SIGNATURE  # first bytes of every report (sim.report.outpath)
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 24px 48px; color: #1b1f24; background: #fff; }
h1 { font-size: 22px; margin: 24px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
  border-bottom: 1px solid #d0d7de; padding-bottom: 4px; } h3 { font-size: 15px; }
nav a { margin-right: 12px; } .sub { color: #57606a; margin: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; }
thead th { background: #f6f8fa; } tbody td:first-child { white-space: nowrap; }
td.num { text-align: right; white-space: nowrap; }
table.kv th { text-align: left; font-weight: normal; background: #f6f8fa; }
pre { background: #f6f8fa; padding: 8px; overflow: auto; max-height: 480px; font-size: 12px; }
pre.cmd { white-space: pre-wrap; word-break: break-word; max-height: none; }
.note { color: #57606a; font-size: 12px; } .verdict { font-weight: 600; }
.met { color: #1a7f37; } .missed { color: #cf222e; }
figure { margin: 12px 0 24px; } figure img { max-width: 100%; height: auto;
  border: 1px solid #d0d7de; } figcaption { color: #57606a; font-size: 12px; }
"""
TITLES = {"run": "servesim run", "sweep": "servesim sweep", "capacity": "servesim capacity",
          "sizing": "servesim capacity --target-rate"}
NAV = (("summary", "Summary"), ("slo", "SLO"), ("plots", "Plots"), ("deploy", "vllm serve"),
       ("config", "Configuration"), ("warnings", "Warnings"), ("band", "Error band"))


def image(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(name)}">'
            f"<figcaption>{escape(name)}</figcaption></figure>")


def _name(f: Folder) -> str:
    if f.config is not None:
        return str(f.config.get("name", f.path.name))
    return str((f.manifest or {}).get("scenario", {}).get("name", f.path.name))


def render(f: Folder) -> str:
    name = _name(f)
    body = "".join([
        sections.summary(f), sections.slo(f),
        sections.plots(f, [image(n, png) for n, png in f.plots]),
        sections.deployment(f), sections.config(f), sections.warnings(f),
        sections.cost_band(f)])
    nav = "".join(f'<a href="#{i}">{t}</a>' for i, t in NAV)
    return (SIGNATURE.decode() + '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(name)}: {TITLES[f.kind]} report</title><style>{CSS}</style>"
            f"</head><body><h1>{escape(name)}</h1>"
            f'<p class="sub">{TITLES[f.kind]} results in {escape(f.path.name)}; report by '
            f"servesim {escape(version())}</p><nav>{nav}</nav>{body}</body></html>\n")
