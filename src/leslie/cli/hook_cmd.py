"""What an agent runs on every prompt or tool call: `leslie hook`, `leslie inject`, `leslie check-write`.

- `leslie hook AGENT` (claude-code, codex, gemini, qwen, factory, opencode, kilo, pi; `copilot EVENT`, since
  Copilot's payloads do not name their event): one hook event on stdin, the agent's answer on stdout. Once its
  arguments parse it always exits 0: garbage input, a missing thread or any internal error is one warning line
  on stderr and nothing on stdout (`{}` for Gemini CLI, which reads stderr when stdout is empty; the write
  guard fails closed inside `.leslie/threads/`, see `leslie.integrations`).
- `leslie inject`: records a round; prints the context (then a blank line and the message) when the policy
  injects, else only the message. Bad arguments exit 2; a missing root or thread, or an internal error, still
  prints the message (a wrapper script keeps working) with a warning on stderr, exit 0.
- `leslie check-write PATH...`: exit 0 when every path may be written, 1 when one is denied (the reason on
  stderr), 2 without a current thread, 3 without a `.leslie` root (found from the working directory, else
  from a path that leads into one). An internal error denies: exit 1.

The library code does the work (`leslie.integrations`, `leslie.inject.injector`, `leslie.guard.paths`),
imported when the command runs.
"""

import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from leslie.cli.common import AgentArgument, GlobalOptions, RootOption, ThreadOption, warn_notes
from leslie.cli.text import say_err
from leslie.errors import THREAD_ID_RULE, LeslieError, NotFoundError, UsageError

if TYPE_CHECKING:
    from leslie.integrations import HookAnswer

# Each agent's adapter module in leslie.integrations (Kilo Code is opencode's fork: the same plugin and events).
ADAPTERS = {"claude-code": "claude_code", "codex": "codex", "gemini": "gemini", "copilot": "copilot", "qwen": "qwen",
            "factory": "factory", "opencode": "opencode", "kilo": "opencode", "pi": "pi"}
AGENTS = tuple(ADAPTERS)
EVENT_AGENTS = ("copilot",)  # agents whose hook command names the event: `leslie hook copilot EVENT`

EventArgument = Annotated[str | None, typer.Argument(help="Copilot only: the event the hook answers "
                                                          "(sessionStart, userPromptSubmitted, preToolUse, ...).",
                                                     show_default=False)]

app = typer.Typer()


def _debug() -> None:
    if os.environ.get("LESLIE_DEBUG") == "1":
        import traceback

        traceback.print_exc()


def _describe(exc: BaseException) -> str:
    return exc.message if isinstance(exc, LeslieError) else f"internal error: {type(exc).__name__}: {exc}"


def _write_answer(text: str) -> None:
    """`text` on stdout, flushed now: a reader that went away (`leslie inject ... | head`) is no error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# -- leslie hook AGENT -----------------------------------------------------------------------------------

@app.command()
def hook(agent: AgentArgument, event: EventArgument = None) -> None:
    """Answer one hook event of AGENT (JSON on stdin) in the agent's format; always exit 0.

    Installed by `leslie hooks install AGENT`. SessionStart and UserPromptSubmit get the <thread_context>
    block when the injection policy says so; PreToolUse denies writes into another thread's folder;
    PostToolUse (and Claude Code's PostToolUseFailure) of a shell command puts back what it changed in
    other threads' folders or leslie's state, and tells the agent; Stop checks calls that got no
    PostToolUse; Codex's PostCompact makes the next prompt re-inject. Copilot CLI's payloads do not name
    their event: its hooks run `leslie hook copilot EVENT`. Qwen Code's tools (write_file, edit,
    run_shell_command) are guarded like Claude Code's.
    """
    if agent in EVENT_AGENTS and event is None:
        raise UsageError(f"{agent}'s hooks name the event they answer: leslie hook {agent} EVENT")
    if agent not in EVENT_AGENTS and event is not None:
        raise UsageError(f"unexpected argument {event!r}: only `leslie hook copilot EVENT` names an event")
    if GlobalOptions.root is not None:  # `leslie --root PATH hook AGENT`: the adapters read LESLIE_ROOT
        os.environ["LESLIE_ROOT"] = GlobalOptions.root
    try:
        result = _answer(agent, event)
    except Exception as exc:  # a hook never fails the agent's turn
        _debug()
        warn_notes([_describe(exc)])
        if agent == "gemini":  # Gemini CLI reads stderr as the answer when stdout is empty
            _write_answer("{}\n")
        return
    warn_notes(result.warnings)
    if result.stdout is not None:
        _write_answer(result.stdout + "\n")


def _answer(agent: str, event: str | None) -> "HookAnswer":
    """The adapter's answer to the event on stdin."""
    import json

    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r} for `leslie hook` (expected one of {', '.join(AGENTS)})")
    try:
        payload = json.loads(sys.stdin.buffer.read())
    except ValueError:
        raise UsageError("the hook input on stdin is not JSON") from None
    if not isinstance(payload, dict):
        raise UsageError("the hook input on stdin is not a JSON object")
    adapter = importlib.import_module(f"leslie.integrations.{ADAPTERS[agent]}")
    answer: HookAnswer = adapter.answer(payload, agent if event is None else event)
    return answer


# -- leslie inject ---------------------------------------------------------------------------------------

@app.command()
def inject(
    thread: ThreadOption = None,
    session: Annotated[str | None, typer.Option("--session", help="Agent session ID (default: LESLIE_SESSION, "
                                                "else 'default').", show_default=False)] = None,
    message: Annotated[str | None, typer.Option("--message", help="The user's message, or - to read it from "
                                                "stdin; printed after the context.", show_default=False)] = None,
    usage: Annotated[str | None, typer.Option("--usage", help="Real context usage USED/SIZE in tokens.",
                                              show_default=False)] = None,
    compacted: Annotated[bool, typer.Option("--compacted", help="The agent's context was just compacted.")]
    = False,
    transcript: Annotated[str | None, typer.Option("--transcript", help="Path of the conversation transcript "
                                                   "(its size estimates context use).", show_default=False)]
    = None,
    agent: Annotated[str, typer.Option("--agent", help="Agent name for the session records.")] = "inject",
    root: RootOption = None,
) -> None:
    """Record a round of an agent session; print the <thread_context> when the policy says so, then the message.

    For wrapper scripts and agents without hooks. Without a .leslie root or a thread the message is still
    printed (with a warning on stderr).
    """
    from leslie.inject import blocks, injector
    from leslie.store import sessions
    from leslie.store.model import is_thread_id

    # Bad arguments are usage errors (exit 2, nothing printed); from here on the message always gets through.
    rounds = _parse_usage(usage) if usage is not None else None
    agent = sessions.validate_agent(agent)
    root = root if root is not None else GlobalOptions.root
    if thread is not None:  # a person may name it by a unique prefix (`8lg`): resolved here
        thread = _named_thread(thread, root)
        if not is_thread_id(thread):
            raise UsageError(f"invalid thread ID {thread!r}: " + THREAD_ID_RULE)
    session_id = session or os.environ.get("LESLIE_SESSION") or "default"
    if message == "-":
        message = sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        where, thread_id = _inject_target(root, agent, session_id, thread)
        handle = blocks.RepoHandle(where)
        result = injector.on_user_message(
            handle, agent=agent, session_id=session_id, thread_id=thread_id, message=message, usage=rounds,
            transcript_path=transcript, compacted=compacted)
    except Exception as exc:  # the wrapper keeps its message whatever happens to leslie
        _debug()
        warn_notes([_describe(exc)])
        _write_answer(_message_lines(message))
        return
    warn_notes(result.warnings)
    context = ""
    if result.text is not None:  # the block, then a blank line before the message
        context = (result.text if result.text.endswith("\n") else result.text + "\n") + ("\n" if message else "")
    _write_answer(context + _message_lines(message))


def _message_lines(message: str | None) -> str:
    """The message as printed: ending with a line feed (nothing for no message)."""
    if not message:
        return ""
    return message if message.endswith("\n") else message + "\n"


def _parse_usage(text: str) -> tuple[int, int]:
    used, sep, size = text.partition("/")
    try:
        value = (int(used), int(size))
    except ValueError:
        value = None
    if not sep or value is None or value[0] < 0 or value[1] <= 0:
        raise UsageError(f"--usage must be USED/SIZE in tokens, e.g. 120000/200000 (got {text!r})")
    return value


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


def _inject_target(root_option: str | None, agent: str, session_id: str, thread: str | None) -> tuple[str, str]:
    """(repository root, thread) of an `inject`; a LeslieError when there is none, for the warning."""
    from leslie.inject import injector

    root = injector.discover_root(os.getcwd(), root_option)
    if root is None:
        raise LeslieError("no .leslie/ found here or above (run `leslie init`); the message is passed on")
    thread_id = injector.session_thread(root, agent=agent, session_id=session_id, explicit=thread)
    if thread_id is None:
        raise LeslieError("no current thread (pass --thread ID, set LESLIE_THREAD, or run `leslie switch ID`); "
                          "the message is passed on")
    return root, thread_id


# -- leslie check-write PATH... -------------------------------------------------------------------------

@app.command("check-write")
def check_write(
    paths: Annotated[list[str], typer.Argument(help="Paths to check (relative to the working directory).",
                                               show_default=False)],
    thread: ThreadOption = None,
    root: RootOption = None,
) -> None:
    """Exit 0 when the current thread may write every PATH, 1 when one is denied (reason on stderr).

    Denied: anything inside another thread's folder under .leslie/threads/ (references are read-only), or in
    .leslie/threads/ outside any thread's folder. For agents without hooks, or a git pre-commit hook.
    """
    try:
        denied = _denied_paths(paths, thread, root if root is not None else GlobalOptions.root)
    except LeslieError:
        raise  # reported as every command's error: its message, its exit code (2 or 3 here)
    except Exception as exc:  # an internal error denies: the check fails closed
        _debug()
        say_err(f"leslie: error: {_describe(exc)}\n")
        raise typer.Exit(1) from None
    if denied:
        raise typer.Exit(1)


def _denied_paths(paths: list[str], thread: str | None, root_option: str | None) -> int:
    """How many of `paths` the thread may not write; each denial said on stderr with its reason."""
    from pathlib import Path

    from leslie.guard.paths import DENY, check_path
    from leslie.store.files import recorded_current_thread

    root, thread_id = _check_target(paths, thread, root_option)

    def thread_of(other_root: str) -> str | None:
        # Another repository a path leads into: its own current thread; `--thread` and LESLIE_THREAD name
        # this repository's (leslie.guard.paths.Scope.thread).
        return recorded_current_thread(Path(other_root))

    denied = 0
    for path in paths:
        verdict = check_path(root, thread_id, path, thread_of=thread_of)
        if verdict.decision == DENY:
            say_err(f"leslie: denied: {path}: {verdict.reason}\n")
            denied += 1
    return denied


def _path_root(path: str) -> str | None:
    """The repository a path leads into: the folder before its `.leslie` component, as written or resolved."""
    absolute = os.path.abspath(path)
    for candidate in (absolute, os.path.realpath(absolute)):
        parts = candidate.split(os.sep)
        folded = [p.casefold() for p in parts]
        if ".leslie" in folded:
            return os.sep.join(parts[:folded.index(".leslie")]) or os.sep
    return None


def _check_target(paths: list[str], thread: str | None, root_option: str | None) -> tuple[str, str]:
    """(repository root, thread) for check-write: the root from the working directory (or `--root`), else
    from the first path leading into a repository; the thread from `--thread`, `LESLIE_THREAD`, or the
    repository's current thread."""
    from pathlib import Path

    from leslie.inject import injector
    from leslie.store.files import recorded_current_thread
    from leslie.store.model import is_thread_id

    root = injector.discover_root(os.getcwd(), root_option)
    if root is None:
        root = next((r for r in map(_path_root, paths) if r is not None), None)
    if root is None:
        raise NotFoundError("no .leslie/ found here or above (run `leslie init` first)")
    chosen = _named_thread(thread, root) if thread else None
    chosen = chosen or os.environ.get("LESLIE_THREAD") or recorded_current_thread(Path(root))
    if not chosen:
        raise UsageError("no current thread: pass --thread ID, set LESLIE_THREAD, or run `leslie switch ID`")
    if not is_thread_id(chosen):
        raise UsageError(f"invalid thread ID {chosen!r}: " + THREAD_ID_RULE)
    return root, chosen
