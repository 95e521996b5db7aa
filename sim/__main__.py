"""`python -m sim` and the `leaselab` script: the command line itself is sim.cli.main."""

import sys

from sim.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
