"""leslie's version, and the signature of the code this copy runs, in the lowest layer so that any module can
name them without importing the package's API."""

import os

__version__ = "0.1.0"

PACKAGE = os.path.dirname(os.path.abspath(__file__))  # this copy of leslie: the folder of its modules

Signature = list[tuple[str, int, int, int]]


def code_signature() -> Signature:
    """The stat signature (path, inode, size, mtime) of every module and template of this copy of leslie."""
    found: Signature = []
    folders = [PACKAGE]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith((".py", ".j2")):
                        st = entry.stat(follow_symlinks=False)
                        found.append((entry.path, st.st_ino, st.st_size, st.st_mtime_ns))
                    elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except OSError:
            found.append((folder, 0, 0, 0))
    return sorted(found)


_loaded: Signature | None = None


def loaded_code() -> Signature:
    """The signature of the code this process runs: taken the first time it is asked for. The warm process asks
    before it imports the rest of leslie (`leslie.server.warm`), and its children share its answer; what one
    of them draws is then kept with the code that drew it (`ops/tree_drawing.py`, "Drawings")."""
    global _loaded
    if _loaded is None:
        _loaded = code_signature()
    return _loaded
