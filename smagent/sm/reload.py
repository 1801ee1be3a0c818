"""SIGHUP's desired state: re-read and checked against the fabric before it replaces the
one in force, so that a bad reload never stops the routing (the daemon keeps the old one
and says why)."""
from __future__ import annotations

from smagent.sweep import desired
from smagent.discovery import Topology
from smagent.errors import BadInput


class DoesNotFit(BadInput):
    """The file is good, but names what the fabric as last discovered does not have."""


def reread(path: str, given: dict, topo: Topology | None, *, multicast: bool) -> dict:
    """The sweep settings of the desired state at ``path``; BadInput for a bad file or one
    contradicting the command line (``given``), `DoesNotFit` for one that cannot be
    resolved against ``topo`` (a switch it names is not there)."""
    settings = desired.sweep_settings(desired.load(path), **given)
    ds = settings.get("desired")
    if ds is None or topo is None:
        return settings
    try:
        resolved = desired.resolve(ds, topo)
        if ds.multicast and multicast:
            desired.group_spec(ds, resolved, topo)
    except BadInput as e:
        raise DoesNotFit(str(e)) from None
    return settings
