"""leslie: thread-scoped, file-based working memory for coding agents, inside a git repository.

The public API is re-exported here lazily: `import leslie` does not import the whole library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from leslie.version import __version__

_EXPORTS = {
    "Repository": "leslie.store.repository",
    "Thread": "leslie.store.model",
    "Objective": "leslie.store.model",
    "RefSpec": "leslie.ops.threads",
    "Outcome": "leslie.ops.threads",
    "spawn": "leslie.ops.threads",
    "reference": "leslie.ops.threads",
    "unreference": "leslie.ops.threads",
    "set_status": "leslie.ops.threads",
    "retitle": "leslie.ops.threads",
    "remove": "leslie.ops.threads",
    "switch": "leslie.ops.threads",
    "current_thread_id": "leslie.ops.threads",
    "current_thread": "leslie.ops.threads",
    "edit": "leslie.ops.threads",
    "retitle_objective": "leslie.ops.objectives",
    "create_objective": "leslie.ops.objectives",
    "set_objective_status": "leslie.ops.objectives",
    "init_repository": "leslie.ops.bootstrap",
    "run_doctor": "leslie.ops.doctor",
    "LeslieError": "leslie.errors",
}

__all__ = [
    "LeslieError",
    "Objective",
    "Outcome",
    "RefSpec",
    "Repository",
    "Thread",
    "__version__",
    "create_objective",
    "current_thread",
    "current_thread_id",
    "edit",
    "init_repository",
    "reference",
    "remove",
    "retitle",
    "retitle_objective",
    "run_doctor",
    "set_objective_status",
    "set_status",
    "spawn",
    "switch",
    "unreference",
]

if TYPE_CHECKING:
    from leslie.errors import (
        LeslieError as LeslieError,
    )
    from leslie.ops.bootstrap import (
        init_repository as init_repository,
    )
    from leslie.ops.doctor import (
        run_doctor as run_doctor,
    )
    from leslie.ops.objectives import (
        create_objective as create_objective,
    )
    from leslie.ops.objectives import (
        retitle_objective as retitle_objective,
    )
    from leslie.ops.objectives import (
        set_objective_status as set_objective_status,
    )
    from leslie.ops.threads import (
        Outcome as Outcome,
    )
    from leslie.ops.threads import (
        RefSpec as RefSpec,
    )
    from leslie.ops.threads import (
        current_thread as current_thread,
    )
    from leslie.ops.threads import (
        current_thread_id as current_thread_id,
    )
    from leslie.ops.threads import (
        edit as edit,
    )
    from leslie.ops.threads import (
        reference as reference,
    )
    from leslie.ops.threads import (
        remove as remove,
    )
    from leslie.ops.threads import (
        retitle as retitle,
    )
    from leslie.ops.threads import (
        set_status as set_status,
    )
    from leslie.ops.threads import (
        spawn as spawn,
    )
    from leslie.ops.threads import (
        switch as switch,
    )
    from leslie.ops.threads import (
        unreference as unreference,
    )
    from leslie.store.model import (
        Objective as Objective,
    )
    from leslie.store.model import (
        Thread as Thread,
    )
    from leslie.store.repository import (
        Repository as Repository,
    )


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leslie' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
