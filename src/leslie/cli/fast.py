"""The commands an agent runs on every prompt or tool call: `hook`, `inject`, `check-write`.

`leslie.__main__` dispatches here without importing Typer, Rich, Jinja2, lxml, watchdog or filelock: with
its budget of two bare interpreter starts (SPEC §10), the hook cannot afford them, nor argparse (measured:
~3 ms). Arguments are therefore parsed by hand; `--help` goes to the Typer stubs in `cli/agents_cmd.py`.

- `leslie hook AGENT` (claude-code, codex, gemini, qwen, factory, opencode, kilo, pi; `copilot EVENT`, since Copilot's
  payloads do not name their event): one hook event on stdin, the agent's answer on stdout. Always
  exit 0: garbage input, a missing thread or any internal error is one warning line on stderr, nothing on
  stdout (`{}` for Gemini CLI, which reads stderr when stdout is empty; the write guard fails closed inside
  `.leslie/threads/`, see `leslie.integrations`).
- `leslie inject [--thread ID] [--session ID] [--message TEXT|-] [--usage USED/SIZE] [--compacted]
  [--transcript PATH] [--agent NAME] [--root PATH]`: records a round; prints the context (then a blank
  line and the message) when the policy injects, else only the message. Bad arguments exit 2; a missing
  root or thread, or an internal error, still prints the message (a wrapper script keeps working) with a
  warning on stderr, exit 0.
- `leslie check-write PATH... [--thread ID] [--root PATH]`: exit 0 when every path may be written, 1 when
  one is denied (the reason on stderr), 2 without a current thread, 3 without a `.leslie` root (found from
  the working directory, else from a path that leads into one).
"""

from __future__ import annotations

import json
import os
import sys

from leslie.errors import THREAD_ID_RULE, LeslieError, NotFoundError, UsageError
from leslie.terminal import visible

# Each agent's adapter module in leslie.integrations (Kilo Code is opencode's fork: the same plugin and events).
ADAPTERS = {"claude-code": "claude_code", "codex": "codex", "gemini": "gemini", "copilot": "copilot", "qwen": "qwen",
            "factory": "factory", "opencode": "opencode", "kilo": "opencode", "pi": "pi"}
AGENTS = tuple(ADAPTERS)
EVENT_AGENTS = ("copilot",)  # agents whose hook command names the event: `leslie hook copilot EVENT`
HOOK_USAGE = ("usage: leslie hook {claude-code|codex|gemini|qwen|factory|opencode|kilo|pi}"
              "  or  leslie hook copilot EVENT"
              "  (reads the hook event as JSON on stdin)")
INJECT_USAGE = ("usage: leslie inject [--thread ID] [--session ID] [--message TEXT|-] [--usage USED/SIZE] "
                "[--compacted] [--transcript PATH] [--agent NAME] [--root PATH]")
CHECK_USAGE = "usage: leslie check-write PATH... [--thread ID] [--root PATH]"


def _say_err(text: str) -> None:
    """A line on stderr, made `visible`: a warning or an error may quote the repository or a hook's payload."""
    sys.stderr.write(visible(text, lines=True) + "\n")


def _warn(text: str) -> None:
    _say_err(f"leslie: warning: {text}")


def _debug() -> None:
    if os.environ.get("LESLIE_DEBUG") == "1":
        import traceback

        traceback.print_exc()


def _describe(exc: BaseException) -> str:
    return exc.message if isinstance(exc, LeslieError) else f"internal error: {type(exc).__name__}: {exc}"


def _parse(args: list[str], valued: tuple[str, ...], flags: tuple[str, ...],
           usage: str) -> tuple[dict[str, str], set[str], list[str]]:
    """`--opt VALUE` / `--opt=VALUE` options, `--flag` flags and positional arguments; UsageError otherwise."""
    values: dict[str, str] = {}
    seen: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, has_value, inline = arg.partition("=")
        if arg == "--":
            positional.extend(args[i + 1:])
            break
        if name in valued:
            if has_value:
                values[name] = inline
            elif i + 1 < len(args):
                values[name] = args[i + 1]
                i += 1
            else:
                raise UsageError(f"option {name} needs a value\n{usage}")
        elif arg in flags:
            seen.add(arg)
        elif arg.startswith("--") or (arg.startswith("-") and arg != "-"):
            raise UsageError(f"unknown option {arg}\n{usage}")
        else:
            positional.append(arg)
        i += 1
    return values, seen, positional


# -- leslie hook AGENT ---------------------------------------------------------------------------------

def _read_payload(agent: str) -> dict[str, object]:
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r} for `leslie hook` (expected one of {', '.join(AGENTS)})")
    try:
        payload = json.loads(sys.stdin.buffer.read())
    except ValueError:
        raise UsageError("the hook input on stdin is not JSON") from None
    if not isinstance(payload, dict):
        raise UsageError("the hook input on stdin is not a JSON object")
    return payload


def _hook(args: list[str]) -> int:
    wanted = 2 if args and args[0] in EVENT_AGENTS else 1
    if len(args) != wanted or any(arg.startswith("-") for arg in args):
        sys.stderr.write(HOOK_USAGE + "\n")
        return 2
    agent = args[0]
    try:
        payload = _read_payload(agent)
        # __import__, not importlib: nothing more to load on the hook path
        adapter = __import__(f"leslie.integrations.{ADAPTERS[agent]}", fromlist=["answer"])
        result = adapter.answer(payload, args[1]) if wanted == 2 else adapter.answer(payload, agent)
    except Exception as exc:  # a hook never fails the agent's turn
        _debug()
        _warn(_describe(exc))
        if agent == "gemini":  # Gemini CLI reads stderr as the answer when stdout is empty
            sys.stdout.write("{}\n")
        return 0
    for line in result.warnings:
        _warn(line)
    if result.stdout is not None:
        sys.stdout.write(result.stdout + "\n")
    return 0


# -- leslie inject ---------------------------------------------------------------------------------------

def _parse_usage(text: str) -> tuple[int, int]:
    used, sep, size = text.partition("/")
    try:
        value = (int(used), int(size))
    except ValueError:
        value = None
    if not sep or value is None or value[0] < 0 or value[1] <= 0:
        raise UsageError(f"--usage must be USED/SIZE in tokens, e.g. 120000/200000 (got {text!r})")
    return value


def _print_message(message: str | None) -> None:
    if message:
        sys.stdout.write(message if message.endswith("\n") else message + "\n")


class _InjectArgs:
    __slots__ = ("agent", "compacted", "message", "root", "session_id", "thread", "transcript", "usage")

    def __init__(self, args: list[str]) -> None:
        from leslie.inject import blocks
        from leslie.store import sessions

        valued = ("--thread", "--session", "--message", "--usage", "--transcript", "--agent", "--root")
        values, flags, positional = _parse(args, valued, ("--compacted",), INJECT_USAGE)
        if positional:
            raise UsageError(f"unexpected argument {positional[0]!r}\n{INJECT_USAGE}")
        self.usage = _parse_usage(values["--usage"]) if "--usage" in values else None
        self.agent = sessions.validate_agent(values.get("--agent", "inject"))
        self.root = values.get("--root")
        self.thread = values.get("--thread")
        if self.thread is not None:  # a person may name it by a unique prefix (`8lg`): resolved here
            self.thread = _named_thread(self.thread, self.root)
            if not blocks.is_thread_id(self.thread):
                raise UsageError(f"invalid thread ID {self.thread!r}: " + THREAD_ID_RULE)
        self.session_id = values.get("--session") or os.environ.get("LESLIE_SESSION") or "default"
        self.transcript = values.get("--transcript")
        self.compacted = "--compacted" in flags
        self.message = values.get("--message")
        if self.message == "-":
            self.message = sys.stdin.buffer.read().decode("utf-8", "replace")


def _named_thread(text: str, root_option: str | None) -> str:
    """The thread a person named with `--thread`: a full ID as given, or the one a unique prefix names.

    A full ID whose folder exists costs one `lstat`; outside a repository, or when no thread starts so, the
    text is returned as it is, for the checks it always met (an ambiguous prefix is a UsageError).
    """
    from leslie.inject import injector

    root = injector.discover_root(os.getcwd(), root_option)
    if root is None or os.path.lexists(os.path.join(root, ".leslie", "threads", text)):
        return text
    from leslie.store.names import resolve_thread_id

    try:
        return resolve_thread_id(root, text)
    except NotFoundError:  # no thread starts so: the text goes on to the checks it always met
        return text


def _inject_target(options: _InjectArgs) -> tuple[str, str]:
    from leslie.inject import injector

    root = injector.discover_root(os.getcwd(), options.root)
    if root is None:
        raise LeslieError("no .leslie/ found here or above (run `leslie init`); the message is passed on")
    thread_id = injector.session_thread(root, agent=options.agent, session_id=options.session_id,
                                        explicit=options.thread)
    if thread_id is None:
        raise LeslieError("no current thread (pass --thread ID, set LESLIE_THREAD, or run `leslie switch ID`); "
                          "the message is passed on")
    return root, thread_id


def _inject(args: list[str]) -> int:
    from leslie.inject import blocks, injector

    try:
        options = _InjectArgs(args)
    except UsageError as exc:  # a malformed option, or a --thread prefix naming several threads
        _say_err(f"leslie: error: {exc.message}")
        return exc.exit_code
    try:
        root, thread_id = _inject_target(options)
        handle = blocks.RepoHandle(root, served=True)  # a short-lived process: ask the render server
        result = injector.on_user_message(
            handle, agent=options.agent, session_id=options.session_id, thread_id=thread_id,
            message=options.message, usage=options.usage, transcript_path=options.transcript,
            compacted=options.compacted)
    except Exception as exc:  # the wrapper keeps its message whatever happens to leslie
        _debug()
        _warn(_describe(exc))
        _print_message(options.message)
        return 0
    for line in result.warnings:
        _warn(line)
    if result.text is not None:
        sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
        if options.message:
            sys.stdout.write("\n")
    _print_message(options.message)
    return 0


# -- leslie check-write PATH... -------------------------------------------------------------------------

def _path_root(path: str) -> str | None:
    """The repository a path leads into: the folder before its `.leslie` component, as written or resolved."""
    absolute = os.path.abspath(path)
    for candidate in (absolute, os.path.realpath(absolute)):
        parts = candidate.split(os.sep)
        folded = [p.casefold() for p in parts]
        if ".leslie" in folded:
            return os.sep.join(parts[:folded.index(".leslie")]) or os.sep
    return None


def _check_target(values: dict[str, str], paths: list[str]) -> tuple[str, str | None]:
    """(repository root, thread) for check-write: the root from the working directory (or `--root`), else
    from the first path leading into a repository; the thread from `--thread`, `LESLIE_THREAD`, or the
    repository's current thread."""
    from leslie.inject import blocks, injector

    if not paths:
        raise UsageError(f"check-write needs at least one PATH\n{CHECK_USAGE}")
    root = injector.discover_root(os.getcwd(), values.get("--root"))
    if root is None:
        root = next((r for r in map(_path_root, paths) if r is not None), None)
    if root is None:
        raise NotFoundError("no .leslie/ found here or above (run `leslie init` first)")
    chosen = values.get("--thread")
    if chosen:
        chosen = _named_thread(chosen, root)
    chosen = chosen or os.environ.get("LESLIE_THREAD") or injector.recorded_current_thread(root)
    if not chosen:
        raise UsageError("no current thread: pass --thread ID, set LESLIE_THREAD, or run `leslie switch ID`")
    if not blocks.is_thread_id(chosen):
        raise UsageError(f"invalid thread ID {chosen!r}: " + THREAD_ID_RULE)
    return root, chosen


def _check_write(args: list[str]) -> int:
    from leslie.guard.paths import DENY, check_path
    from leslie.inject import injector

    try:
        values, _flags, paths = _parse(args, ("--thread", "--root"), (), CHECK_USAGE)
        root, thread_id = _check_target(values, paths)

        def thread_of(other_root: str) -> str | None:
            # Another repository a path leads into: its own current thread; `--thread` and LESLIE_THREAD name
            # this repository's (leslie.guard.paths.Scope.thread).
            return injector.recorded_current_thread(other_root)

        denied = 0
        for path in paths:
            verdict = check_path(root, thread_id, path, thread_of=thread_of)
            if verdict.decision == DENY:
                _say_err(f"leslie: denied: {path}: {verdict.reason}")
                denied += 1
    except LeslieError as exc:
        _say_err(f"leslie: error: {exc.message}")
        return exc.exit_code
    except Exception as exc:  # an internal error denies: the check fails closed
        _debug()
        _say_err(f"leslie: error: {_describe(exc)}")
        return 1
    return 1 if denied else 0


def run_fast(args: list[str]) -> int:
    """Run `hook`, `inject` or `check-write` (args[0]) and return the exit code."""
    command, rest = args[0], args[1:]
    handlers = {"hook": _hook, "inject": _inject, "check-write": _check_write}
    if command not in handlers:
        _say_err(f"leslie: error: {command} is not a fast command")
        return 2
    try:
        code = handlers[command](rest)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`leslie inject ... | head`): nothing more to say, and no traceback at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code
