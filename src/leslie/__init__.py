"""leslie: thread-scoped, file-based working memory for coding agents, inside a git repository.

The public API is re-exported here lazily, so that `import leslie` stays cheap on the hook's hot path.
"""

from __future__ import annotations

import sys

# Not `from typing import TYPE_CHECKING`: importing typing costs milliseconds on the hook's hot path; mypy
# recognises the name.
TYPE_CHECKING = False

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

__all__ = [
    "LeslieError",
    "Objective",
    "Outcome",
    "RefSpec",
    "Repository",
    "Thread",
    "__version__",
    "create_objective",
    "current_thread_id",
    "init_repository",
    "reference",
    "remove",
    "retitle",
    "run_doctor",
    "set_objective_status",
    "set_status",
    "spawn",
    "switch",
    "unreference",
]

if TYPE_CHECKING:
    from leslie.bootstrap import (
        init_repository as init_repository,
    )
    from leslie.doctor import (
        run_doctor as run_doctor,
    )
    from leslie.errors import (
        LeslieError as LeslieError,
    )
    from leslie.model import (
        Objective as Objective,
    )
    from leslie.model import (
        Thread as Thread,
    )
    from leslie.objectives import (
        create_objective as create_objective,
    )
    from leslie.objectives import (
        set_objective_status as set_objective_status,
    )
    from leslie.repository import (
        Repository as Repository,
    )
    from leslie.threads import (
        Outcome as Outcome,
    )
    from leslie.threads import (
        RefSpec as RefSpec,
    )
    from leslie.threads import (
        current_thread_id as current_thread_id,
    )
    from leslie.threads import (
        reference as reference,
    )
    from leslie.threads import (
        remove as remove,
    )
    from leslie.threads import (
        retitle as retitle,
    )
    from leslie.threads import (
        set_status as set_status,
    )
    from leslie.threads import (
        spawn as spawn,
    )
    from leslie.threads import (
        switch as switch,
    )
    from leslie.threads import (
        unreference as unreference,
    )


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leslie' has no attribute {name!r}")
    # `__import__`, not `importlib.import_module`: importing importlib (and warnings) costs about a
    # millisecond on the hook's hot path, which only needs `leslie.__version__`.
    __import__(module)
    return getattr(sys.modules[module], name)
