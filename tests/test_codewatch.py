"""The warm process's watch on its own code (`leslie.server.codewatch`): real files in a temp folder, a real
inotify watch; the comparison of the files is spied on to see when it runs."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leslie.server import codewatch
from leslie.server.codewatch import CodeWatch
from leslie.version import Signature

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


def signature_of(folder: Path) -> Signature:
    found = []
    for path in sorted(folder.rglob("*.py")):
        st = path.lstat()
        found.append((str(path), st.st_ino, st.st_size, st.st_mtime_ns))
    return found


@pytest.fixture
def code(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text("VERSION = 1\n")
    (package / "sub" / "tool.py").write_text("def f() -> int:\n    return 1\n")
    return package


@pytest.fixture
def watch(code: Path) -> Iterator[CodeWatch]:
    watched = CodeWatch(signature_of(code))
    yield watched
    watched.close()


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each comparison of the files that ran, and its answer."""
    seen: list[bool] = []
    compare = codewatch.code_changed

    def spy(signature: Signature) -> bool:
        seen.append(compare(signature))
        return seen[-1]

    monkeypatch.setattr(codewatch, "code_changed", spy)
    return seen


def test_the_files_are_compared_first_then_only_after_something_happened(code: Path, watch: CodeWatch,
                                                                          comparisons: list[bool]) -> None:
    assert watch.fd is not None
    assert not watch.changed() and comparisons == [False]  # the first look compares
    assert not watch.changed() and not watch.changed()
    assert comparisons == [False]  # nothing happened: no comparison
    (code / "sub" / ".tool.py.swp").write_text("an editor's file beside the code")
    assert not watch.changed() and comparisons == [False, False]  # it happened: compared, the same code
    assert not watch.changed() and comparisons == [False, False]
    (code / "app.py").write_text("VERSION = 2\n")  # an edit in place, the same size
    assert watch.changed() and comparisons[-1] is True


def test_a_folder_put_back_as_a_copy_is_new_code(code: Path, watch: CodeWatch, comparisons: list[bool]) -> None:
    assert not watch.changed()
    os.rename(code / "sub", code.parent / "old-sub")  # the same bytes, new files: not the code it loaded
    shutil.copytree(code.parent / "old-sub", code / "sub")
    assert watch.changed()


def test_a_removed_file_is_changed_code(code: Path, watch: CodeWatch, comparisons: list[bool]) -> None:
    assert not watch.changed()
    (code / "sub" / "tool.py").unlink()
    assert watch.changed()


def test_without_a_watch_every_look_compares(code: Path, comparisons: list[bool]) -> None:
    signature = signature_of(code)
    shutil.rmtree(code / "sub")  # a folder that cannot be watched: no watch at all
    unwatched = CodeWatch(signature)
    assert unwatched.fd is None
    assert unwatched.changed() and unwatched.changed()
    assert comparisons == [True, True]
    (code / "sub").mkdir()
    (code / "sub" / "tool.py").write_text("def f() -> int:\n    return 1\n")
    assert unwatched.changed()  # still compared: the new file is not the one loaded
    assert len(comparisons) == 3


def test_a_watch_that_breaks_compares_from_then_on(watch: CodeWatch, comparisons: list[bool]) -> None:
    assert not watch.changed()
    assert watch.fd is not None
    os.close(watch.fd)  # read fails (EBADF): it can no longer vouch
    assert not watch.changed() and watch.fd is None
    assert not watch.changed() and comparisons == [False, False, False]
