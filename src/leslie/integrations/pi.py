"""pi (`@mariozechner/pi-coding-agent`): `leslie hook pi` answers the events of leslie's extension.

pi loads TypeScript extensions from `.pi/extensions/` (through jiti); `leslie hooks install pi` writes
`.pi/extensions/leslie.ts` (`plugins/pi.ts` in this package), which forwards three events here (the wire is
`leslie.integrations.plugin_events`):

- `before_agent_start` (every user prompt, the first one included), with `ctx.getContextUsage()` (the real
  tokens of the conversation and the model's window): answered `{"context": ...}` when the policy injects;
  the extension returns it as a message (`customType: "leslie"`, `display: false`) that pi sends after the
  prompt and stores in the session (`pi -c` keeps it). The real usage lets the policy predict a compaction;
- `session_compact`: recorded, and the next prompt re-injects, unless the extension says the message that
  carried the block is among those pi's compaction keeps verbatim (`keepRecentTokens`, 20,000 by default);
- `tool_call`: tools `write` / `edit` (`path`) and `bash` (`command`): answered `{"block": reason}` for a
  write into another thread's folder or leslie's state; the extension returns `{block: true, reason}`.
"""

from __future__ import annotations

from typing import Any

from leslie.integrations import HookAnswer, plugin_events

AGENT = "pi"


def claude_tool(tool: str | None, args: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """pi's tool call as Claude Code's tool name and input (None: a tool that writes nothing)."""
    if tool in ("write", "edit"):
        return "Write", {"file_path": args.get("path")}
    if tool == "bash":
        return "Bash", {"command": args.get("command")}
    return None, {}


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """The answer to one event of the pi extension (unknown events: `{}`)."""
    return plugin_events.answer(payload, agent, prompt="before_agent_start", compaction="session_compact",
                                tool="tool_call", claude_tool=claude_tool)
