"""The ACP relay's added latency per message: `leslie acp` between client and agent vs a direct pipe.

A client sends one line and waits for the agent's answer line, many times over, first straight to an echo agent,
then through `leslie acp` (as a pure relay, and with injection active on a thread), interleaved so that noise
hits all alike. A round trip crosses the relay twice (client → agent, agent → client), so the added latency per
message is half the difference of the medians. Ordinary messages (a request and a streamed `session/update`
answer) are the relay's own cost; prompts with injection active add the policy's decision (`on_user_message`,
which reads and writes session state) and are reported apart.

    python benchmarks/bench_acp.py [--rounds 2000] [--prompts 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LESLIE = str(Path(sys.executable).with_name("leslie"))
TARGET_MS = 1.0

# Answers a ping with a streamed agent_message_chunk, and a prompt with its end_turn response.
ECHO_AGENT = r"""
import json, sys
read, write = sys.stdin.buffer.readline, sys.stdout.buffer
while line := read():
    message = json.loads(line)
    if message.get("method") == "session/prompt":
        out = {"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}}
    else:
        out = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "pong"}}}}
    write.write(json.dumps(out).encode() + b"\n")
    write.flush()
"""


class Pipe:
    """A running agent (direct or behind the proxy) that the benchmark talks to line by line."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.write = self.proc.stdin.write
        self.readline = self.proc.stdout.readline

    def round_trip(self, line: bytes) -> float:
        start = time.perf_counter()
        self.write(line)
        answer = self.readline()
        elapsed = time.perf_counter() - start
        if not answer:
            raise RuntimeError("the agent closed its stdout")
        return elapsed

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def ping(i: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "_bench/ping", "params": {"i": i}}).encode() + b"\n"


def prompt(i: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "session/prompt", "params": {
        "sessionId": "bench-session", "prompt": [{"type": "text", "text": f"message {i}"}]}}).encode() + b"\n"


def make_repo(folder: Path) -> str:
    """A leslie repository with one thread; returns the thread's ID."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([LESLIE, "init"], cwd=folder, check=True, capture_output=True)
    subprocess.run([LESLIE, "spawn", "--intent", "benchmark the ACP relay", "--id", "thread-bench"], cwd=folder,
                   check=True, capture_output=True)
    return "thread-bench"


def measure(pipes: dict[str, Pipe], make_line: object, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Round trips of each pipe, interleaved message by message."""
    assert callable(make_line)
    times: dict[str, list[float]] = {name: [] for name in pipes}
    for i in range(-warmup, rounds):
        for name, pipe in pipes.items():
            elapsed = pipe.round_trip(make_line(i + warmup))
            if i >= 0:
                times[name].append(elapsed)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000, help="round trips of ordinary messages per setup")
    parser.add_argument("--prompts", type=int, default=200, help="round trips of prompts per setup")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        folder.mkdir()
        thread = make_repo(folder)
        outside = Path(tmp) / "outside"
        outside.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LESLIE_")}
        agent = [sys.executable, "-c", ECHO_AGENT]
        pipes = {
            "direct": Pipe(agent, folder, env),
            "relay": Pipe([LESLIE, "acp", "--", *agent], outside, env),
            "injecting": Pipe([LESLIE, "acp", "--thread", thread, "--", *agent], folder, env),
        }
        try:
            messages = measure(pipes, ping, args.rounds, warmup=100)
            prompts = measure(pipes, prompt, args.prompts, warmup=5)
        finally:
            for pipe in pipes.values():
                pipe.close()

    def median_ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    direct = median_ms(messages["direct"])
    print(f"machine: nproc={os.cpu_count()}, Python {platform.python_version()}, {platform.system()} "
          f"{platform.release()}; {args.rounds} message and {args.prompts} prompt round trips per setup")
    print()
    print("| setup | median round trip | added per message (half the difference) | p90 round trip |")
    print("|---|---|---|---|")
    for name, label in (("direct", "direct pipe"), ("relay", "leslie acp, pure relay"),
                        ("injecting", "leslie acp, injection active")):
        values = messages[name]
        added = (median_ms(values) - direct) / 2
        p90 = statistics.quantiles(values, n=10)[-1] * 1000
        print(f"| {label} | {median_ms(values):.3f} ms | {added:+.3f} ms | {p90:.3f} ms |")
    prompt_direct = median_ms(prompts["direct"])
    for name, label in (("relay", "prompt, pure relay"), ("injecting", "prompt, injection active (smart mode)")):
        values = prompts[name]
        print(f"| {label} | {median_ms(values):.3f} ms | {median_ms(values) - prompt_direct:+.3f} ms "
              f"(whole round trip) | {statistics.quantiles(values, n=10)[-1] * 1000:.3f} ms |")
    worst = max((median_ms(messages[name]) - direct) / 2 for name in ("relay", "injecting"))
    verdict = "meets" if worst < TARGET_MS else "MISSES"
    print(f"\nadded latency per message: {worst:.3f} ms median ({verdict} the < {TARGET_MS:g} ms target)")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
