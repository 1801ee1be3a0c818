"""smagent: an InfiniBand Subnet Manager agent. `smagent.connect()` opens a session."""
from smagent.api import Session, connect
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError

__all__ = ["connect", "Session", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]
