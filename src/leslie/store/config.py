"""`.leslie/config.toml`: asset types, injection settings, context commands, claims; every setting has a
default."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

from leslie.errors import CorruptStateError

MAX_TIMEOUT = 3600.0  # seconds a context command may run (the hook that waits for it times out long before)
DEFAULT_BUDGET_TOKENS = 4_000  # the `[context] budget_tokens` default: docs/context.md, "What the budget buys"
MAX_TTL = 365 * 24 * 3600  # seconds a claim may stay live unseen: a year (a typo beyond that)
MAX_BUDGET_TOKENS = 1_000_000  # a budget is a few thousand tokens; anything above a context window is a typo


class AssetType(NamedTuple):
    """One kind of thread asset: a file or a folder at a fixed path in the thread's folder."""

    name: str
    path: str
    kind: str  # "file" | "folder"

    @property
    def display_path(self) -> str:
        """The path as written in output: folders end with `/`."""
        return self.path + "/" if self.kind == "folder" else self.path


DEFAULT_ASSET_TYPES = (
    AssetType("plan", "plan.md", "file"),
    AssetType("progress", "progress.md", "file"),
    AssetType("design", "design", "folder"),
    AssetType("artifact", "artifacts", "folder"),
)


class InjectionSettings(NamedTuple):
    """The `[injection]` table of SPEC §7.1."""

    mode: str = "smart"
    reinject_every_rounds: int = 20
    context_window_tokens: int = 200_000
    tokens_per_round: int = 4_000
    usage_threshold: float = 0.9
    record_messages: bool = False


class ClaimSettings(NamedTuple):
    """The `[claims]` table of SPEC §13: how long a session stays live unseen, and whether a hook session
    claims its thread at its first prompt."""

    ttl_seconds: int = 900
    auto: bool = True


class ContextCommand(NamedTuple):
    """One `[[context.commands]]` entry of SPEC §7.3."""

    name: str
    command: str
    dynamic: bool = False
    timeout: float = 5.0


class Config(NamedTuple):
    """The whole configuration, defaults filled in."""

    asset_types: tuple[AssetType, ...] = DEFAULT_ASSET_TYPES
    injection: InjectionSettings = InjectionSettings()
    commands: tuple[ContextCommand, ...] = ()
    budget_tokens: int = DEFAULT_BUDGET_TOKENS  # `[context] budget_tokens`: tokens of inlined content
    claims: ClaimSettings = ClaimSettings()

    def asset_type_of(self, scope_path: str) -> str:
        """The type of a scoped path: the type whose path it equals or lies under, else `file`."""
        for asset in self.asset_types:
            if scope_path == asset.path or (asset.kind == "folder" and scope_path.startswith(asset.path + "/")):
                return asset.name
        return "file"


def _expect(path: Path, value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise CorruptStateError(path, f"{where} has the wrong type ({type(value).__name__})")
    return value


def _asset_types(path: Path, raw: Any) -> tuple[AssetType, ...]:
    types = list(DEFAULT_ASSET_TYPES)
    for i, entry in enumerate(_expect(path, raw, list, "assets")):
        where = f"assets[{i}]"
        _expect(path, entry, dict, where)
        name = _expect(path, entry.get("type"), str, f"{where}.type")
        rel = _expect(path, entry.get("path"), str, f"{where}.path").strip("/")
        kind = _expect(path, entry.get("kind", "file"), str, f"{where}.kind")
        if kind not in ("file", "folder") or not rel or ".." in rel.split("/"):
            raise CorruptStateError(path, f"{where} needs kind file|folder and a relative path")
        types = [t for t in types if t.name != name]
        types.append(AssetType(name, rel, kind))
    return tuple(types)


def _injection(path: Path, raw: Any) -> InjectionSettings:
    table = _expect(path, raw, dict, "[injection]")
    defaults = InjectionSettings()
    values: dict[str, Any] = {}
    for name, default in defaults._asdict().items():
        if name in table:
            kind: type | tuple[type, ...] = (int, float) if isinstance(default, float) else type(default)
            values[name] = _expect(path, table[name], kind, f"injection.{name}")
            if isinstance(values[name], float) and not math.isfinite(values[name]):
                raise CorruptStateError(path, f"injection.{name} must be a finite number, not {values[name]!r}")
    settings = InjectionSettings(**values)
    if settings.mode not in ("smart", "always", "start"):
        raise CorruptStateError(path, f"injection.mode must be smart, always or start, not {settings.mode!r}")
    return settings


def _budget(path: Path, raw: Any) -> int:
    """`[context] budget_tokens`: an integer from 0 (paths only) to MAX_BUDGET_TOKENS."""
    table = _expect(path, raw, dict, "[context]")
    if "budget_tokens" not in table:
        return DEFAULT_BUDGET_TOKENS
    value = _expect(path, table["budget_tokens"], int, "context.budget_tokens")
    if not 0 <= value <= MAX_BUDGET_TOKENS:
        raise CorruptStateError(path, f"context.budget_tokens must be an integer from 0 to {MAX_BUDGET_TOKENS}, "
                                f"not {value!r}")
    return int(value)


def _claims(path: Path, raw: Any) -> ClaimSettings:
    """`[claims]`: `ttl_seconds` a whole number of seconds from 1 to a year, `auto` true or false."""
    table = _expect(path, raw, dict, "[claims]")
    ttl = _expect(path, table.get("ttl_seconds", ClaimSettings().ttl_seconds), int, "claims.ttl_seconds")
    if not 1 <= ttl <= MAX_TTL:
        raise CorruptStateError(path, f"claims.ttl_seconds must be a whole number of seconds from 1 to {MAX_TTL}, "
                                f"not {ttl!r}")
    return ClaimSettings(ttl, _expect(path, table.get("auto", True), bool, "claims.auto"))


def _commands(path: Path, raw: Any) -> tuple[ContextCommand, ...]:
    table = _expect(path, raw, dict, "[context]")
    result = []
    for i, entry in enumerate(_expect(path, table.get("commands", []), list, "context.commands")):
        where = f"context.commands[{i}]"
        _expect(path, entry, dict, where)
        result.append(ContextCommand(
            name=_expect(path, entry.get("name"), str, f"{where}.name"),
            command=_expect(path, entry.get("command"), str, f"{where}.command"),
            dynamic=_expect(path, entry.get("dynamic", False), bool, f"{where}.dynamic"),
            timeout=_timeout(path, entry.get("timeout", 5), f"{where}.timeout"),
        ))
    return tuple(result)


def _timeout(path: Path, raw: Any, where: str) -> float:
    """A command's timeout: a finite number of seconds, above 0 and at most MAX_TIMEOUT (`nan` or `inf` would
    make the wait never end, or crash it)."""
    value = float(_expect(path, raw, (int, float), where))
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise CorruptStateError(path, f"{where} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, "
                                f"not {raw!r}")
    return value


def parse_config(path: Path, data: bytes) -> Config:
    """Parse config.toml bytes; a malformed file raises CorruptStateError naming it."""
    import tomllib

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except ValueError as exc:  # TOMLDecodeError, not UTF-8, or an integer over Python's 4,300 digits
        raise CorruptStateError(path, f"invalid TOML ({exc})") from None
    except RecursionError:
        raise CorruptStateError(path, "invalid TOML (nests arrays or tables too deeply)") from None
    return Config(
        asset_types=_asset_types(path, doc["assets"]) if "assets" in doc else DEFAULT_ASSET_TYPES,
        injection=_injection(path, doc["injection"]) if "injection" in doc else InjectionSettings(),
        commands=_commands(path, doc["context"]) if "context" in doc else (),
        budget_tokens=_budget(path, doc["context"]) if "context" in doc else DEFAULT_BUDGET_TOKENS,
        claims=_claims(path, doc["claims"]) if "claims" in doc else ClaimSettings(),
    )


def load_config(path: Path) -> Config:
    """Load `config.toml`, or the defaults when it does not exist."""
    from leslie.store.files import read_bytes

    try:
        data = read_bytes(path)
    except FileNotFoundError:
        return Config()
    return parse_config(path, data)
