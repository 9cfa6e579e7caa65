"""Every module the code imports is a declared dependency (issue 23, item 1).

`make run` installs the core dependencies only, so a third-party module imported at the top
of a core module (sim, traces, scenarios, calibrate) must be one of them; anything else the
code imports (inside a function, or from kernels/) must at least be declared in an extra.
typer 0.29 stopped depending on click while `sim/cli/app.py` imported it: this test fails
on that (it names the module, the file and the line).
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
CORE_PACKAGES = ("sim", "traces", "scenarios", "calibrate")
ALL_PACKAGES = (*CORE_PACKAGES, "kernels")
# live mode runs real kernels: its modules need the kernels extra (torch) by design, and
# the CLI imports them only for `run --live` / `fidelity`
NOT_CORE = ("sim/live/",)
FIRST_PARTY = {"sim", "traces", "scenarios", "calibrate", "kernels", "benchmarks", "tests"}
# import names whose distribution is not installed in the test venv (so importlib cannot
# map them); each is an optional dependency the code imports lazily
KNOWN = {"yaml": "pyyaml", "aiconfigurator_core": "aiconfigurator-core"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _norm(re.match(r"[A-Za-z0-9._-]+", req.strip()).group(0))


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {_requirement_name(r) for reqs in project["optional-dependencies"].values()
              for r in reqs}
    return core, core | extras


def _imports(path: Path):
    """(top-level name, line, at module level?) of each absolute import in PATH; an import
    inside a function, a class body or a try block is lazy or guarded, not module level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    eager = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], node.lineno, id(node) in eager


def _third_party(packages):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            for top, line, eager in _imports(path):
                if top in sys.stdlib_module_names or top in FIRST_PARTY or top == "__future__":
                    continue
                yield top, f"{path.relative_to(ROOT)}:{line}", eager


@cache
def _import_names() -> dict[str, list[str]]:
    return packages_distributions()


def _distributions(top: str) -> set[str]:
    found = {_norm(d) for d in _import_names().get(top, [])}
    return found or {KNOWN.get(top, _norm(top))}


def test_every_import_is_declared():
    _, declared = _declared()
    missing = [f"{top} ({where})" for top, where, _ in _third_party(ALL_PACKAGES)
               if not _distributions(top) & declared]
    assert missing == [], f"imported but not declared in pyproject.toml: {missing}"


def test_module_level_imports_of_the_core_are_core_dependencies():
    core, _ = _declared()
    eager = [f"{top} ({where})" for top, where, at_top in _third_party(CORE_PACKAGES)
             if at_top and not where.startswith(NOT_CORE) and not _distributions(top) & core]
    assert eager == [], ("imported at module level by the simulator core but not a core "
                         f"dependency (make run would fail): {eager}")


def test_click_is_a_core_dependency():
    # sim/cli/app.py imports click itself; typer >= 0.29 no longer brings it along
    core, _ = _declared()
    assert "click" in core
