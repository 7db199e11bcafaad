"""What an agent is told: the `<thread_context>` block, its templates, their sandbox and trust, AGENTS.md."""

import os
from typing import TypeVar

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")  # the packaged templates, installed with leslie

# Marks a class as leslie's own immutable template data (see `context.sandbox.LeslieSandbox.is_safe_attribute`); a
# template cannot set it: names starting with `_` are out of its reach.
TEMPLATE_DATA = "_leslie_template_data"
_Class = TypeVar("_Class", bound=type)


def template_data(cls: _Class) -> _Class:
    """Mark `cls`, a NamedTuple of plain fields and methods, as data a template may read any public name of."""
    setattr(cls, TEMPLATE_DATA, True)
    return cls
