"""The resident per-user process the hooks talk to: it renders blocks (inject) and watches for the guard."""
