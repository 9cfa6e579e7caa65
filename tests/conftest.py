"""Test-wide setup.

TRITON_INTERPRET must be set before triton is first imported anywhere in the
test process, so it lives in the root conftest (loaded before any test module).
Kernel tests then run on the CPU through Triton's interpreter; the Hopper
compile check runs in a subprocess with the flag removed.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
