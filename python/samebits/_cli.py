"""Console entry point: runs the samebits command-line binary installed inside the package."""

import os
import sys
from pathlib import Path


def main():
    binary = Path(__file__).resolve().parent / "bin" / "samebits"
    if not binary.exists():
        sys.stderr.write("samebits: the command-line binary is missing from this install\n")
        return 2
    os.environ.setdefault("SAMEBITS_PYTHON", sys.executable)  # `samebits serve` runs this interpreter's server
    os.execv(str(binary), [str(binary), *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
