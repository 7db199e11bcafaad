"""config.py: `.leslie/config.toml` defaults, asset types, [injection], [[context.commands]], bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from leslie.errors import CorruptStateError
from leslie.store.config import DEFAULT_ASSET_TYPES, AssetType, Config, InjectionSettings, load_config, parse_config


def parse(text: str) -> Config:
    return parse_config(Path(".leslie/config.toml"), text.encode("utf-8"))


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "config.toml")
    assert config == Config()
    assert [(a.name, a.display_path) for a in config.asset_types] == [
        ("plan", "plan.md"), ("progress", "progress.md"), ("design", "design/"), ("artifact", "artifacts/")]
    assert config.injection == InjectionSettings(mode="smart", reinject_every_rounds=20,
                                                 context_window_tokens=200_000, tokens_per_round=4_000,
                                                 usage_threshold=0.9, record_messages=False)
    assert config.commands == ()


def test_empty_file_gives_defaults() -> None:
    assert parse("") == Config()


@pytest.mark.parametrize(
    ("scope", "kind"),
    [("plan.md", "plan"), ("progress.md", "progress"), ("design", "design"), ("design/api.md", "design"),
     ("design/sub/x.png", "design"), ("artifacts/plan.md", "artifact"), ("designs.md", "file"),
     ("notes/x.md", "file"), ("plan.md/x", "file")],
)
def test_asset_type_of(scope: str, kind: str) -> None:
    assert Config().asset_type_of(scope) == kind


def test_asset_types_added_and_replaced() -> None:
    config = parse(
        '[[assets]]\ntype = "notes"\npath = "notes/"\nkind = "folder"\n'
        '[[assets]]\ntype = "plan"\npath = "PLAN.md"\n'
    )
    assert config.asset_types == (
        DEFAULT_ASSET_TYPES[1], DEFAULT_ASSET_TYPES[2], DEFAULT_ASSET_TYPES[3],
        AssetType("notes", "notes", "folder"), AssetType("plan", "PLAN.md", "file"))
    assert config.asset_type_of("notes/a.md") == "notes"
    assert config.asset_type_of("plan.md") == "file"


def test_injection_and_commands() -> None:
    config = parse(
        '[injection]\nmode = "always"\nreinject_every_rounds = 0\nusage_threshold = 1\n'
        '[[context.commands]]\nname = "Git status"\ncommand = "git status --short"\n'
        '[[context.commands]]\nname = "Log"\ncommand = "git log -3"\ndynamic = true\ntimeout = 2.5\n'
    )
    assert config.injection.mode == "always" and config.injection.reinject_every_rounds == 0
    assert config.injection.usage_threshold == 1
    assert [(c.name, c.dynamic, c.timeout) for c in config.commands] == [("Git status", False, 5.0),
                                                                         ("Log", True, 2.5)]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[injection\n", "invalid TOML"),
        ('[injection]\nmode = "sometimes"\n', "injection.mode must be smart, always or start"),
        ("[injection]\nreinject_every_rounds = true\n", "injection.reinject_every_rounds has the wrong type"),
        ('[injection]\nusage_threshold = "high"\n', "injection.usage_threshold has the wrong type"),
        ("injection = 3\n", r"\[injection\] has the wrong type"),
        ('[[assets]]\ntype = "x"\npath = "../up"\n', "needs kind file|folder and a relative path"),
        ('[[assets]]\ntype = "x"\npath = "x"\nkind = "link"\n', "needs kind file|folder"),
        ("[[assets]]\npath = \"x\"\n", r"assets\[0\].type has the wrong type"),
        ('assets = "plan"\n', "assets has the wrong type"),
        ('[[context.commands]]\nname = "x"\n', r"context.commands\[0\].command has the wrong type"),
        ('[[context.commands]]\nname = "x"\ncommand = "y"\ntimeout = "5"\n', "timeout has the wrong type"),
    ],
)
def test_bad_config_is_corrupt_state(text: str, why: str) -> None:
    with pytest.raises(CorruptStateError, match=why) as info:
        parse(text)
    assert info.value.exit_code == 4 and info.value.path == ".leslie/config.toml"


def test_bad_utf8_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[injection]\nmode = "\xff"\n')
    with pytest.raises(CorruptStateError, match="invalid TOML"):
        load_config(path)


def test_config_folder_in_place_of_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(CorruptStateError, match="is a folder"):
        load_config(tmp_path / "config.toml")
