"""The command tree imports a subcommand only when it runs (fast `servesim --help`)."""

import subprocess
import sys

import pytest

from sim.cli.app import LAZY, load_command

HEAVY = ("numpy", "pandas", "pydantic", "pyarrow", "matplotlib", "simpy")


def test_top_level_help_lists_every_command_without_importing_the_simulator():
    code = ("import sys\nfrom sim.cli import main\nrc = main(['--help'])\n"
            f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"COLUMNS": "200", "PATH": ""}).stdout
    assert out.splitlines()[-1] == "0 []"
    for name in LAZY:
        assert f" {name} " in out, name


@pytest.mark.parametrize("name", list(LAZY))
def test_each_listed_command_loads_under_its_name_with_the_listed_help(name):
    cmd = load_command(name)
    assert cmd.name == name
    # the listing's static short help is the command's own
    assert cmd.get_short_help_str(limit=1000) == LAZY[name][2]
