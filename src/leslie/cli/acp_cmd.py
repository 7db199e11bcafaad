"""`leslie acp`: the ACP proxy in front of any Agent Client Protocol agent (SPEC §7.5)."""

from typing import Annotated

import typer

from leslie.cli.common import GlobalOptions, RootOption, ThreadOption, open_repo, thread_arg
from leslie.errors import NotFoundError, UsageError

app = typer.Typer()


# Options stop at the agent command, which keeps its own options.
@app.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def acp(
    agent_command: Annotated[list[str] | None, typer.Argument(
        metavar="AGENT_COMMAND", help="The ACP agent to start, with its arguments.", show_default=False)]
    = None,
    thread: ThreadOption = None,
    root: RootOption = None,
) -> None:
    """Relay ACP between a client (e.g. Zed) on stdio and AGENT_COMMAND, injecting <thread_context>.

    The prompts of each session get the thread's context in front when the injection policy says so
    (start, context changed, compaction observed or predicted from the agent's usage_update reports).
    Everything else passes through unchanged. Without a leslie root or a current thread it only relays,
    with a warning on stderr. The exit code is the agent's.
    """
    from leslie.server.child import run_in_client

    run_in_client()  # it serves until its client hangs up: in the client's own process
    from leslie.integrations.acp import run_proxy

    if not agent_command:
        raise UsageError("no agent command: use `leslie acp [--thread ID] -- AGENT_COMMAND...`")
    root = root if root is not None else GlobalOptions.root
    if thread is not None:  # a unique prefix names its thread; outside a repository the proxy only relays
        try:
            repo = open_repo(root)
        except NotFoundError:
            repo = None
        if repo is not None:
            thread = thread_arg(repo, thread)
    raise typer.Exit(run_proxy(agent_command, root=root, thread=thread))

