"""The `servesim` command line: a thin shell over the library.

Bad input of any kind (trace, scenario, override, impossible config) ends with
one line on stderr and exit status 2, never a traceback; usage errors (an unknown
option, a value the option's type refuses, an extra argument) too, naming the command and
where its help is.
"""

from __future__ import annotations

import signal
import sys
import threading
import warnings

from sim.cli.app import app

__all__ = ["app", "main"]


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"servesim: warning: {message}", file=sys.stderr)


MESSAGE_MAX = 299  # characters of the one error line (a safety net; messages clip values)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # unwinds like an exception: staged results are removed


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            return _main(argv)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _one_line(msg: str) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= MESSAGE_MAX else msg[: MESSAGE_MAX - 3] + "..."


def _main(argv: list[str] | None) -> int:
    import typer

    # Click's exception classes as this Typer raises them (Typer >= 0.29 carries its own
    # copy of Click; earlier ones use Click's): a bad parameter is a usage error
    usage_error = typer.BadParameter.__base__
    click_exception = usage_error.__base__
    try:
        # not standalone: Click raises its usage errors here instead of printing its
        # four-line usage block, and returns an Exit's code (commands return None)
        rv = app(args=argv, prog_name="servesim", standalone_mode=False)
    except usage_error as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `servesim` alone: the help, as asked
            print(e.format_message(), file=sys.stderr)
            return 2
        cmd = e.ctx.command_path if e.ctx is not None else "servesim"
        print(_one_line(f"servesim: error: {cmd}: {e.format_message()} (see '{cmd} "
                        "--help')"), file=sys.stderr)
        return 2
    except click_exception as e:
        print(_one_line(f"servesim: error: {e.format_message()}"), file=sys.stderr)
        return e.exit_code
    except typer.Abort:
        print("servesim: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except MemoryError:
        print("servesim: error: out of memory; the workload or configuration is too large "
              "for this machine (fewer requests, a shorter horizon)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("servesim: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        msg = _input_error(e)
        if msg is None:
            raise
        print(_one_line(f"servesim: error: {msg}"), file=sys.stderr)
        return 2
    return rv if isinstance(rv, int) else 0


def _input_error(e: Exception) -> str | None:
    """The one-line message of bad input (InputError, pydantic ValidationError); None for
    anything else. Imported here, not at start: both modules are loaded by any command
    that can raise them."""
    from pydantic import ValidationError

    from sim.config.choice import first_error
    from traces.errors import InputError

    if isinstance(e, ValidationError):
        return first_error(e)
    return str(e) if isinstance(e, InputError) else None


if __name__ == "__main__":
    sys.exit(main())
