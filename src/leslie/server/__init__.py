"""The warm process (SPEC §12): the client every `leslie` command starts with, the resident process, its
children, and the guard's watcher it manages."""

import os

ENV_SWITCH = "LESLIE_WARM"


def switched_off() -> bool:
    """True when `LESLIE_WARM` is 0/off/false/no: commands run in their own process, and `leslie` does not
    even load its client (nor `socket`)."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "false", "no")
