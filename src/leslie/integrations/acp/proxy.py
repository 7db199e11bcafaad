"""`leslie acp`: which repository and thread the proxy injects for, the agent's environment, and which relay runs.

Three ways to run: with a repository and a thread, the relay injects; with no repository around the proxy
and no root named, it waits for the cwd of the client's first session to look there; otherwise it only relays,
after one line of warning.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from leslie.errors import LeslieError
from leslie.integrations.acp.policy import ContextPolicy, LesliePolicy
from leslie.integrations.acp.relay import AcpRelay
from leslie.integrations.acp.stderr import warn

if TYPE_CHECKING:
    from leslie.store.repository import Repository

INJECTED_BY_VARIABLE = "LESLIE_INJECTED_BY"


def agent_environment(policy: LesliePolicy | None) -> dict[str, str]:
    """The agent's environment: ours, plus the root (and a named thread) so leslie commands it runs agree."""
    env = dict(os.environ)
    # The adapters (claude-agent-acp, codex-acp) load the project's hooks: leslie's hooks there must leave the
    # context to this proxy, or the agent would be told twice. The write guard hooks still run.
    env[INJECTED_BY_VARIABLE] = "acp"
    if policy is not None:
        env["LESLIE_ROOT"] = str(policy.repo.root)
        if not policy.follows_switch:
            env["LESLIE_THREAD"] = policy.thread_id
    return env


def find_policy(root: str | None, thread: str | None,
                start: Path | None = None) -> tuple[Repository | None, str | None, str | None]:
    """The repository and thread to inject for; else what is missing, as a message (the proxy then only relays)."""
    from leslie.ops.threads import current_thread_id
    from leslie.store.files import find_root
    from leslie.store.repository import Repository

    try:
        repo = Repository(find_root(start, explicit=root))
    except LeslieError as exc:
        return None, None, exc.message
    try:
        thread_id = current_thread_id(repo, thread)
    except LeslieError as exc:
        return repo, None, exc.message
    if not repo.thread_exists(thread_id):
        return repo, None, f"no such thread: {thread_id}"
    return repo, thread_id, None


def run_proxy(command: Sequence[str], *, root: str | None = None, thread: str | None = None) -> int:
    """`leslie acp`: relay between this process's stdio and the agent `command`; returns the exit code.

    The repository is the one around the working directory (or `root`); when there is none and no root was
    named, the cwd of the client's first session is tried (an editor may start agents anywhere). With no
    repository or no thread, the proxy only relays, after one line of warning.
    """
    explicit = root if root is not None else os.environ.get("LESLIE_ROOT") or None
    follows_switch = not (thread or os.environ.get("LESLIE_THREAD"))
    repo, thread_id, problem = find_policy(explicit, thread)
    if repo is not None and thread_id is not None:
        policy = LesliePolicy(repo, thread_id, follows_switch=follows_switch)
        return AcpRelay(command, policy, env=agent_environment(policy)).run()
    if repo is None and explicit is None:
        def late_policy(cwd: str) -> ContextPolicy | None:
            late_repo, late_thread, late_problem = find_policy(None, thread, Path(cwd))
            if late_repo is None or late_thread is None:
                warn(f"warning: {late_problem or problem}; relaying without thread context")
                return None
            return LesliePolicy(late_repo, late_thread, follows_switch=follows_switch)

        return AcpRelay(command, None, late_policy=late_policy, env=agent_environment(None)).run()
    warn(f"warning: {problem}; relaying without thread context")
    return AcpRelay(command, None, env=agent_environment(None)).run()
