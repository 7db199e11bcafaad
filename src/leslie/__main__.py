"""Entry point of the `leslie` executable and of `python -m leslie`."""

import sys

from leslie.cli.app import run


def main(argv: list[str] | None = None) -> int:
    """Run leslie with `argv` (default: the process arguments) and return the exit code."""
    return run(sys.argv[1:] if argv is None else list(argv))


if __name__ == "__main__":
    sys.exit(main())
