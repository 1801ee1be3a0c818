"""smagent: an InfiniBand Subnet Manager agent. `smagent.connect()` opens a session.

The library logs through the ``smagent`` logger hierarchy (``smagent.sweep``,
``smagent.discovery``, ``smagent.transport``, ``smagent.routing``, ``smagent.sm``) and
never prints; it installs only a NullHandler, so nothing shows until the application
configures logging (the CLI's ``-v``)."""
import logging as _logging

_logging.getLogger("smagent").addHandler(_logging.NullHandler())
from smagent.api import Session, connect
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError

__all__ = ["connect", "Session", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]
