"""`leslie board`: a local, read-only web view of a repository's `.leslie/` (docs/commands.md, docs/security.md).

The layer just under `cli`, beside `integrations`: it may import server, inject, ops, context and store. Its
libraries (Starlette, uvicorn, markdown-it-py, nh3) are imported only when the board runs.
"""
