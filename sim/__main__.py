"""`python -m sim` and the `leaselab` script: the command line itself is sim.cli.main."""

import gc
import sys

from sim.cli import main as cli


def main(argv: list[str] | None = None) -> int:
    """The command, then an exit that skips the garbage collector: at exit it would walk every
    object pandas and scipy made (0.2-0.4 s after the last line is printed) only to free memory
    the process is about to give back anyway."""
    code = cli.main(argv)
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
