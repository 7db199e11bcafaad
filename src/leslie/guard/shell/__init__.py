"""A POSIX shell reader for the write guard: words, syntax, wrappers and what each command writes."""
