"""What an agent is told: the `<thread_context>` block, its templates, their sandbox and trust, AGENTS.md."""
