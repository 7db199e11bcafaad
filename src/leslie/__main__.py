"""Entry point of the `leslie` executable and of `python -m leslie`."""

import sys

from leslie import server


def main(argv: list[str] | None = None) -> int:
    """Run leslie with `argv` (default: the process arguments) and return the exit code.

    The `leslie` command itself first hands its command to the warm process (SPEC §12); when none answers,
    when `LESLIE_WARM=0` (without loading the client), or for a caller passing `argv` (a test, the warm
    process's child), it runs the Typer app here.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None and not server.switched_off():
        from leslie.server import client

        warm = client.run(args)
        if warm is not None:
            return warm
    from leslie.cli.app import run  # after the warm client, which needs none of it

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
