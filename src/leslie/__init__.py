"""leslie: thread-scoped, file-based working memory for coding agents, inside a git repository.

The public API is re-exported here lazily, so that `import leslie` stays cheap on the hook's hot path.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Repository": "leslie.repository",
    "Thread": "leslie.model",
    "Objective": "leslie.model",
    "RefSpec": "leslie.threads",
    "Outcome": "leslie.threads",
    "spawn": "leslie.threads",
    "reference": "leslie.threads",
    "unreference": "leslie.threads",
    "set_status": "leslie.threads",
    "retitle": "leslie.threads",
    "remove": "leslie.threads",
    "switch": "leslie.threads",
    "current_thread_id": "leslie.threads",
    "create_objective": "leslie.objectives",
    "set_objective_status": "leslie.objectives",
    "init_repository": "leslie.bootstrap",
    "run_doctor": "leslie.doctor",
    "LeslieError": "leslie.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from leslie.bootstrap import init_repository
    from leslie.doctor import run_doctor
    from leslie.errors import LeslieError
    from leslie.model import Objective, Thread
    from leslie.objectives import create_objective, set_objective_status
    from leslie.repository import Repository
    from leslie.threads import (
        Outcome,
        RefSpec,
        current_thread_id,
        reference,
        remove,
        retitle,
        set_status,
        spawn,
        switch,
        unreference,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leslie' has no attribute {name!r}")
    return getattr(import_module(module), name)
