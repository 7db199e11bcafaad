"""What a repository may make leslie run only once the user approved it: context commands and templates.

A repository is untrusted input (SPEC §11). Two things in it could run code on the user's machine: the
`[[context.commands]]` of `.leslie/config.toml`, and the Jinja templates of `.leslie/templates/` (rendered in
Jinja2's sandbox, which is a second line of defence, not the first). Both are used only after `leslie trust`
recorded the user's approval outside the repository, in `$XDG_CONFIG_HOME/leslie/trust.json` (default
`~/.config/leslie/trust.json`): one record per repository, keyed by its real path, holding the SHA-256 of the
command list and the name and SHA-256 of each template override. Any change to a command or a template needs
a new approval; until then the commands are skipped and the override is ignored (the packaged template is
used), each with one warning.

`plan.md` and `progress.md` in `.leslie/templates/` are `string.Template` texts that `spawn` copies into a new
thread: they run nothing, so they need no approval (and are never loaded as Jinja templates).

The hook's inputs key asks for `trust_file()` whenever a repository has template overrides.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from leslie.terminal import visible

TRUST_VERSION = 1
TEMPLATE_CAP = 256 << 10  # bytes: an override larger than this is refused (a template is a few KiB)
MAX_TEMPLATES = 64  # overrides looked at (the first, by name): a fingerprint reads at most 64 x 256 KiB
ASSET_TEMPLATES = ("plan.md", "progress.md")  # string.Template, copied by spawn: not Jinja, no approval
NOT_APPROVED = "not approved on this machine (review it, then run `leslie trust`)"
CHANGED = "changed since it was approved (review it, then run `leslie trust`)"


class TemplateOverrideWarning(UserWarning):
    """A template override was not used (issued for Python API callers that pass no `warnings` list)."""


def trust_file() -> str:
    """Where approvals live: `$XDG_CONFIG_HOME/leslie/trust.json`, default `~/.config/leslie/trust.json`."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "leslie", "trust.json")


def _repo_key(root: str | os.PathLike[str]) -> str:
    return os.path.realpath(root)


def command_list_hash(commands: Sequence[dict[str, Any]]) -> str:
    """SHA-256 of the command list as approved: every field of every command, in order."""
    import hashlib

    from leslie.store.jsonio import dumps_canonical

    canonical = [
        {"name": c["name"], "command": c["command"], "dynamic": bool(c.get("dynamic", False)),
         "timeout": float(c.get("timeout", 5.0))}
        for c in commands
    ]
    return hashlib.sha256(dumps_canonical(canonical)).hexdigest()


def _read_trust(path: str) -> dict[str, Any]:
    from leslie.errors import CorruptStateError
    from leslie.store.fsio import read_regular
    from leslie.store.jsonio import StrictJSONError, loads_strict

    try:
        data = loads_strict(read_regular(path, 16 << 20))
    except FileNotFoundError:
        return {"version": TRUST_VERSION, "repositories": {}}
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("repositories"), dict):
        raise CorruptStateError(path, "is not a leslie trust file")
    return data


def approval(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The recorded approval for the repository at `root` (hashes, time, what was shown), or None."""
    entry = _read_trust(trust_file())["repositories"].get(_repo_key(root))
    return entry if isinstance(entry, dict) else None


def is_trusted(root: str | os.PathLike[str], commands: Sequence[dict[str, Any]]) -> bool:
    """True when the user approved exactly this command list for this repository."""
    entry = approval(root)
    return entry is not None and entry.get("commands_hash") == command_list_hash(commands)


def approved_templates(root: str | os.PathLike[str]) -> dict[str, str]:
    """`{name: sha256}` of the template overrides approved for the repository at `root` (CorruptStateError
    when the trust file is unreadable)."""
    return _templates_of(approval(root))


def _templates_of(entry: dict[str, Any] | None) -> dict[str, str]:
    templates = entry.get("templates") if entry is not None else None
    if not isinstance(templates, dict):
        return {}
    return {k: v for k, v in templates.items() if isinstance(k, str) and isinstance(v, str)}


# -- template overrides ---------------------------------------------------------------------------------

class Override:
    """One file of `.leslie/templates/` as read now: its text and SHA-256, or why it cannot be used."""

    __slots__ = ("name", "path", "problem", "sha256", "size", "text")

    def __init__(self, name: str, path: str, *, text: str | None = None, sha256: str | None = None,
                 size: int = 0, problem: str | None = None) -> None:
        self.name = name
        self.path = path
        self.text = text
        self.sha256 = sha256
        self.size = size
        self.problem = problem

    def verdict(self, approved: Mapping[str, str]) -> str | None:
        """None when this override may be rendered under `approved`, else why not (one phrase)."""
        if self.problem is not None:
            return self.problem
        recorded = approved.get(self.name)
        if recorded is None:
            return NOT_APPROVED
        return None if recorded == self.sha256 else CHANGED


def is_template_name(name: str) -> bool:
    """A name Jinja may load from `.leslie/templates/`: a plain, visible file name, not an asset template.

    Not one with control characters or bytes that are not UTF-8 (surrogate escapes from `os.listdir`): its
    approval could not be written to the trust file as strict JSON.
    """
    return (bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")
            and name not in ASSET_TEMPLATES and name.isprintable())


def read_override(templates_dir: str | os.PathLike[str], name: str) -> Override | None:
    """The override `name` in `templates_dir`, read safely (no link, no special file, at most TEMPLATE_CAP
    bytes, UTF-8); None when there is no such file."""
    import hashlib

    from leslie.errors import CorruptStateError, StorageError
    from leslie.store.fsio import read_regular

    path = os.path.join(os.fspath(templates_dir), name)
    try:
        data = read_regular(path, TEMPLATE_CAP)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except CorruptStateError as exc:
        return Override(name, path, problem=exc.problem)
    except StorageError as exc:
        return Override(name, path, problem=exc.message)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Override(name, path, size=len(data), problem="is not UTF-8 text")
    return Override(name, path, text=text, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def template_names(templates_dir: str | os.PathLike[str]) -> list[str]:
    """The names of the Jinja overrides in `templates_dir` leslie looks at: sorted, the first MAX_TEMPLATES
    (none when it is no folder)."""
    try:
        names = os.listdir(templates_dir)
    except OSError:
        return []
    return sorted(n for n in names if is_template_name(n))[:MAX_TEMPLATES]


def template_overrides(templates_dir: str | os.PathLike[str]) -> list[Override]:
    """Every Jinja override in `templates_dir`, each read safely (see `read_override`)."""
    found = (read_override(templates_dir, name) for name in template_names(templates_dir))
    return [o for o in found if o is not None]


def ignored_note(label: str, reason: str) -> str:
    """The one warning for an override that is not used."""
    return f"template override {visible(label)} ignored: {reason}; the packaged template is used"


# -- approving --------------------------------------------------------------------------------------------

def _update_trust(root: str | os.PathLike[str], entry: dict[str, Any] | None) -> bool:
    from leslie.store.fsio import FileLock, atomic_write
    from leslie.store.jsonio import dumps_canonical

    path = trust_file()
    with FileLock(path + ".lock"):
        data = _read_trust(path)
        key = _repo_key(root)
        had = key in data["repositories"]
        if entry is None:
            data["repositories"].pop(key, None)
        else:
            data["repositories"][key] = entry
        data["version"] = TRUST_VERSION
        atomic_write(path, dumps_canonical(data))
    return had


def grant(root: str | os.PathLike[str], commands: Sequence[dict[str, Any]],
          templates: Sequence[Override] = ()) -> dict[str, Any]:
    """Record the user's approval of `commands` and of the usable `templates` (as read when they were shown:
    a file changed since then stays unapproved); returns the record."""
    from leslie.store.sessions import utc_now

    entry = {
        "commands_hash": command_list_hash(commands),
        "approved_at": utc_now(),
        "commands": [{"name": c["name"], "command": c["command"]} for c in commands],
        "templates": {t.name: t.sha256 for t in templates if t.problem is None and t.sha256 is not None},
    }
    _update_trust(root, entry)
    return entry


def revoke(root: str | os.PathLike[str]) -> bool:
    """Forget the approval for the repository at `root`; False when there was none."""
    return _update_trust(root, None)


# -- showing what is approved ---------------------------------------------------------------------------

def _shown(text: str) -> str:
    return visible(text, backslashes=True)


class Review:
    """What `leslie trust` shows and approves for one repository, read once (so what is approved is exactly
    what was shown)."""

    def __init__(self, root: str, commands: list[dict[str, Any]], templates: list[Override]) -> None:
        self.root = root
        self.commands = commands
        self.usable = [t for t in templates if t.problem is None]
        self.refused = [t for t in templates if t.problem is not None]
        entry = approval(root)
        recorded = _templates_of(entry)
        self.commands_approved = not commands or (
            entry is not None and entry.get("commands_hash") == command_list_hash(commands))
        self.templates_approved = all(t.verdict(recorded) is None for t in self.usable)

    @property
    def empty(self) -> bool:
        """Nothing that needs an approval (no commands, no usable template override)."""
        return not self.commands and not self.usable

    @property
    def approved(self) -> bool:
        """Everything that needs an approval has it (refused files are never used, approved or not)."""
        return self.commands_approved and self.templates_approved

    def lines(self) -> Iterator[str]:
        """The human listing: each command and each template, every text made `visible`, backslashes doubled
        (what is approved is shown unambiguously)."""
        yield f"repository: {_shown(self.root)}"
        if self.commands:
            yield "context commands (.leslie/config.toml), run through the shell in the repository root:"
            for c in self.commands:
                flags = ("dynamic, " if c.get("dynamic") else "") + f"timeout {float(c.get('timeout', 5.0)):g} s"
                yield f"  {_shown(str(c['name']))} ({flags}): {_shown(str(c['command']))}"
        if self.usable:
            yield "template overrides (.leslie/templates/), rendered in Jinja2's sandbox:"
            for t in self.usable:
                yield f"  {_shown(t.name)}  {t.size} bytes  sha256 {str(t.sha256)[:16]}"
        if self.refused:
            yield "never used (cannot be approved):"
            for t in self.refused:
                yield f"  {_shown(t.name)}: {_shown(str(t.problem))}"

    def to_json(self) -> dict[str, Any]:
        """The same information as plain JSON values."""
        return {
            "root": self.root,
            "commands": [{"name": c["name"], "command": c["command"], "dynamic": bool(c.get("dynamic")),
                          "timeout": float(c.get("timeout", 5.0))} for c in self.commands],
            "templates": [{"name": t.name, "size": t.size, "sha256": t.sha256} for t in self.usable],
            "refused": [{"name": t.name, "problem": t.problem} for t in self.refused],
            "trust_file": trust_file(),
        }


def review(root: str | os.PathLike[str]) -> Review:
    """Read what the repository at `root` asks to run. A `config.toml` that cannot be approved as it is
    (bad TOML, a wrong type, a timeout that is not a finite number of seconds) is a UsageError (exit 2)."""
    from pathlib import Path

    from leslie.errors import CorruptStateError, UsageError
    from leslie.store.config import load_config

    folder = Path(root, ".leslie")
    try:
        config = load_config(folder / "config.toml")
    except CorruptStateError as exc:
        raise UsageError(f"cannot approve {exc.path}: {exc.problem}") from None
    return Review(os.fspath(root), [c._asdict() for c in config.commands], template_overrides(folder / "templates"))
