"""opencode (and Kilo Code, its fork): `leslie hook opencode` answers the events of leslie's plugin.

opencode loads JavaScript plugins from `.opencode/plugins/` (no trust prompt, no timeout of its own);
`leslie hooks install opencode` writes `.opencode/plugins/leslie.js` (`plugins/opencode.js` in this package),
which forwards three of the plugin API's hooks here (the wire is `leslie.integrations.plugin_events`):

- `chat.message` (every user prompt, the first one included): answered `{"context": ...}` when the policy
  injects; the plugin adds it to the user's message as a text part with `synthetic: true` (the model reads
  it, the user's transcript hides it; stored with the session, so `opencode run --continue` keeps it);
- the `session.compacted` event: the compaction is recorded, and the next prompt re-injects (opencode's
  automatic compaction continues the turn with a message of its own that no plugin hook sees);
- `tool.execute.before`: tools `write` / `edit` (`filePath`), `apply_patch` (`patchText`) and `bash`
  (`command`, `workdir`): answered `{"block": reason}` for a write into another thread's folder or leslie's
  state; the plugin throws, opencode reports the error to the model and the tool does not run.

opencode gives a plugin no context usage before a prompt: there is no predicted compaction.
"""

from __future__ import annotations

from typing import Any

from leslie.integrations import HookAnswer, plugin_events

AGENT = "opencode"


def claude_tool(tool: str | None, args: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """opencode's tool call as Claude Code's tool name and input (None: a tool that writes nothing)."""
    if tool in ("write", "edit", "multiedit"):
        return "Write", {"file_path": args.get("filePath")}
    if tool in ("apply_patch", "patch"):
        return "apply_patch", {"patch": args.get("patchText")}
    if tool == "bash":
        workdir = args.get("workdir")
        command = args.get("command")
        if isinstance(workdir, str) and workdir and isinstance(command, str):
            command = f"cd {_quote(workdir)} && {command}"  # the guard reads the command from the project folder
        return "Bash", {"command": command}
    return None, {}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """The answer to one event of the opencode plugin (unknown events: `{}`)."""
    return plugin_events.answer(payload, agent, prompt="chat.message", compaction="session.compacted",
                                tool="tool.execute.before", claude_tool=claude_tool)
