"""What a running process holds, composed from each subsystem's parts (``Runtime``), and the
checks of the names settings give the registries."""

from knowmind.runtime.core import Runtime, freeze_live_objects
from knowmind.runtime.names import check_registered_names

__all__ = ["Runtime", "check_registered_names", "freeze_live_objects"]
