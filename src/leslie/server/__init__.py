"""The warm process (SPEC §12): the client every `leslie` command starts with, the resident process, its
children, and the guard's watcher it manages."""
