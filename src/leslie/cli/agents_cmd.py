"""Agent commands: `hooks install|uninstall|status`, `sessions`, `stats`, `trust`.

What an agent runs on every prompt or tool call (`hook`, `inject`, `check-write`) is `cli/hook_cmd.py`.
"""

import sys
from typing import Annotated, Any, TextIO

import typer

from leslie.cli.common import (
    AgentArgument,
    JsonOption,
    RootOption,
    ThreadOption,
    emit,
    open_repo,
    table,
    thread_arg,
    wants_json,
    warn,
)
from leslie.cli.text import say
from leslie.errors import UsageError

app = typer.Typer()
hooks_app = typer.Typer(help="Install, remove or check leslie's hooks in an agent's project settings.",
                        no_args_is_help=True, rich_markup_mode=None)


def _hooks_result(result: Any, installing: bool, as_json: bool) -> None:
    verb = "installed in" if installing else "removed from"

    def human() -> None:
        if not result.changed:
            say(f"{result.path}: already up to date\n")
            return
        say(f"leslie hooks {verb} {result.path} ({', '.join(result.events)})\n")
        if installing:
            say(f"command: {result.command}\n")

    def human_with_next_steps() -> None:
        human()
        if installing and result.next_steps:
            say(f"next: {result.next_steps}\n")

    data = {"agent": result.agent, "path": result.path, "changed": result.changed, "events": list(result.events)}
    if installing:
        data.update({"command": result.command, "warnings": list(result.warnings),
                     "next_steps": result.next_steps})
    emit(data, as_json, human_with_next_steps)
    warn(list(result.warnings))


@hooks_app.command("install")
def hooks_install(
    agent: AgentArgument,
    uninstall: Annotated[bool, typer.Option("--uninstall", help="Remove leslie's entries (either form, from either "
                                                          "file) instead.")] = False,
    shared: Annotated[bool, typer.Option("--shared", help="For a team: the portable form, which runs the leslie on "
                                                    "PATH (one message and no effect where there is none; never "
                                                    "blocks a tool), in the project's shared file.")] = False,
    executable: Annotated[str | None, typer.Option(
        "--executable", help="The leslie executable the hooks run (default: the absolute path of this one).",
        show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Merge leslie's hook entries into the agent's settings, or write leslie's plugin (idempotent).

    By default for you on this machine: the hooks run this leslie by its absolute path (the write guard's
    fail-closed where the agent allows it), in the agent's per-user file when it has one
    (.claude/settings.local.json) and kept out of git; otherwise in .codex/hooks.json, .gemini/settings.json,
    .github/hooks/leslie.json, .qwen/settings.json, .factory/settings.json, or the plugin
    .opencode/plugins/leslie.js, .kilo/plugins/leslie.js, .pi/extensions/leslie.ts. With --shared, for a
    repository a team commits: the portable form in the shared file (.claude/settings.json).
    """
    import shlex

    from leslie.integrations import install as hooks

    repo = open_repo(root)
    if uninstall:
        _hooks_result(hooks.uninstall(repo.root, agent), False, json)
    else:
        chosen = shlex.quote(executable) if executable is not None else None
        _hooks_result(hooks.install(repo.root, agent, executable=chosen, shared=shared), True, json)


@hooks_app.command("uninstall")
def hooks_uninstall(agent: AgentArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Remove leslie's hook entries from the agent's settings; every other entry stays."""
    from leslie.integrations import install as hooks

    _hooks_result(hooks.uninstall(open_repo(root).root, agent), False, json)


@hooks_app.command("status")
def hooks_status(
    agent: Annotated[str | None, typer.Argument(help="claude-code, codex, gemini, copilot, qwen, factory, opencode, "
                                                "kilo or pi (default: all).",
                                                show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Say whether leslie's hooks are installed, current and in their place, and what their command runs, found
    without running it; exit 1 when something is missing, misplaced or broken (or, without AGENT, when no agent
    has them)."""
    from dataclasses import asdict

    from leslie.integrations import hooks_status
    from leslie.integrations import install as hooks

    repo = open_repo(root)
    agents = [hooks.agent_hooks(agent).agent] if agent is not None else list(hooks.AGENTS)
    statuses = [hooks_status.check(repo.root, name) for name in agents]
    considered = statuses if agent is not None else [s for s in statuses if s.installed or s.problem]
    broken = not considered or any(not s.ok for s in considered)

    def human() -> None:
        for status in statuses:  # a repository's hook files may hold anything: `say` escapes it
            if status.ok:
                runs = ", ".join(_runs(c) for c in status.commands)
                say(f"{status.agent}: ok: {len(status.installed)} hooks in {status.path}, running {runs}\n")
            else:
                for line in hooks_status.status_lines(status):
                    say(line + "\n")

    emit({"ok": not broken, "agents": [{**asdict(s), "ok": s.ok, "problems": hooks_status.status_lines(s) if not s.ok
                                        else []} for s in statuses]}, json, human)
    if broken:
        raise typer.Exit(1)


def _runs(command: Any) -> str:
    """What one checked command runs, in words (it was never started to find out)."""
    where = "the leslie on PATH, " if command.form == "shared" else ""
    which = f"this leslie, {command.version}" if command.this_leslie else "another leslie, not run to check it"
    return f"{where}{command.executable} ({which})"


@app.command()
def sessions(thread: ThreadOption = None, root: RootOption = None, json: JsonOption = False) -> None:
    """List the agent sessions recorded in this work tree's machine state (of one thread with --thread)."""
    from leslie.store import sessions as lib

    repo = open_repo(root)
    rows = lib.list_sessions(str(repo.root), None if thread is None else thread_arg(repo, thread))

    def human() -> None:
        if not rows:
            say("no agent sessions yet\n")
            return
        table(["agent", "session", "thread", "rounds", "injections", "last activity"], [
            [str(r["agent"]), str(r["session_id"]), str(r["thread"]), str(r["rounds"]),
             ", ".join(f"{k} {v}" for k, v in sorted(r["injections"].items())) or "-", str(r["updated_at"])]
            for r in rows])

    emit(rows, json, human)


@app.command()
def stats(thread: ThreadOption = None, root: RootOption = None, json: JsonOption = False) -> None:
    """Rounds, injections by reason, tokens injected (bytes/4), and what mode `always` would have spent."""
    from leslie.store import sessions as lib

    repo = open_repo(root)
    data = lib.stats(str(repo.root), None if thread is None else thread_arg(repo, thread))

    def human() -> None:
        reasons = ", ".join(f"{k} {v}" for k, v in data["injections"].items()) or "none"
        say(
            f"sessions: {data['sessions']}\nrounds: {data['rounds']}\n"
            f"injections: {data['injections_total']} ({reasons})\ncompactions observed: {data['compactions']}\n"
            f"tokens injected: {data['tokens_injected']} (paths {data['tokens_by_level']['paths']}, own plan and "
            f"progress {data['tokens_by_level']['own']}, referenced files {data['tokens_by_level']['refs']})\n"
            f"tokens mode `always` would have injected: {data['always_tokens']}\n"
            f"saved: {data['tokens_saved']} tokens ({data['saved_percent']}%)\n")
        for row in data["per_session"]:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(row["injections"].items())) or "none"
            usage = row["usage"]
            context = (f", context {usage[0]} of {usage[1]} tokens ({row['usage_source']})"
                       if isinstance(usage, list) and len(usage) == 2 else ", context size estimated")
            say(f"  {row['agent']} {row['session_id']} ({row['thread']}): {row['rounds']} rounds, "
                f"injections: {reasons}, {row['tokens_injected']} of {row['always_tokens']} tokens"
                f"{context}\n")

    emit(data, json, human)


@app.command()
def trust(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve without asking (for scripts: review the "
                                      "listing first).")] = False,
    check: Annotated[bool, typer.Option("--check", help="Only tell whether everything is approved "
                                        "(exit 1 when it is not).")] = False,
    revoke: Annotated[bool, typer.Option("--revoke", help="Withdraw the approval for this repository.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Review and approve what this repository may run on this machine: the [[context.commands]] of
    .leslie/config.toml and the template overrides in .leslie/templates/ (recorded outside the repository)."""
    from leslie.context import trust as lib

    where = str(open_repo(root).root)
    if revoke:
        had = lib.revoke(where)
        emit({"revoked": had, "trust_file": lib.trust_file()}, json, lambda: say(
            "approval withdrawn\n" if had else "nothing was approved for this repository\n"))
        return
    review = lib.review(where)
    data = {"approved": review.approved, **review.to_json()}
    if check:
        emit(data, json, lambda: say(
            "nothing to approve (no context commands, no template overrides)\n" if review.empty
            else "approved on this machine\n" if review.approved
            else "NOT approved on this machine (review them, then run `leslie trust`)\n"))
        if not review.approved:
            raise typer.Exit(1)
        return
    if review.empty:
        emit(data, json, lambda: say("nothing to approve (no context commands, no template "
                                     "overrides)\n"))
        return
    listing = sys.stderr if wants_json(json) else sys.stdout  # --json keeps stdout for the document
    listing.write("".join(line + "\n" for line in review.lines()))
    if review.approved:
        emit(data, json, lambda: say("already approved on this machine\n"))
        return
    if not yes and not _confirmed(listing, where):
        emit(data, json, lambda: say("not approved; nothing changed\n"))
        raise typer.Exit(1)
    lib.grant(where, review.commands, review.usable)
    data["approved"] = True
    emit(data, json, lambda: say(f"approved on this machine (recorded in {lib.trust_file()})\n"))


def _confirmed(out: TextIO, where: str) -> bool:
    """Ask on the terminal; without one, refuse (exit 2): an approval is never given by a pipe's silence."""
    from leslie.terminal import visible

    if not sys.stdin.isatty():
        raise UsageError("stdin is not a terminal: review the listing above, then run `leslie trust --yes` "
                         "to approve it")
    out.write(f"Approve all of this for {visible(where)}? [y/N] ")
    out.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
