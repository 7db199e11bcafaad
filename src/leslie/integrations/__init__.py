"""Agent integrations: protocol adapters between an agent's wire format and leslie.

Each adapter only parses what the agent sends, calls `leslie.inject.injector` (context injection) or
`leslie.guard.rules` (the write guard), and formats the answer the agent expects:

- `claude_code`: Claude Code's command hooks (`leslie hook claude-code`);
- `codex`: Codex's command hooks (`leslie hook codex`), the same JSON shapes plus `PostCompact`;
- `copilot`: GitHub Copilot CLI's command hooks (`leslie hook copilot EVENT`: camelCase payloads that do not
  name their event, top-level answers);
- `qwen`: Qwen Code's command hooks (`leslie hook qwen`): Claude Code's shapes, Qwen's tool ids;
- `acp`: the Agent Client Protocol proxy (`leslie acp`).
"""

from __future__ import annotations

from typing import NamedTuple


class HookAnswer(NamedTuple):
    """What a hook prints: `stdout` (a JSON document, or None for silence) and one-line `warnings` (stderr)."""

    stdout: str | None = None
    warnings: tuple[str, ...] = ()


SILENT = HookAnswer()
