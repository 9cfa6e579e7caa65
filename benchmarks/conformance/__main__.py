"""Conformance with vLLM's scheduler: export cases for the recorder, compare with references.

    python -m benchmarks.conformance export DIR [CASE ...]   # CASE.json for record.py
    python -m benchmarks.conformance compare [CASE ...]      # servesim vs refs/, step by step
    python -m benchmarks.conformance compare --markdown      # the README's case table

``make conformance`` runs export, ``record.py`` (in the vLLM venv) and compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.conformance.cases import case_names, load_case, vllm_input
from benchmarks.conformance.compare import compare_case


def export(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = out / f"{name}.json"
        path.write_text(json.dumps(vllm_input(load_case(name))))
        print(path)


def compare(names: list[str], markdown: bool = False) -> int:
    if markdown:  # the README's case table
        print("| case | what it exercises | vLLM steps | identical steps | preemptions |")
        print("|---|---|---:|---:|---:|")
    else:
        print(f"{'case':<28} {'vLLM steps':>10} {'servesim':>9} {'identical':>10} "
              f"{'preemptions':>11}  verdict")
    failed = []
    for name in names:
        case = load_case(name)
        r = compare_case(case)
        verdict = "identical" if r.ok else f"DIVERGES at step {r.prefix}"
        if markdown:
            print(f"| `{name}` | {case.resolved.scenario.description} | {r.ref_steps} | "
                  f"{r.identical} | {r.preemptions} |")
        else:
            print(f"{name:<28} {r.ref_steps:>10} {r.our_steps:>9} {r.identical:>10} "
                  f"{r.preemptions:>11}  {verdict}")
        if not r.ok:
            failed.append(r)
    for r in failed:
        print(f"\n{r.name}:")
        for p in r.problems:
            print(f"  {p}")
        if r.divergence:
            print(r.divergence)
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.conformance",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="write CASE.json inputs for record.py")
    ex.add_argument("out", type=Path)
    ex.add_argument("cases", nargs="*")
    co = sub.add_parser("compare", help="compare servesim with the recorded references")
    co.add_argument("cases", nargs="*")
    co.add_argument("--markdown", action="store_true", help="print the README's case table")
    args = ap.parse_args(argv)
    names = args.cases or case_names()
    if args.cmd == "export":
        export(args.out, names)
        return 0
    return compare(names, args.markdown)


if __name__ == "__main__":
    sys.exit(main())
