"""The `servesim` command line: a thin shell over the library.

Bad input of any kind (trace, scenario, override, impossible config) ends with
one line on stderr and exit status 2, never a traceback. Usage errors are
Typer's own (also exit status 2).
"""

from __future__ import annotations

import sys
import warnings

from pydantic import ValidationError

from sim.cli.app import app
from sim.config.choice import first_error
from traces.errors import InputError

__all__ = ["app", "main"]


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"servesim: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        app(args=argv, prog_name="servesim")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except (InputError, ValidationError) as e:
        msg = first_error(e) if isinstance(e, ValidationError) else str(e)
        print(f"servesim: error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
