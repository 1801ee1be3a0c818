"""smagent: an InfiniBand Subnet Manager agent. `smagent.connect()` opens a session."""
from smagent.api import BadInput, FabricFailure, Session, SmagentError, connect

__all__ = ["connect", "Session", "SmagentError", "BadInput", "FabricFailure"]
