"""smagent: an InfiniBand Subnet Manager agent. `smagent.connect()` opens a session.

The library logs through the ``smagent`` logger hierarchy (``smagent.sweep``,
``smagent.discovery``, ``smagent.transport``, ``smagent.routing``, ``smagent.sm``) and
never prints; it installs only a NullHandler, so nothing shows until the application
configures logging (the CLI's ``-v``).

`connect` and `Session` (smagent.api) are loaded on first use, so that `import
smagent.cli` (and every `smagent` command) does not pay for the whole agent at start-up."""
import logging as _logging

_logging.getLogger("smagent").addHandler(_logging.NullHandler())
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError

__all__ = ["connect", "Session", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]


def __getattr__(name: str):
    if name in ("connect", "Session"):
        from smagent import api
        return getattr(api, name)
    raise AttributeError(f"module 'smagent' has no attribute {name!r}")
