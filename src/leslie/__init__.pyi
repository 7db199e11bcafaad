"""Type information for the lazily re-exported API of `leslie/__init__.py`."""

from leslie.errors import LeslieError as LeslieError
from leslie.ops.bootstrap import init_repository as init_repository
from leslie.ops.doctor import run_doctor as run_doctor
from leslie.ops.objectives import create_objective as create_objective
from leslie.ops.objectives import retitle_objective as retitle_objective
from leslie.ops.objectives import set_objective_status as set_objective_status
from leslie.ops.threads import Outcome as Outcome
from leslie.ops.threads import RefSpec as RefSpec
from leslie.ops.threads import current_thread as current_thread
from leslie.ops.threads import current_thread_id as current_thread_id
from leslie.ops.threads import edit as edit
from leslie.ops.threads import reference as reference
from leslie.ops.threads import remove as remove
from leslie.ops.threads import retitle as retitle
from leslie.ops.threads import set_status as set_status
from leslie.ops.threads import spawn as spawn
from leslie.ops.threads import switch as switch
from leslie.ops.threads import unreference as unreference
from leslie.store.model import Objective as Objective
from leslie.store.model import Thread as Thread
from leslie.store.repository import Repository as Repository
from leslie.version import __version__ as __version__

__all__: list[str]
