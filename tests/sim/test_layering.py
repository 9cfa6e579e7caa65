"""Data flows one way: the simulator core reads the cost profile format (sim/cost/profile)
and never imports the calibration harness, which writes it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from sim import pipeline
from sim.config.load import load_scenario
res = pipeline.run(load_scenario(None, ("workload.num_requests=50",)), None, plots=False)
assert res.summary["requests"]["finished"] == 50, res.summary["requests"]
print(sorted(m for m in sys.modules if m == "calibrate" or m.startswith("calibrate.")))
"""


def test_a_run_imports_no_calibration_module():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def _imports(path, name: str, modules: set[str]) -> set[str]:
    """Modules of ``modules`` that ``name`` imports anywhere (function-local imports too),
    except under ``if TYPE_CHECKING:`` (annotations only, never run)."""
    import ast

    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {next(n for n in names if n in modules)} if any(n in modules for n in names) \
            else set()
    return out - {name}


def test_no_import_cycles_in_the_simulator_or_the_trace_loaders():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = {}
    for p in [*root.glob("sim/**/*.py"), *root.glob("traces/**/*.py")]:
        name = ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        files[name] = p
    graph = {m: _imports(p, m, set(files)) for m, p in files.items()}
    # a cycle is a module reachable from one of its own imports
    cycles = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m == start:
                cycles.append(start)
                break
            if m not in seen:
                seen.add(m)
                todo += graph[m]
    assert cycles == [], cycles
