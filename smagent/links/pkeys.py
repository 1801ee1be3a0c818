"""P_Keys: the default partition 0xFFFF (full member) at index 0 of every end port (CA
ports, switch port 0), where OpenSM's P_Key manager puts it; other entries are left as
they are (`fdb.porttables.Want.desired` keeps them)."""
from __future__ import annotations

from mad import forwarding as fw
from smagent.fdb.porttables import Want


def switch_want(n) -> Want:
    """Port 0's P_Key block 0 of a switch."""
    return Want("pkeys", n.guid, n.description, n.path, fw.pkey_modifier(0, 0), None)


def ca_port_want(n, p: int, path) -> Want:
    """P_Key block 0 of a CA's port ``p`` (reached by ``path``)."""
    return Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(0), None, port=p)
