"""What `leslie hooks install gemini` writes, and whether Gemini CLI will run it (`leslie hooks status gemini`).

Gemini CLI 0.61.0 reads project hooks from `.gemini/settings.json`, key `hooks` (the file holds every other
project setting too: leslie merges its entries in and keeps the rest), in Claude Code's shape
(`{"<Event>": [{"matcher": "...", "hooks": [{"type": "command", "command": "...", "timeout": ...}]}]}`) but with
the **timeout in milliseconds** (default 60,000). Matchers are regular expressions for tool events, exact
strings for the others; none matches everything. `hooks.enabled`, `hooks.disabled` and `hooks.notifications`
are settings, not events (Gemini skips them there).

Gemini runs a project's hooks only in a **trusted folder** (`Config.isTrustedFolder`; otherwise "Project hooks
disabled because the folder is not trusted"). Folder trust is on unless the user's `security.folderTrust.enabled`
is false; a folder is trusted by the longest matching rule of `~/.gemini/trustedFolders.json` (`TRUST_FOLDER`,
`TRUST_PARENT`: the rule's parent folder, `DO_NOT_TRUST`), which the trust dialog of an interactive `gemini` and
`/permissions` write; `GEMINI_CLI_TRUST_WORKSPACE=true` or `--skip-trust` trusts for one run. Headless (`-p`) in
an untrusted folder, Gemini refuses to start (exit 55). New project hooks get a one-time warning, then run.
"""

from __future__ import annotations

import json
import os

PATH = ".gemini/settings.json"
CONTEXT_TIMEOUT_MS = 15_000  # the same 15 s as the other agents' context hooks, in Gemini's unit
GUARD_TIMEOUT_MS = 10_000
WRITE_TOOLS = "write_file|replace|run_shell_command"
# (event, matcher, timeout in ms)
ENTRIES: tuple[tuple[str, str | None, int], ...] = (
    ("SessionStart", None, CONTEXT_TIMEOUT_MS),
    ("BeforeAgent", None, CONTEXT_TIMEOUT_MS),
    ("PreCompress", None, GUARD_TIMEOUT_MS),
    ("BeforeTool", WRITE_TOOLS, GUARD_TIMEOUT_MS),
    ("AfterTool", "run_shell_command", GUARD_TIMEOUT_MS),
    ("AfterAgent", None, GUARD_TIMEOUT_MS),
)
SETTING_KEYS = ("enabled", "disabled", "notifications")  # in `hooks`, but not events
NEXT_STEPS = ("Gemini CLI runs a project's hooks only in a trusted folder: trust this one when `gemini` asks "
              "(or with /permissions); `leslie hooks status gemini` says whether it is")


def _home() -> str:
    return os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")


def _read_json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.loads(handle.read(1 << 20))
    except (OSError, ValueError):
        return None


def _inside(folder: str, path: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def folder_trusted(root: str) -> bool | None:
    """Whether Gemini CLI trusts `root` by the user's settings and trust file (None: nothing decides it, which
    Gemini treats as untrusted). The IDE's trust signal and one-run overrides are not seen here."""
    env = os.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if env in ("true", "false"):
        return env == "true"
    settings = _read_json(os.path.join(_home(), ".gemini", "settings.json"))
    security = settings.get("security") if isinstance(settings, dict) else None
    folder_trust = security.get("folderTrust") if isinstance(security, dict) else None
    if isinstance(folder_trust, dict) and folder_trust.get("enabled") is False:
        return True
    trust_file = os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or os.path.join(_home(), ".gemini",
                                                                                     "trustedFolders.json")
    rules = _read_json(trust_file)
    location = os.path.realpath(root)
    best, decision = -1, None
    for rule, level in (rules.items() if isinstance(rules, dict) else ()):
        folder = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        if isinstance(level, str) and _inside(os.path.realpath(folder), location) and len(rule) > best:
            best, decision = len(rule), level
    if decision == "DO_NOT_TRUST":
        return False
    return True if decision in ("TRUST_FOLDER", "TRUST_PARENT") else None


def trust_lines(root: str) -> list[str]:
    """What the user must still do for Gemini CLI to run the project's hooks (nothing when it will)."""
    trusted = folder_trusted(root)
    if trusted:
        return []
    state = "marked DO_NOT_TRUST" if trusted is False else "not trusted"
    return [f"gemini: {root} is {state} in Gemini CLI's trusted folders, so it skips the project's hooks: trust "
            "it when `gemini` asks, or with /permissions (GEMINI_CLI_TRUST_WORKSPACE=true or --skip-trust for "
            "one run)"]
