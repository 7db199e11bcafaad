"""`teewrap LOG_PREFIX -- AGENT...`: runs the agent and records the exact bytes it read and wrote.

Placed between `leslie acp` and the real agent, it lets a test compare what the client sent with what the agent
received (and the other way round), byte for byte: `LOG_PREFIX.in` and `LOG_PREFIX.out`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def _pump(source: int, target: int, log_path: str, close_target: bool) -> None:
    with open(log_path, "ab", buffering=0) as log:
        while True:
            data = os.read(source, 1 << 16)
            if not data:
                break
            log.write(data)
            view = memoryview(data)
            while view:
                view = view[os.write(target, view):]
    if close_target:
        os.close(target)


def main() -> int:
    """Run the agent with its stdin and stdout recorded."""
    prefix, command = sys.argv[1], sys.argv[3:]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    inbound = threading.Thread(target=_pump, args=(0, proc.stdin.fileno(), prefix + ".in", True), daemon=True)
    inbound.start()
    _pump(proc.stdout.fileno(), 1, prefix + ".out", False)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
