"""The ACP proxy (SPEC §7.5): relays the Agent Client Protocol between a client (an editor) and an agent process.

A protocol adapter only. ACP is newline-delimited JSON-RPC 2.0 over stdio; the relay forwards every line in
order and, when it does not change a line, forwards its original bytes. It changes exactly one thing: a
`session/prompt` request gets a text block with `<thread_context>` in front of its prompt when the injection
policy says so. It also reports what it sees to the policy: the agent's `usage_update` notifications (real
token usage) and the size of the agent's replies. What to inject and when is decided in `leslie.inject.injector`.

Nothing may break the relay, neither a policy failure nor what either side sends (docs/security.md, "The ACP
proxy"): a line that is not JSON, nests deeper than the parser goes or is not an object is forwarded as it
came; a line over `MAX_LINE` is forwarded in pieces as it comes, never held or read; any other failure to read
one message is one line on stderr, and the message goes through unchanged.

The modules, from the command down:
- `proxy`: `run_proxy` (the command), the repository and thread it injects for, the agent's environment
- `relay`: `AcpRelay`, the agent process, the relay threads, the signals and the exit code
- `sessions`: `SessionTracker`, what the relay follows of the sessions; the block put in front of a prompt
- `policy`: `ContextPolicy`, `LesliePolicy` and the worker thread that makes their calls
- `messages`: a line read as JSON (or not, when it is hostile) and written back; what leslie reads in a message
- `framing`: reads, writes and the line splitter with its cap on a line's length (`MAX_LINE`)
- `stderr`: `warn`, the proxy's one line on stderr
"""

from leslie.integrations.acp.framing import MAX_LINE, LineSplitter
from leslie.integrations.acp.messages import MAX_BRACKETS, prompt_text
from leslie.integrations.acp.policy import AGENT_NAME, ContextPolicy, LesliePolicy
from leslie.integrations.acp.proxy import INJECTED_BY_VARIABLE, agent_environment, find_policy, run_proxy
from leslie.integrations.acp.relay import AcpRelay, AgentStartError
from leslie.integrations.acp.stderr import warn

_LineSplitter = LineSplitter  # the name tests/test_acp_hostile.py knows it by

__all__ = [
    "AGENT_NAME",
    "INJECTED_BY_VARIABLE",
    "MAX_BRACKETS",
    "MAX_LINE",
    "AcpRelay",
    "AgentStartError",
    "ContextPolicy",
    "LesliePolicy",
    "LineSplitter",
    "agent_environment",
    "find_policy",
    "prompt_text",
    "run_proxy",
    "warn",
]
