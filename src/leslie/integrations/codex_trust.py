"""Will Codex run leslie's project hooks? Read from the trust Codex records, never written by leslie.

Codex (0.169.0) runs a project's `.codex/hooks.json` only when the project is trusted
(`[projects."<path>"] trust_level = "trusted"` in `$CODEX_HOME/config.toml`) and each hook was trusted by the
user in `/hooks`, which records `[hooks.state."<hooks.json>:<event>:<group>:<hook>"] trusted_hash = "sha256:..."`
there. An untrusted hook is skipped without a word (`codex exec`), so `leslie hooks install codex` says what
to do next and `leslie hooks status codex` reads these records. Codex hashes each hook's definition; leslie
does not recompute that hash, so a hook changed since it was trusted (re-installed by a newer leslie) shows as
trusted here while Codex asks again: `/hooks` is the final word.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NEXT_STEPS = ("Codex runs project hooks only in a trusted project, and only after you trust each one: start "
              "`codex` in this repository, accept the project as trusted, then open `/hooks` and trust leslie's "
              "hooks. Installing again (or a newer leslie) changes them: trust them again. "
              "`leslie hooks status codex` shows what Codex has recorded.")
CONFIG_CAP = 4 * 1024 * 1024


@dataclass(frozen=True)
class CodexTrust:
    """What Codex's config records for this repository's hooks."""

    config: str  # the config.toml read
    project_trusted: bool
    trusted: tuple[str, ...]  # hook keys with a recorded trust
    untrusted: tuple[str, ...]  # hook keys without one
    problem: str | None = None  # the config could not be read


def codex_home() -> str:
    """`$CODEX_HOME`, default `~/.codex`."""
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def hook_keys(hooks_file: Path, data: dict[str, Any], is_ours: Any) -> list[str]:
    """Codex's key of every hook in `data` (a parsed hooks.json) for which `is_ours(hook)` is true."""
    keys = []
    for event, groups in data.get("hooks", {}).items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            hooks = group.get("hooks") if isinstance(group, dict) else None
            for h, hook in enumerate(hooks if isinstance(hooks, list) else []):
                if is_ours(hook):
                    keys.append(f"{hooks_file}:{_snake(event)}:{g}:{h}")
    return keys


def _table(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def read_trust(root: Path, data: dict[str, Any], is_ours: Any) -> CodexTrust:
    """Which of leslie's hooks in `data` (the repository's parsed `.codex/hooks.json`) Codex trusts."""
    import tomllib

    config = os.path.join(codex_home(), "config.toml")
    real_root = os.path.realpath(root)
    keys = hook_keys(Path(real_root, ".codex", "hooks.json"), data, is_ours)
    try:
        with open(config, "rb") as handle:
            raw = handle.read(CONFIG_CAP + 1)
        doc = tomllib.loads(raw[:CONFIG_CAP].decode("utf-8"))
    except FileNotFoundError:
        return CodexTrust(config, False, (), tuple(keys))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return CodexTrust(config, False, (), tuple(keys), f"cannot read {config}: {exc}")
    projects = _table(doc, "projects")
    project = projects.get(real_root) or projects.get(os.path.abspath(root))
    project_trusted = isinstance(project, dict) and project.get("trust_level") == "trusted"
    state = _table(_table(doc, "hooks"), "state")
    trusted = tuple(k for k in keys if isinstance(state.get(k), dict) and state[k].get("trusted_hash"))
    return CodexTrust(config, project_trusted, trusted, tuple(k for k in keys if k not in trusted))


def trust_lines(trust: CodexTrust) -> list[str]:
    """What is missing for Codex to run leslie's hooks, in words (empty when nothing is)."""
    if trust.problem is not None:
        return [f"codex: {trust.problem}"]
    lines = []
    if not trust.project_trusted:
        lines.append(f"codex: this project is not trusted in {trust.config}: Codex ignores its .codex/ hooks "
                     "(start `codex` here and trust the project)")
    if trust.untrusted:
        lines.append(f"codex: {len(trust.untrusted)} of leslie's {len(trust.trusted) + len(trust.untrusted)} "
                     "hooks are not trusted in Codex, which skips them without a word (open `/hooks` in codex "
                     "and trust them)")
    return lines
