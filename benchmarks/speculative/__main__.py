"""`python -m benchmarks.speculative` (see benchmarks/speculative/reproduce.py)."""

import sys

from benchmarks.speculative.reproduce import main

sys.exit(main())
