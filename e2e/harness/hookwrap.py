"""A transparent stand-in for `leslie` in the installed hooks: runs the real leslie and logs each call.

Installed as `<tmp>/bin/leslie` (the hooks' `--executable`), it passes stdin, stdout, stderr and the exit
status through unchanged and appends one JSON line per call to $LESLIE_E2E_HOOK_LOG: the arguments, the
payload the agent sent, leslie's answer. That log is the evidence of what each client really sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

REAL = os.environ.get("LESLIE_E2E_REAL", "leslie")


def main() -> int:
    """Run the real leslie with our stdin; log and relay."""
    payload = sys.stdin.buffer.read()
    started = time.time()
    proc = subprocess.run([REAL, *sys.argv[1:]], input=payload, capture_output=True, check=False)
    log = os.environ.get("LESLIE_E2E_HOOK_LOG")
    if log:
        try:
            parsed = json.loads(payload)
        except ValueError:
            parsed = payload.decode("utf-8", "replace")
        entry = {"argv": sys.argv[1:], "time": started, "seconds": round(time.time() - started, 3),
                 "payload": parsed, "stdout": proc.stdout.decode("utf-8", "replace"),
                 "stderr": proc.stderr.decode("utf-8", "replace"), "exit": proc.returncode}
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
    sys.stdout.buffer.write(proc.stdout)
    sys.stderr.buffer.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
