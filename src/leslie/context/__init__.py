"""What an agent is told: the `<thread_context>` block, its templates, their sandbox and trust, AGENTS.md."""

import os

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")  # the packaged templates, installed with leslie
