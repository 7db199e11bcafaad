"""agents_md.py and `leslie agents-md`: the managed AGENTS.md block of SPEC §6."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

from conftest import approve_templates, run_leslie
from leslie import __version__
from leslie.context.agents_md import (
    BLOCK_RE,
    block_status,
    check_agents_md,
    render_block,
    update_agents_md,
    updated_text,
)
from leslie.errors import CheckFailed, UsageError
from test_context import parse_valid

BEGIN = f"<!-- leslie:begin version={__version__} -->"
END = "<!-- leslie:end -->"


def block_of(text: str) -> str:
    match = BLOCK_RE.search(text)
    assert match is not None
    return match.group(0)


def test_init_writes_the_block_with_versioned_markers(repo_root: Path) -> None:
    text = (repo_root / "AGENTS.md").read_text(encoding="utf-8")
    assert text == render_block(repo_root)
    lines = text.splitlines()
    assert lines[0] == BEGIN and lines[-1] == END
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_block_is_created_when_agents_md_is_absent(repo_root: Path) -> None:
    (repo_root / "AGENTS.md").unlink()
    result = run_leslie("agents-md", cwd=repo_root)
    assert result.code == 0 and "AGENTS.md" in result.stdout
    assert (repo_root / "AGENTS.md").read_text(encoding="utf-8") == render_block(repo_root)
    again = run_leslie("agents-md", cwd=repo_root)
    assert again.code == 0 and "up to date" in again.stdout


@pytest.mark.parametrize(("before", "after"), [
    ("# My project\n\nBuild with make.\n", ""),
    ("# My project\n\nBuild with make.", ""),  # no trailing newline
    ("# Top\n", "\n## After\n\ntrailing notes\n"),
    ("", "## Only after\n"),
])
def test_nothing_outside_the_markers_is_touched(repo_root: Path, before: str, after: str) -> None:
    old_block = f"<!-- leslie:begin version=0.0.1 -->\nold text\n{END}\n"
    path = repo_root / "AGENTS.md"
    path.write_bytes((before + ("\n\n" if before and not before.endswith("\n") else "")
                      + old_block + after).encode())
    original = path.read_bytes()
    assert block_status(repo_root) is not None
    assert run_leslie("agents-md", cwd=repo_root).code == 0
    new = path.read_bytes().decode()
    start, end = original.decode().index(old_block), original.decode().index(old_block) + len(old_block)
    assert new.startswith(original.decode()[:start])
    assert new.endswith(original.decode()[end:])
    assert block_of(new) == render_block(repo_root)
    check_agents_md(repo_root)


def test_block_appended_after_existing_user_content(repo_root: Path) -> None:
    path = repo_root / "AGENTS.md"
    for user in ("# Notes\nkeep me", "# Notes\nkeep me\n"):
        path.write_text(user, encoding="utf-8")
        update_agents_md(repo_root)
        text = path.read_text(encoding="utf-8")
        assert text.startswith(user)
        assert text == user.rstrip("\n") + "\n\n" + render_block(repo_root)
        update_agents_md(repo_root)
        assert path.read_text(encoding="utf-8") == text  # idempotent


def test_crlf_file_keeps_its_bytes_and_gets_a_crlf_block(repo_root: Path) -> None:
    path = repo_root / "AGENTS.md"
    user_top = b"# Windows project\r\n\r\nUse CRLF.\r\n"
    user_bottom = b"\r\n## Footer\r\n"
    path.write_bytes(user_top + b"\r\n<!-- leslie:begin version=0.0.0 -->\r\nold\r\n<!-- leslie:end -->\r\n"
                     + user_bottom)
    update_agents_md(repo_root)
    data = path.read_bytes()
    assert data.startswith(user_top + b"\r\n" + BEGIN.encode() + b"\r\n")
    assert data.endswith(END.encode() + b"\r\n" + user_bottom)
    assert b"\n" not in data.replace(b"\r\n", b"")  # no bare LF mixed in
    check_agents_md(repo_root)
    update_agents_md(repo_root)
    assert path.read_bytes() == data


def test_block_at_end_of_file_without_newline_stays_so(repo_root: Path) -> None:
    path = repo_root / "AGENTS.md"
    path.write_text(f"# Top\n\n<!-- leslie:begin version=0.0.0 -->\nold\n{END}", encoding="utf-8")
    update_agents_md(repo_root)
    assert path.read_text(encoding="utf-8") == "# Top\n\n" + render_block(repo_root).rstrip("\n")
    check_agents_md(repo_root)


@pytest.mark.parametrize("damage", ["missing_file", "no_block", "other_version", "edited", "no_end"])
def test_check_exits_1_when_missing_or_outdated(repo_root: Path, damage: str) -> None:
    path = repo_root / "AGENTS.md"
    good = path.read_text(encoding="utf-8")
    if damage == "missing_file":
        path.unlink()
    elif damage == "no_block":
        path.write_text("# just user text\n", encoding="utf-8")
    elif damage == "other_version":
        path.write_text(good.replace(f"version={__version__}", "version=0.0.9"), encoding="utf-8")
    elif damage == "edited":
        path.write_text(good.replace("Access rules", "Acess rules"), encoding="utf-8")
    else:
        path.write_text(good.replace(END, ""), encoding="utf-8")
    result = run_leslie("agents-md", "--check", cwd=repo_root)
    assert result.code == 1, result.stdout + result.stderr
    assert "leslie agents-md" in result.stderr
    with pytest.raises(CheckFailed):
        check_agents_md(repo_root)
    update_agents_md(repo_root)
    check_agents_md(repo_root)
    if damage == "other_version":
        assert "0.0.9" not in path.read_text(encoding="utf-8")


def test_check_names_the_version_that_wrote_the_block(repo_root: Path) -> None:
    path = repo_root / "AGENTS.md"
    path.write_text(path.read_text(encoding="utf-8").replace(f"version={__version__}", "version=0.0.9"),
                    encoding="utf-8")
    problem = block_status(repo_root)
    assert problem is not None and "0.0.9" in problem and __version__ in problem
    as_json = run_leslie("agents-md", "--check", "--json", cwd=repo_root)
    assert as_json.code == 1 and '"ok": false' in as_json.stdout
    assert run_leslie("agents-md", cwd=repo_root).code == 0
    ok = run_leslie("agents-md", "--check", cwd=repo_root)
    assert ok.code == 0 and "up to date" in ok.stdout


def test_claude_md_gets_an_import_line_once(repo_root: Path) -> None:
    claude = repo_root / "CLAUDE.md"
    claude.write_text("# Claude notes\nBe terse.", encoding="utf-8")
    result = run_leslie("agents-md", "--claude", cwd=repo_root)
    assert result.code == 0 and "CLAUDE.md" in result.stdout
    assert claude.read_text(encoding="utf-8") == "# Claude notes\nBe terse.\n@AGENTS.md\n"
    assert run_leslie("agents-md", "--claude", cwd=repo_root).code == 0
    assert claude.read_text(encoding="utf-8").count("@AGENTS.md") == 1


def test_claude_md_created_when_absent_and_symlinks_respected(repo_root: Path) -> None:
    assert update_agents_md(repo_root, claude=True) == ["CLAUDE.md"]
    assert (repo_root / "CLAUDE.md").read_text(encoding="utf-8") == "@AGENTS.md\n"
    # CLAUDE.md as a symlink to AGENTS.md already holds the block: nothing to add, link kept.
    (repo_root / "CLAUDE.md").unlink()
    (repo_root / "CLAUDE.md").symlink_to("AGENTS.md")
    assert update_agents_md(repo_root, claude=True) == []
    assert (repo_root / "CLAUDE.md").is_symlink()
    assert "@AGENTS.md" not in (repo_root / "AGENTS.md").read_text(encoding="utf-8")


def test_agents_md_symlink_is_written_through(repo_root: Path) -> None:
    shared = repo_root / "docs" / "agents.md"
    shared.parent.mkdir()
    shared.write_text("# Shared guide\n", encoding="utf-8")
    (repo_root / "AGENTS.md").unlink()
    (repo_root / "AGENTS.md").symlink_to("docs/agents.md")
    update_agents_md(repo_root)
    assert (repo_root / "AGENTS.md").is_symlink()
    assert shared.read_text(encoding="utf-8").startswith("# Shared guide\n\n" + BEGIN)


def test_user_override_of_the_block_body(repo_root: Path) -> None:
    templates = repo_root / ".leslie" / "templates"
    templates.mkdir()
    (templates / "agents_md_block.md.j2").write_text("Our own rules for leslie {{ version }}.\n", encoding="utf-8")
    approve_templates(repo_root)
    update_agents_md(repo_root)
    assert block_of((repo_root / "AGENTS.md").read_text(encoding="utf-8")) == (
        f"{BEGIN}\nOur own rules for leslie {__version__}.\n{END}\n")
    (templates / "agents_md_block.md.j2").write_text(f"sneaky {END}\n", encoding="utf-8")
    approve_templates(repo_root)
    with pytest.raises(UsageError):
        update_agents_md(repo_root)
    result = run_leslie("agents-md", cwd=repo_root)
    assert result.code == 2 and "agents_md_block.md.j2" in result.stderr


def test_updated_text_unit_cases() -> None:
    block = f"{BEGIN}\nbody\n{END}\n"
    assert updated_text(None, block) == block
    assert updated_text("", block) == block
    assert updated_text("\n", block) == "\n\n" + block
    assert updated_text("x", block) == "x\n\n" + block
    twice = updated_text(updated_text("x\n", block), block)
    assert twice == "x\n\n" + block


# -- what the block teaches an agent ----------------------------------------------------------------


def test_block_teaches_thread_context_access_rules_and_responsibilities() -> None:
    text = render_block()
    lowered = text.lower()
    for needle in ("<thread_context", "<ref", "<asset", "relations_file", "objective", "one level",
                   "plan", "progress", "read", "write", "never", "leslie context", "leslie show"):
        assert needle.lower() in lowered, needle
    table = re.findall(r"^\| (.+?) \| (.+?) \|$", text, re.MULTILINE)
    rules = {row[0]: row[1] for row in table if row[0] != "access" and not row[0].startswith("---")}
    assert rules == {
        "read your own assets": "yes",
        "write your own assets": "yes",
        "read referenced assets (those listed in a `<ref>`)": "yes",
        "write referenced assets": "**no, never**",
    }
    for responsibility in ("If your plan and progress files exist, read them first",
                           "create the plan file", "After each significant step".lower(),
                           "Stay in scope", "Never write, move or delete anything in another thread"):
        assert responsibility.lower() in lowered, responsibility


def test_the_example_in_the_block_is_a_valid_context() -> None:
    fenced = re.search(r"```xml\n(.*?)```", render_block(), re.DOTALL)
    assert fenced is not None
    xml = fenced.group(1).split("\n\n")[0] + "\n"
    root = parse_valid(xml)
    assert root.get("thread") == "thread-abc123"
    assert etree.tostring(root).count(b"<asset") == 5
