"""Worker processes die with their parent, even when it is killed with SIGKILL.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ctypes) is asked
for by every pool process:

    servesim (sweep, capacity)
      |-- forkserver        asks on import of this module (preloaded), when the
      |     |                environment names servesim as its parent (``marked``)
      |     |-- worker      asks in the pool's initializer (``die_with_parent``)
      |     `-- worker
      `-- resource tracker  exits by itself once every process holding its pipe is gone

The kernel clears the request on fork, so each level asks for itself; a process whose
parent died before it asked exits at once. "Its parent" is the pid it was forked by (the
forkserver's, recorded there on import), never the one it reads when it asks: a worker forked
just as the forkserver is killed is already re-parented by then, and would otherwise run on
(seen once: a worker and the resource tracker it kept alive). Elsewhere than Linux this is a
no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_ENV = "SERVESIM_POOL_PARENT"  # pid of the servesim process that starts the pool
_server: int | None = None  # the forkserver's pid, in it and in the workers it forks


def die_with_parent(parent: int | None = None) -> None:
    """Have the kernel SIGKILL this process when ``parent`` (pid; default: the forkserver
    that forked it, else its parent now) exits; exit at once if it already has."""
    if not sys.platform.startswith("linux"):
        return
    parent = parent or _server or os.getppid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    if prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


@contextlib.contextmanager
def marked() -> Iterator[None]:
    """Name this process as the pool's parent while it starts the forkserver (which copies
    the environment when it starts); unmarked after, so no later child takes it for one."""
    os.environ[PARENT_ENV] = str(os.getpid())
    try:
        yield
    finally:
        os.environ.pop(PARENT_ENV, None)


def _in_forkserver() -> None:
    """On import: the forkserver (this module is preloaded there) records its pid for the
    workers it forks and asks for itself; any other importer (its parent is not the marked
    process) does nothing."""
    global _server
    marked_parent = os.environ.get(PARENT_ENV)
    if marked_parent == str(os.getppid()):
        _server = os.getpid()
        die_with_parent(int(marked_parent))


_in_forkserver()
