"""`leslie edit ID` without options: a thread's title, objective and intent as a small text, in `$EDITOR`.

The text is a header of `title:` and `objective:` lines, a blank line, then the intent, down to a scissors
line; everything below the scissors (help and the objectives to choose from) is dropped. There is no comment
character: an intent may well hold a Markdown `# heading`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from leslie.errors import NotFoundError, UsageError
from leslie.ops import threads
from leslie.store.model import Thread, validate_thread_id
from leslie.store.repository import Repository

SCISSORS = "# ------------------------ >8 ------------------------"
FIELDS = ("title", "objective")


@dataclass(frozen=True)
class EditedFields:
    """What the edited text says: the title, the objective (None: none) and the intent."""

    title: str
    objective: str | None
    intent: str


def editable_text(thread: Thread, objectives: list[tuple[str, str]]) -> str:
    """The text the editor opens for `thread`; `objectives` are (ID, title) pairs listed below the scissors."""
    lines = [f"title: {thread.title}", f"objective: {thread.objective or ''}", "", thread.intent.rstrip("\n"),
             "", SCISSORS,
             f"# Editing {thread.id}. Change the title and objective lines, and the intent below the blank",
             "# line; everything from the scissors line down is ignored. Save and quit to apply; leave the text",
             "# as it is (or quit without saving) to change nothing. An empty objective: the thread has none."]
    if objectives:
        lines.append("# Objectives:")
        lines += [f"#   {oid}  {title}" for oid, title in objectives]
    return "\n".join(lines) + "\n"


def parse_edited(text: str) -> EditedFields:
    """Read an edited text back; UsageError naming the line when it is not in the expected form."""
    body = text.split("\n" + SCISSORS, 1)[0] if not text.startswith(SCISSORS) else ""
    lines = body.replace("\r\n", "\n").split("\n")
    values: dict[str, str] = {}
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            break
        name, sep, value = line.partition(":")
        name = name.strip().lower()
        if not sep or name not in FIELDS:
            raise UsageError(f"edited text, line {number}: expected `title: ...` or `objective: ...` before the "
                             f"blank line that starts the intent, got {line[:60]!r}")
        if name in values:
            raise UsageError(f"edited text, line {number}: {name} is given twice")
        values[name] = value.strip()
    else:
        number = len(lines) + 1
    if "title" not in values:
        raise UsageError("edited text: the `title:` line is missing")
    intent = "\n".join(lines[number:]).strip("\n")
    return EditedFields(values["title"], values.get("objective") or None, intent)


def choose_editor(environ: Mapping[str, str] | None = None) -> list[str]:
    """The editor command: `$EDITOR`, else `$VISUAL`, split like a shell would; UsageError when neither is set."""
    env = os.environ if environ is None else environ
    for name in ("EDITOR", "VISUAL"):
        value = env.get(name, "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise UsageError(f"${name} cannot be read as a command ({exc}): {value!r}") from None
            if words:
                return words
    raise UsageError("no editor: set EDITOR (or VISUAL), or give --title, --intent or --objective")


def edit_in_editor(repo: Repository, thread_id: str) -> threads.Outcome:
    """Open the thread in the editor and apply what comes back; nothing is written when the text is unchanged.

    The text lives in a private temporary file outside the repository; when it cannot be applied (a wrong
    form, an empty title, an unknown objective), the error names that file, so the user's edit is not lost.
    """
    validate_thread_id(thread_id)
    command = choose_editor()
    thread = repo.read_live_thread(thread_id)
    listed = [(o.id, o.title) for o in repo.objectives()]
    original = editable_text(thread, listed)
    handle, path = tempfile.mkstemp(prefix=f"leslie-edit-{thread_id}-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(original)
    try:
        done = subprocess.run([*command, path], check=False)
    except OSError as exc:
        os.unlink(path)
        raise UsageError(f"cannot run the editor {command[0]!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        os.unlink(path)
        raise UsageError(f"the editor {command[0]!r} exited with {done.returncode}; nothing changed")
    try:
        with open(path, encoding="utf-8") as file:
            edited = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the edited text in {path}: {exc}; nothing changed") from None
    if edited == original:
        os.unlink(path)
        return threads.Outcome(thread, changed=False)
    try:
        fields = parse_edited(edited)
        # An intent that only lost or gained trailing blank lines is the same intent.
        intent = thread.intent if fields.intent.rstrip() == thread.intent.rstrip() else fields.intent
        outcome = threads.edit(repo, thread_id, title=fields.title, intent=intent, objective=fields.objective,
                               expected=thread)
    except (UsageError, NotFoundError) as exc:
        raise type(exc)(f"{exc.message}; nothing changed (your text is kept in {path})") from None
    os.unlink(path)
    return outcome
