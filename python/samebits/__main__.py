"""`python -m samebits`: the command-line tool, the same binary the `samebits` command runs."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
