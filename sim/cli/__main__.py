"""`python -m sim.cli` runs the servesim command line."""

import sys

from sim.cli import main

sys.exit(main())
