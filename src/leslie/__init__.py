"""leslie: thread-scoped, file-based working memory for coding agents, inside a git repository.

The public API is re-exported here lazily: `import leslie` does not import the whole library (every `leslie`
command imports this package first, on its way to the warm process). `__init__.pyi` declares the same names
for type checkers.
"""

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

def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leslie' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
