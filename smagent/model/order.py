"""The order OpenSM keeps GUIDs and P_Keys in: routing, the SA's port order and its choice
among shared partitions follow it, so answers come in OpenSM's order."""
from __future__ import annotations


def opensm_key(value: int, size: int = 8) -> int:
    """Where OpenSM sorts a GUID (``size`` 8) or a P_Key (``size`` 2) among its peers: its
    maps key them by their network-order bytes read as a host integer, little-endian on the
    hosts it runs on (x86-64, Arm); routing, the SA's port order and its choice among
    shared partitions all follow that order."""
    return int.from_bytes((value & ((1 << 8 * size) - 1)).to_bytes(size, "big"), "little")
