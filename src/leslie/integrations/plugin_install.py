"""leslie's plugin file in the project, for the agents that load code instead of running hook commands.

opencode and pi have no command hooks: they load code from the project. leslie ships that code as package
data (`leslie/integrations/plugins/opencode.js`, `pi.ts`) and installs it with the absolute command of the
leslie that installs it written in (like the command of the other agents' hooks): `.opencode/plugins/leslie.js`,
`.pi/extensions/leslie.ts`; Kilo Code, a fork of opencode with its plugin API, gets opencode's plugin in
`.kilo/plugins/leslie.js`, calling `leslie hook kilo`. The file is leslie's alone: installing replaces it
(idempotent), uninstalling deletes it; a file there that leslie did not write is refused, never overwritten.
Reads and writes follow the rules of every other project file leslie touches (`store.repository_target`: a
regular file of bounded size, through links only inside the repository, written atomically).

`leslie.integrations.install` (`leslie hooks install|uninstall|status`) calls this module for those agents;
this module imports nothing of it (no circle).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from leslie.errors import CorruptStateError
from leslie.store.files import read_repository_file, write_repository_file

PLUGIN_DIR = Path(__file__).resolve().parent / "plugins"
PLUGIN_CAP = 256 * 1024  # bytes: leslie's plugin is ~4 KiB; anything far larger there is not leslie's
COMMAND_LINE = re.compile(r"^const LESLIE(?:: string\[\])? = (\[.*\]);", re.MULTILINE)


class PluginFile:
    """One agent's plugin file: the packaged source `plugin`, installed at `path` for `agent`."""

    __slots__ = ("agent", "context_ms", "guard_ms", "path", "plugin")

    def __init__(self, agent: str, path: str, plugin: str, context_ms: int, guard_ms: int) -> None:
        self.agent = agent
        self.path = path  # relative to the repository root
        self.plugin = plugin
        self.context_ms = context_ms
        self.guard_ms = guard_ms

    def template(self) -> str:
        """The packaged plugin source, placeholders in."""
        return (PLUGIN_DIR / self.plugin).read_text(encoding="utf-8")

    def marker(self) -> str:
        """The first line of leslie's plugin file: how an installed one is recognised."""
        return self.template().splitlines()[0]

    def render(self, argv: list[str]) -> str:
        """The plugin file that runs leslie as `argv`."""
        return (self.template().replace("__LESLIE_COMMAND__", json.dumps(argv))
                .replace("__AGENT__", json.dumps(self.agent))
                .replace("__CONTEXT_TIMEOUT_MS__", str(self.context_ms))
                .replace("__GUARD_TIMEOUT_MS__", str(self.guard_ms)))

    def read(self, root: Path) -> str | None:
        """The installed file's text (None when absent); CorruptStateError for one leslie did not write."""
        raw = read_repository_file(root, root / self.path, limit=PLUGIN_CAP)
        if raw is None:
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if not text.startswith(self.marker()):
            raise CorruptStateError(self.path, "is not leslie's plugin file; leslie leaves it untouched (move it "
                                               "away to install leslie's)")
        return text

    def install(self, root: Path, argv: list[str]) -> bool:
        """Write the plugin running leslie as `argv`; False when it was already there as is."""
        wanted = self.render(argv)
        if self.read(root) == wanted:
            return False
        write_repository_file(root, root / self.path, wanted.encode("utf-8"))
        return True

    def uninstall(self, root: Path) -> bool:
        """Delete leslie's plugin file; False when there was none."""
        if self.read(root) is None:
            return False
        os.unlink(root / self.path)
        return True

    def installed(self, root: Path) -> tuple[list[str] | None, bool] | None:
        """None when absent, else (the leslie command written in it, or None when unreadable; whether the
        file is exactly what installing it again would write). CorruptStateError for a foreign file."""
        text = self.read(root)
        if text is None:
            return None
        argv = installed_argv(text)
        return argv, argv is not None and text == self.render(argv)


def installed_argv(text: str) -> list[str] | None:
    """The leslie command written into an installed plugin file, None when it cannot be read."""
    found = COMMAND_LINE.search(text)
    if found is None:
        return None
    try:
        argv = json.loads(found.group(1))
    except ValueError:
        return None
    return argv if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) else None
