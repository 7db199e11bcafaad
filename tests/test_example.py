"""The example tree `.leslie.example/`: consistent as leslie writes it, realistic, and rendered as golden files."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_leslie
from leslie.context.block import render_context
from leslie.ops.doctor import run_doctor
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Thread, thread_from_json
from leslie.store.relations import build_index
from leslie.store.repository import Repository
from test_context import assert_golden, parse_valid

EXAMPLE = Path(__file__).parents[1] / ".leslie.example"



def live_threads(repo: Repository) -> list[Thread]:
    return [t for t in (repo.read_thread(tid) for tid in repo.thread_ids()) if not t.is_tombstone]


def test_doctor_finds_nothing_to_fix(example_repo: Repository) -> None:
    result = run_leslie("doctor", cwd=example_repo.root)
    assert result.code == 0, result.stdout + result.stderr
    assert run_doctor(example_repo).ok


def test_files_are_exactly_what_leslie_writes() -> None:
    json_files = sorted(EXAMPLE.rglob("*.json"))
    assert len(json_files) >= 9
    for path in json_files:
        assert path.read_bytes() == dumps_canonical(json.loads(path.read_bytes())), path
    threads = [thread_from_json(json.loads(p.read_bytes())) for p in EXAMPLE.glob("threads/*/thread.json")]
    index = (EXAMPLE / "thread_relations.json").read_bytes()
    assert index == dumps_canonical(build_index(threads).to_json())  # the index equals a rebuild
    assert not list(EXAMPLE.rglob("*.leslie-tmp")) and not (EXAMPLE / "state").exists()


def test_the_example_is_realistic(example_repo: Repository) -> None:
    repo = example_repo
    assert len(repo.objectives()) >= 2
    threads = live_threads(repo)
    assert len(threads) >= 5
    assert {t.objective for t in threads} == {o.id for o in repo.objectives()}
    assert any(t.status == "done" for t in threads)
    assert any(repo.read_thread(tid).is_tombstone for tid in repo.thread_ids())
    scopes = [scope for t in threads for scope in t.references.values()]
    assert any(not s for s in scopes) and any(s for s in scopes)  # whole and scoped references
    assert any(any(not s for s in t.references.values()) and any(s for s in t.references.values())
               for t in threads)
    for thread in threads:
        folder = repo.layout.thread_dir(thread.id)
        for name in ("plan.md", "progress.md"):
            text = (folder / name).read_text(encoding="utf-8")
            # Written by the agent, not the template left by spawn.
            assert "<!-- Thread" not in text and len(text.splitlines()) >= 5, (thread.id, name)
        assert "- [" in (folder / "plan.md").read_text(encoding="utf-8")
        assert "## 2026-" in (folder / "progress.md").read_text(encoding="utf-8")
        # Every scoped path names a file the referenced thread really has.
        for target, scope in thread.references.items():
            for path in scope:
                assert (repo.layout.thread_dir(target) / path).exists(), (thread.id, target, path)


def test_every_context_matches_its_golden_file(example_repo: Repository) -> None:
    threads = live_threads(example_repo)
    for thread in threads:
        xml = render_context(example_repo, thread.id, cache=False)
        root = parse_valid(xml)
        assert root.get("thread") == thread.id and root.get("objective") == thread.objective
        assert_golden(f"example/{thread.id}.xml", xml)
        assert_golden(f"example/{thread.id}.json", render_context(example_repo, thread.id, fmt="json"))
    golden_ids = {p.stem for p in (Path(__file__).parent / "golden" / "example").glob("*.xml")}
    assert golden_ids == {t.id for t in threads}


def test_context_through_the_cli_in_a_copy(example_repo: Repository) -> None:
    showcase = next(t for t in live_threads(example_repo)
                    if any(not s for s in t.references.values()) and any(s for s in t.references.values()))
    result = run_leslie("context", "--thread", showcase.id, cwd=example_repo.root)
    assert result.code == 0, result.stderr
    golden = (Path(__file__).parent / "golden" / "example" / f"{showcase.id}.xml").read_text(encoding="utf-8")
    assert result.stdout == golden
