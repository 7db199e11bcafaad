"""Real usage read from the agents' own transcripts (Claude Code JSON lines, Codex rollouts)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from conftest import run_leslie
from leslie.inject import transcripts
from leslie.ops.threads import spawn
from leslie.store import sessions
from leslie.store.repository import Repository


def claude_reply(input_tokens: int, *, cache_read: int = 0, output: int = 100, sidechain: bool = False) -> str:
    return json.dumps({"type": "assistant", "isSidechain": sidechain, "message": {
        "role": "assistant", "model": "claude-opus-5-5", "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": cache_read, "output_tokens": output}}})


def codex_count(total: int, window: int = 258_400) -> str:
    return json.dumps({"timestamp": "2026-11-23T00:00:00Z", "type": "event_msg", "payload": {
        "type": "token_count", "info": {"total_token_usage": {"total_tokens": total * 3},
                                        "last_token_usage": {"input_tokens": total - 50, "cached_input_tokens": 0,
                                                             "output_tokens": 50, "total_tokens": total},
                                        "model_context_window": window}}})


def test_claude_code_usage_is_the_last_reply_s_context(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    user = json.dumps({"type": "user", "message": {"role": "user", "content": "x" * 300_000}})
    path.write_text("\n".join([claude_reply(5), claude_reply(1000, cache_read=40_000), user,
                               claude_reply(9, sidechain=True), user]) + "\n")
    assert transcripts.read_usage("claude-code", str(path)) == (41_100, 1_000_000)


def test_codex_usage_and_window_from_the_rollout(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join([codex_count(1000), codex_count(200_000, 272_000),
                               json.dumps({"type": "response_item", "payload": {"type": "message"}})]) + "\n")
    assert transcripts.read_usage("codex", str(path)) == (200_000, 272_000)


def test_only_the_tail_is_read_and_anything_odd_is_no_figure(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    filler = json.dumps({"type": "user", "message": {"content": "y" * 1000}})
    path.write_text(claude_reply(777) + "\n" + "\n".join([filler] * 2000) + "\n")  # the reply is 2 MB back
    assert transcripts.read_usage("claude-code", str(path)) is None
    assert transcripts.read_usage("claude-code", str(tmp_path / "missing")) is None
    assert transcripts.read_usage("acp", str(path)) is None
    os.mkfifo(tmp_path / "fifo")
    assert transcripts.read_usage("claude-code", str(tmp_path / "fifo")) is None  # no hang
    (tmp_path / "link").symlink_to(path)
    assert transcripts.read_usage("claude-code", str(tmp_path / "link")) is None
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "assistant", "message": {"usage": {"input_tokens": "many"}}}\n{"usage": [\n')
    assert transcripts.read_usage("claude-code", str(broken)) is None


def test_a_line_split_across_reads_is_found(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    padding = json.dumps({"type": "user", "message": {"content": "z" * (transcripts.CHUNK - 40)}})
    path.write_text(claude_reply(123) + "\n" + padding + "\n")
    assert transcripts.read_usage("claude-code", str(path)) == (223, 1_000_000)


def hook(root: Path, payload: dict[str, Any]) -> str:
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(payload),
                        env={"LESLIE_THREAD": "thread-tr"})
    assert result.code == 0, result.stderr
    return result.stdout


def test_the_hook_predicts_compaction_from_the_transcript_s_real_usage(repo: Repository) -> None:
    spawn(repo, "Transcripts", thread_id="thread-tr")
    transcript = repo.root / "transcript.jsonl"
    transcript.write_text(claude_reply(10_000) + "\n")

    def prompt() -> str:
        return hook(repo.root, {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(repo.root),
                                "hook_event_name": "UserPromptSubmit", "prompt": "go"})

    assert "additionalContext" in prompt()
    assert prompt() == ""
    with transcript.open("a") as handle:
        handle.write(claude_reply(905_000) + "\n")  # 90.5 % of the 1M window: Claude Code compacts soon
    assert "additionalContext" in prompt()
    assert prompt() == ""  # predicted once, not at every prompt until the compaction
    state = sessions.load_state(sessions.SessionFiles(str(repo.root), "claude-code", "s1"))
    assert state is not None and state["usage"] == [905_100, 1_000_000] and state["usage_source"] == "transcript"
    assert state["counts"]["injections"] == {"start": 1, "predicted": 1}
    stats = run_leslie("stats", cwd=repo.root)
    assert "context 905100 of 1000000 tokens (transcript)" in stats.stdout


def test_past_the_agent_s_own_trigger_its_compaction_event_reinjects_not_a_prediction(repo: Repository) -> None:
    # Claude Code compacts at 967,000 of 1,000,000 before the prompt reaches the model, then sends SessionStart
    # "compact": a predicted block on that prompt would make two blocks in the compacted conversation.
    spawn(repo, "Transcripts", thread_id="thread-tr")
    transcript = repo.root / "transcript.jsonl"
    transcript.write_text(claude_reply(10_000) + "\n")
    base = {"session_id": "s2", "transcript_path": str(transcript), "cwd": str(repo.root)}
    assert "additionalContext" in hook(repo.root, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "a"})
    with transcript.open("a") as handle:
        handle.write(claude_reply(989_900) + "\n")
    assert hook(repo.root, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "b"}) == ""
    assert "additionalContext" in hook(repo.root, {**base, "hook_event_name": "SessionStart", "source": "compact"})
    assert transcripts.threshold("codex", 250_000, 272_000, 0.9) == float("inf")
    assert transcripts.threshold("codex", 100_000, 272_000, 0.9) == 0.85
    assert transcripts.threshold("claude-code", 100_000, 1_000_000, 0.8) == 0.8


def test_gemini_usage_is_the_last_reply_s_prompt_tokens(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-11-23T19-48-7f4ed334.jsonl"
    reply = {"id": "g", "timestamp": "2026-11-23T19:48:13.934Z", "type": "gemini", "content": "ok", "thoughts": [],
             "tokens": {"input": 10_426, "output": 5, "cached": 0, "thoughts": 0, "tool": 0, "total": 10_431},
             "model": "gemini-3.8-flash"}
    lines = [{"sessionId": "7f4e", "kind": "main"}, {"type": "user", "content": [{"text": "hello"}]},
             {**reply, "tokens": {**reply["tokens"], "input": 9_000}}, reply,
             {"$set": {"lastUpdated": "2026-11-23T19:48:13.934Z"}}, {"type": "user", "content": [{"text": "tokens"}]}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert transcripts.read_usage("gemini", str(path)) == (10_426, 1_048_576)
    # Gemini compresses after the prompt's hook, at half its window: predicted there, never "too late".
    assert transcripts.threshold("gemini", 1_000_000, 1_048_576, 0.9) == 0.5
    assert transcripts.threshold("gemini", 10_000, 1_048_576, 0.3) == 0.3
    path.write_text(json.dumps({**reply, "tokens": {"input": True}}) + "\n")
    assert transcripts.read_usage("gemini", str(path)) is None
