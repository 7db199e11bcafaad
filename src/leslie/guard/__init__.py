"""The write guard: which writes a thread may make, the shell parser that finds them, and the second line."""
