"""smagent: an InfiniBand Subnet Manager agent. `smagent.connect()` opens a session.

The library logs through the ``smagent`` logger hierarchy (``smagent.sweep``,
``smagent.discovery``, ``smagent.transport``, ``smagent.routing``, ``smagent.sm``) and
never prints; it installs only a NullHandler, so nothing shows until the application
configures logging (the CLI's ``-v``).

`connect` and `Session` (smagent.api) are loaded on first use, so that `import
smagent.cli` (and every `smagent` command) does not pay for the whole agent at start-up;
they are listed by `dir(smagent)` all the same. ``smagent.__version__``: the installed
distribution's version (pyproject.toml's, the one source), read on first use."""
import logging as _logging

_logging.getLogger("smagent").addHandler(_logging.NullHandler())
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError

__all__ = ["connect", "Session", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal", "__version__"]
_LAZY = ("connect", "Session", "__version__")


def version() -> str:
    """The installed distribution's version; from a source tree that was never installed,
    the one in its pyproject.toml ("0+unknown" if neither can be read)."""
    from importlib import metadata
    try:
        return metadata.version("smagent")
    except metadata.PackageNotFoundError:
        pass
    import pathlib
    import tomllib
    try:
        doc = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
        return str(doc["project"]["version"])
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        return version()
    if name in ("connect", "Session"):
        from smagent import api
        return getattr(api, name)
    raise AttributeError(f"module 'smagent' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
