"""injector.py: the orchestration of injections over real repositories, sessions and caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import approve_templates, state_dir
from leslie.context import trust
from leslie.context.block import context_fingerprint, render_context
from leslie.errors import CorruptStateError, NotFoundError, UsageError
from leslie.inject import blocks, injector
from leslie.inject.blocks import RepoHandle
from leslie.inject.injector import Injection
from leslie.ops.claims import release
from leslie.ops.threads import reference, remove, retitle, set_status, spawn, switch, unreference
from leslie.store import sessions
from leslie.store.repository import Repository


@pytest.fixture
def thread_id(repo: Repository) -> str:
    return spawn(repo, "Fix the login bug", thread_id="thread-main").thread.id


@pytest.fixture
def other(repo: Repository) -> str:
    return spawn(repo, "API design", thread_id="thread-api").thread.id


def h(repo: Repository) -> RepoHandle:
    return RepoHandle.of(repo)


def configure(repo: Repository, text: str) -> None:
    (repo.root / ".leslie" / "config.toml").write_text(text, encoding="utf-8")


def message(repo: Repository, thread: str, session: str = "s1", **kwargs: object) -> Injection:
    return injector.on_user_message(h(repo), agent="inject", session_id=session, thread_id=thread, **kwargs)


def log(repo: Repository, session: str = "s1", agent: str = "inject") -> list[dict[str, object]]:
    return sessions.read_log(sessions.SessionFiles(str(repo.root), agent, session).log)


def state(repo: Repository, session: str = "s1", agent: str = "inject") -> dict[str, object]:
    loaded = sessions.load_state(sessions.SessionFiles(str(repo.root), agent, session))
    assert loaded is not None
    return loaded


# -- the smart policy end to end ------------------------------------------------------------------------------
def test_first_message_injects_the_block_then_nothing(repo: Repository, thread_id: str) -> None:
    first = message(repo, thread_id, message="hello")
    assert first.reason == "start"
    assert first.text == render_context(repo, thread_id)
    assert message(repo, thread_id, message="again") == Injection(None, None)
    entries = log(repo)
    assert [e["kind"] for e in entries] == ["input", "input"]
    assert [e["reason"] for e in entries] == ["start", None]
    assert entries[0]["context"] == first.text  # the first context of the session, verbatim
    assert entries[0]["fingerprint"] == context_fingerprint(repo, thread_id)
    assert "context" not in entries[1] and entries[1]["size"] == 5 and entries[1]["tokens"] == 2
    assert "message" not in entries[0]  # record_messages is off by default


def test_a_changed_context_is_injected_again_and_logged_in_full(repo: Repository, thread_id: str,
                                                                  other: str) -> None:
    message(repo, thread_id)
    reference(repo, thread_id, other, ["plan.md"])
    changed = message(repo, thread_id)
    assert changed.reason == "changed"
    assert changed.text is not None and f'<ref thread="{other}" ' in changed.text
    assert message(repo, thread_id).reason is None
    unreference(repo, thread_id, other)
    back = message(repo, thread_id)
    assert back.reason == "changed" and back.text is not None and "<ref" not in back.text
    contexts = [e.get("context") for e in log(repo) if e["reason"]]
    assert contexts[1] == changed.text and contexts[2] == back.text


@pytest.mark.parametrize("change", ["spawn-unrelated", "retitle-unrelated", "status-unrelated"])
def test_unrelated_changes_inject_nothing(repo: Repository, thread_id: str, other: str, change: str) -> None:
    message(repo, thread_id)
    if change == "spawn-unrelated":
        spawn(repo, "Something else")
    elif change == "retitle-unrelated":
        retitle(repo, other, "A new title")
    else:
        set_status(repo, other, "paused")
    assert message(repo, thread_id).reason is None


def test_a_referenced_thread_that_is_deleted_changes_the_context(repo: Repository, thread_id: str,
                                                                   other: str) -> None:
    reference(repo, thread_id, other)
    assert message(repo, thread_id).text is not None
    remove(repo, other, force=True)
    after = message(repo, thread_id)
    assert after.reason == "changed" and after.text is not None and other not in after.text


def test_inputs_key_watches_the_packaged_template_the_fingerprint_reads() -> None:
    from leslie.context import block as context

    assert str(context._PACKAGED_TEMPLATE) == blocks.PACKAGED_TEMPLATE
    assert os.path.isfile(blocks.PACKAGED_TEMPLATE)


def test_inputs_key_moves_whenever_the_fingerprint_does(repo: Repository, thread_id: str, other: str) -> None:
    """The stat key is what lets the hook skip `context_fingerprint`: it must never stay put while it moves."""
    steps = [
        lambda: reference(repo, thread_id, other, ["design"]),
        lambda: (repo.root / ".leslie/threads/thread-api/design").mkdir(exist_ok=True),
        lambda: retitle(repo, other, "Renamed"),
        lambda: configure(repo, "[injection]\nmode = 'smart'\n"),
        lambda: (repo.root / ".leslie/templates").mkdir(exist_ok=True),
        lambda: (repo.root / ".leslie/templates/extra.j2").write_text("x"),
        lambda: approve_templates(repo.root),  # approving an override changes the fingerprint
        lambda: trust.revoke(repo.root),
        lambda: set_status(repo, other, "done"),
        lambda: reference(repo, thread_id, other),
        lambda: retitle(repo, thread_id, "Own title"),
    ]
    previous = (blocks.inputs_key(str(repo.root), thread_id), context_fingerprint(repo, thread_id))
    for step in steps:
        step()
        current = (blocks.inputs_key(str(repo.root), thread_id), context_fingerprint(repo, thread_id))
        if current[1] != previous[1]:
            assert current[0] != previous[0]
        previous = current


# -- compactions, usage, transcripts, rounds ------------------------------------------------------------------
def test_an_observed_compaction_reinjects_at_the_next_message(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    injector.on_compaction(h(repo), agent="inject", session_id="s1", thread_id=thread_id)
    assert message(repo, thread_id).reason == "compacted"
    assert message(repo, thread_id).reason is None
    assert [e["kind"] for e in log(repo)] == ["input", "compaction", "input", "input"]


def test_compacted_flag_reinjects_now(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    assert message(repo, thread_id, compacted=True).reason == "compacted"


def test_usage_reports(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    injector.on_usage(h(repo), agent="inject", session_id="s1", thread_id=thread_id, used=100_000, size=200_000)
    assert message(repo, thread_id).reason is None
    injector.on_usage(h(repo), agent="inject", session_id="s1", thread_id=thread_id, used=185_000, size=200_000)
    assert message(repo, thread_id).reason == "predicted"
    injector.on_usage(h(repo), agent="inject", session_id="s1", thread_id=thread_id, used=190_000, size=200_000)
    assert message(repo, thread_id).reason is None  # still full, already re-injected: not every message
    injector.on_usage(h(repo), agent="inject", session_id="s1", thread_id=thread_id, used=30_000, size=200_000)
    assert message(repo, thread_id).reason == "compacted"  # a sharp drop is a compaction
    assert state(repo)["counts"]["compactions"] == 1  # type: ignore[index]


def test_usage_drop_to_zero_and_usage_given_with_the_message(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id, usage=(50_000, 200_000))
    assert message(repo, thread_id, usage=(0, 200_000)).reason == "compacted"
    assert message(repo, thread_id, usage=(60_000, 200_000)).reason is None
    assert message(repo, thread_id, usage=(59_000, 200_000)).reason is None  # a small dip is not a compaction


def test_transcript_growth_predicts(repo: Repository, thread_id: str, tmp_path: Path) -> None:
    configure(repo, "[injection]\nreinject_every_rounds = 0\ncontext_window_tokens = 1000\n")
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(b"x" * 100)
    assert message(repo, thread_id, transcript_path=str(transcript)).reason == "start"
    transcript.write_bytes(b"x" * (100 + 3000))
    assert message(repo, thread_id, transcript_path=str(transcript)).reason is None  # 750 tokens < 900
    transcript.write_bytes(b"x" * (100 + 3600))
    assert message(repo, thread_id, transcript_path=str(transcript)).reason == "predicted"
    assert message(repo, thread_id, transcript_path=str(transcript)).reason is None


def test_round_count_heuristic(repo: Repository, thread_id: str) -> None:
    configure(repo, "[injection]\nreinject_every_rounds = 3\n")
    reasons = [message(repo, thread_id).reason for _ in range(8)]
    assert reasons == ["start", None, None, "predicted", None, None, "predicted", None]


@pytest.mark.parametrize(("mode", "want"), [
    ("always", ["start", "always", "compacted", "always"]),
    ("start", ["start", None, None, None]),
    ("smart", ["start", None, "compacted", None]),
])
def test_modes(repo: Repository, thread_id: str, mode: str, want: list[str | None]) -> None:
    configure(repo, f"[injection]\nmode = '{mode}'\n")
    got = [message(repo, thread_id).reason, message(repo, thread_id).reason]
    injector.on_compaction(h(repo), agent="inject", session_id="s1", thread_id=thread_id)
    got += [message(repo, thread_id).reason, message(repo, thread_id).reason]
    assert got == want


def test_record_messages(repo: Repository, thread_id: str) -> None:
    configure(repo, "[injection]\nrecord_messages = true\n")
    message(repo, thread_id, message="the secret plan")
    assert log(repo)[0]["message"] == "the secret plan"


def test_assistant_messages_are_logged(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    injector.on_assistant_message(h(repo), agent="inject", session_id="s1", thread_id=thread_id, size=400)
    entries = log(repo)
    assert [e["kind"] for e in entries] == ["input", "assistant"]
    assert entries[1]["size"] == 400 and entries[1]["tokens"] == 100
    assert state(repo)["assistant_messages"] == 1


def test_stats_counters(repo: Repository, thread_id: str) -> None:
    first = message(repo, thread_id)
    for _ in range(4):
        message(repo, thread_id)
    counts = state(repo)["counts"]
    block = (len((first.text or "").encode()) + 3) // 4
    assert counts["injections"] == {"start": 1}  # type: ignore[index]
    assert counts["tokens_injected"] == block  # type: ignore[index]
    assert counts["always_tokens"] == 5 * block  # type: ignore[index]


# -- session starts (Claude Code and Codex) ------------------------------------------------------------------
def start(repo: Repository, thread: str, source: str, session: str = "s1") -> Injection:
    return injector.on_session_start(h(repo), agent="inject", session_id=session, thread_id=thread, source=source)


def test_session_start_sources(repo: Repository, thread_id: str) -> None:
    assert start(repo, thread_id, "startup").reason == "start"
    assert message(repo, thread_id).reason is None  # already told at the start
    assert start(repo, thread_id, "resume").reason is None
    assert start(repo, thread_id, "compact").reason == "compacted"
    assert message(repo, thread_id).reason is None
    assert start(repo, thread_id, "clear").reason == "start"
    assert [e["kind"] for e in log(repo)] == ["session_start", "input", "session_start", "session_start", "input",
                                              "session_start"]
    assert state(repo)["rounds"] == 2  # session starts are not rounds


def test_one_compaction_reported_twice_reinjects_once(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    assert start(repo, thread_id, "compact").reason == "compacted"
    injector.on_compaction(h(repo), agent="inject", session_id="s1", thread_id=thread_id)  # Codex PostCompact too
    assert message(repo, thread_id).reason is None
    injector.on_compaction(h(repo), agent="inject", session_id="s1", thread_id=thread_id)  # a later, real one
    assert message(repo, thread_id).reason == "compacted"


def test_a_session_moved_to_another_thread_starts_over(repo: Repository, thread_id: str, other: str) -> None:
    message(repo, thread_id)
    moved = message(repo, other)
    assert moved.reason == "start" and moved.text is not None and f'thread="{other}"' in moved.text
    assert state(repo)["thread"] == other


# -- errors -----------------------------------------------------------------------------------------------------
def test_missing_and_deleted_threads(repo: Repository, thread_id: str) -> None:
    with pytest.raises(NotFoundError):
        message(repo, "thread-nope")
    remove(repo, thread_id)
    with pytest.raises(NotFoundError, match="deleted"):
        message(repo, thread_id)


def test_a_corrupt_state_fails_once_then_starts_afresh(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    files = sessions.SessionFiles(str(repo.root), "inject", "s1")
    Path(files.state).write_bytes(b'{"version": 1,')
    with pytest.raises(CorruptStateError):
        message(repo, thread_id)
    assert message(repo, thread_id).reason == "start"
    assert any(".corrupt-" in name for name in os.listdir(Path(files.state).parent))


@pytest.mark.parametrize(("key", "value"), [
    ("context_bytes", "../../etc/passwd"), ("context_bytes", [1]), ("user_tokens_since_injection", {}),
    ("counts", {"injections": {"start": "1"}}), ("counts", {"injections": {}, "compactions": None}),
    ("counts", {"injections": {}, "input_tokens": ""})])
def test_a_state_field_of_the_wrong_type_is_corrupt_and_starts_afresh(repo: Repository, thread_id: str, key: str,
                                                                      value: object) -> None:
    """Each was valid JSON that the shape check let through and an `int()` later refused (TypeError or
    ValueError: the hook warned of an internal error at every prompt, `leslie stats` exited 70)."""
    message(repo, thread_id)
    files = sessions.SessionFiles(str(repo.root), "inject", "s1")
    doc = json.loads(Path(files.state).read_text())
    doc[key] = value
    Path(files.state).write_text(json.dumps(doc))
    with pytest.raises(CorruptStateError, match=key.split("_", maxsplit=1)[0]):
        message(repo, thread_id)
    assert sessions.stats(str(repo.root))["sessions"] == 0  # skipped, as every corrupt state
    assert message(repo, thread_id).reason == "start"


@pytest.mark.parametrize("config", [{}, {"injection": {}}, {"injection": {"mode": "smart"}}, {"injection": None},
                                    {"injection": {"mode": 1}}, {"commands": {}}])
def test_a_damaged_cached_settings_document_is_parsed_again(repo: Repository, thread_id: str,
                                                            config: dict[str, object]) -> None:
    message(repo, thread_id)
    files = sessions.SessionFiles(str(repo.root), "inject", "s1")
    doc = json.loads(Path(files.state).read_text())
    doc["config"] = config
    Path(files.state).write_text(json.dumps(doc))
    cache = state_dir(repo.root) / "config-cache.json"
    cache.write_text(json.dumps({**json.loads(cache.read_text()), "config": config}))
    assert not blocks.usable_settings(config)
    assert message(repo, thread_id).reason is None  # nothing new to inject, and no error
    assert blocks.usable_settings(json.loads(Path(files.state).read_text())["config"])


def test_a_corrupt_config_is_reported(repo: Repository, thread_id: str) -> None:
    configure(repo, "[injection\n")
    with pytest.raises(CorruptStateError, match=r"config\.toml"):
        message(repo, thread_id)


def test_unapproved_context_commands_warn_and_are_skipped(repo: Repository, thread_id: str) -> None:
    configure(repo, "[[context.commands]]\nname = 'status'\ncommand = 'echo hi'\n")
    first = message(repo, thread_id)
    assert first.reason == "start" and first.text is not None and "<command" not in first.text
    assert len(first.warnings) == 1 and "leslie trust" in first.warnings[0]


# -- thread and root resolution ---------------------------------------------------------------------------
def test_session_thread_order(repo: Repository, thread_id: str, other: str) -> None:
    root = str(repo.root)
    assert injector.session_thread(root, agent="inject", session_id="new", environ={}) is None
    switch(repo, other)
    assert injector.session_thread(root, agent="inject", session_id="new", environ={}) == other
    message(repo, thread_id, session="bound")  # the session records its thread
    assert injector.session_thread(root, agent="inject", session_id="bound", environ={}) == thread_id
    env = {"LESLIE_THREAD": other}
    assert injector.session_thread(root, agent="inject", session_id="bound", environ=env) == other
    assert injector.session_thread(root, agent="inject", session_id="bound", environ=env,
                                   explicit=thread_id) == thread_id
    with pytest.raises(UsageError):
        injector.session_thread(root, agent="inject", session_id="x", environ={"LESLIE_THREAD": "../etc"})


def test_discover_root(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = repo_root / "a" / "b"
    deep.mkdir(parents=True)
    assert injector.discover_root(str(deep)) == str(repo_root)
    assert injector.discover_root(str(tmp_path / "nowhere")) is None
    assert injector.discover_root(str(tmp_path), explicit=str(repo_root)) == str(repo_root)
    # Each path made absolute and normalized, as the hooks key their state by it; an empty --root is no root.
    assert injector.discover_root(str(deep / ".." / "b")) == str(repo_root)
    assert injector.discover_root(str(tmp_path), explicit=str(deep / ".." / "..")) == str(repo_root)
    assert injector.discover_root(str(deep), explicit="") == str(repo_root)
    monkeypatch.chdir(deep)
    assert injector.discover_root() == str(repo_root)
    assert injector.discover_root("/" + "x" * 5000) is None  # a name too long to look at: no repository
    monkeypatch.setenv("LESLIE_ROOT", str(tmp_path))
    assert injector.discover_root(str(deep)) is None  # LESLIE_ROOT wins, and has no .leslie/


# -- caches -----------------------------------------------------------------------------------------------
def test_a_cached_block_is_injected_without_jinja2_or_lxml(repo: Repository, thread_id: str) -> None:
    # A session's first prompt claims its thread (SPEC §13), which reads the thread: not this test's subject.
    (repo.root / ".leslie" / "config.toml").write_text("[claims]\nauto = false\n", encoding="utf-8")
    message(repo, thread_id, session="warm")  # renders, and caches the block
    code = (
        "import sys\nfrom leslie.inject import blocks, injector\n"
        f"r = injector.on_user_message(blocks.RepoHandle({str(repo.root)!r}), agent='inject', "
        f"session_id='cold', thread_id={thread_id!r})\n"
        "print(r.reason, sorted(m for m in ('jinja2', 'lxml') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "start []"
    assert log(repo, "cold")[0]["context"] == render_context(repo, thread_id)


def test_caches_are_disposable(repo: Repository, thread_id: str) -> None:
    message(repo, thread_id)
    release(repo, thread_id, session="s1")  # s1 claimed the thread: s2's block would say so (`<held_by>`)
    state = state_dir(repo.root)
    (state / "config-cache.json").write_bytes(b"not json")
    for cache in (state / "contexts").iterdir():
        cache.write_bytes(b"{broken")
    fresh = message(repo, thread_id, session="s2")
    assert fresh.reason == "start" and fresh.text == render_context(repo, thread_id)
    cached = json.loads((state / "contexts" / f"{thread_id}.json").read_text())
    assert cached["xml"] == fresh.text


def test_refresh_context_cache(repo: Repository, thread_id: str) -> None:
    text = blocks.refresh(repo, thread_id)
    assert text == render_context(repo, thread_id)


def test_injection_value_object() -> None:
    one = Injection("start", "<x/>", ("w",))
    assert one == Injection("start", "<x/>", ("w",)) and hash(one) == hash(Injection("start", "<x/>", ("w",)))
    assert one != Injection(None, None) and "start" in repr(one)
    with pytest.raises(AttributeError):
        one.reason = None  # type: ignore[misc]


def test_repo_handle_opens_the_repository_lazily(repo_root: Path) -> None:
    handle = RepoHandle(str(repo_root))
    assert handle.repo().root == repo_root and handle.repo() is handle.repo()
