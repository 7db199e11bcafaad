"""The bytes on disk: strict reads, the one atomic-write helper, the index lock, and the typed documents."""
