"""What a requester may see under partitions: the SA answers a port only about the ports it
shares a partition with (`Subnet.share_pkey`), as OpenSM's SA does.

The requester is the port at the request's source LID. Each record is about a port: a
NodeRecord, GUIDInfoRecord, P_KeyTableRecord, SLtoVLMappingTableRecord (a switch's: its
output port) and VLArbitrationTableRecord about the port it names (a CA port, a switch's
port 0 or, for the tables, a switch port), a PortInfoRecord about its port (switch
external ports too), a SwitchInfoRecord and the forwarding table records about the
switch's port 0, our SMInfoRecord about our port (OpenSM checks no other SM's), an
InformInfoRecord about the subscriber's port; a LinkRecord is shown when the requester
shares with both ends and the ends with each other; a PathRecord when the requester shares with its source and its
destination (that those two share is `path_pkey`'s). A ServiceRecord with a valid
ServiceP_Key is shown only to a member of that partition; a Report goes only to a
subscriber that may hear of its source (`Viewer.hears`). Without partitions every record
is shown; under partitions a request from a LID no port has (the snapshot is older than
the port) is shown nothing (OpenSM leaves it unanswered).
"""
from __future__ import annotations

from typing import Any, Callable

from mad.sa_records import (GUIDInfoRecord, InformInfo, InformInfoRecord, LinearForwardingTableRecord, LinkRecord,
                            MulticastForwardingTableRecord, NodeRecord, P_KeyTableRecord, PathRecord, PortInfoRecord,
                            ServiceRecord, SLtoVLMappingTableRecord, SMInfoRecord, SwitchInfoRecord,
                            SaNotice, VLArbitrationTableRecord)
from smagent.sa import informs
from smagent.model.subnet import Subnet

Port = tuple[int, int]
ALL_LIDS = 0xFFFF  # LIDRangeBegin: every port the SM manages
NOBODY = (-1, -1)  # an unknown requester: shown nothing under partitions


class Viewer:
    """One requester's view of one snapshot (sharing looked up once per port)."""

    def __init__(self, subnet: Subnet, requester_lid: int):
        self.subnet = subnet
        hit = subnet.port_of_lid(requester_lid)
        self.me: Port = NOBODY if hit is None else (hit[0].guid, 0 if hit[0].is_switch else hit[1])
        self._seen: dict[Port, bool] = {}

    @property
    def everything(self) -> bool:
        return self.subnet.pkeys is None

    def sees(self, port: Port | None) -> bool:
        if port is None:
            return self.me != NOBODY  # about no port of the snapshot: nothing to hide
        hit = self._seen.get(port)
        if hit is None:
            hit = self._seen[port] = self._share(self.me, port)
        return hit

    def _share(self, a: Port, b: Port) -> bool:
        return a != NOBODY and self.subnet.share_pkey(a, b)

    def port(self, lid: int, port_num: int | None = None) -> Port | None:
        """The port a record names by its LID (and, on a switch, a port number; None: port 0)."""
        hit = self.subnet.port_of_lid(lid)
        if hit is None:
            return None
        node, p = hit
        return (node.guid, port_num or 0) if node.is_switch else (node.guid, p)

    def gid_port(self, gid: int) -> Port | None:
        hit = self.subnet.port_of_guid(gid & (1 << 64) - 1)
        return None if hit is None else (hit[0].guid, 0 if hit[0].is_switch else hit[1])

    def link(self, r: LinkRecord) -> bool:
        a, b = self.port(r.from_lid, r.from_port_num), self.port(r.to_lid, r.to_port_num)
        return self.sees(a) and self.sees(b) and (a is None or b is None or self.subnet.share_pkey(a, b))

    def service(self, r: ServiceRecord) -> bool:
        """Shown to a member of its ServiceP_Key's partition (without partitions: the default
        one), and to all when that P_Key is invalid (names no partition)."""
        if not r.service_p_key & 0x7FFF:
            return True
        return self.me != NOBODY and self.subnet.holds_pkey(self.me, r.service_p_key)

    def path(self, slid: int, dlid: int) -> bool:
        """Whether a PathRecord from ``slid`` to ``dlid`` may be shown: the requester
        shares a partition with both ends."""
        return self.sees(self.port(slid)) and self.sees(self.port(dlid))

    def shown(self, records: list) -> list:
        """The records this requester may see."""
        if self.everything or not records:
            return records
        about = _ABOUT.get(type(records[0]))
        return records if about is None else [r for r in records if about(self, r)]

    def may_subscribe(self, info: InformInfo) -> bool:
        """Whether the requester may subscribe to the traps ``info`` names, as OpenSM
        checks it (IBA o13-14.1.1: it and the trap sources must reach each other): the port
        of its GID, which must be a port of the subnet, else every port of its LID range
        (LIDRangeEnd 0: LIDRangeBegin alone; an end below the beginning: none; 0xFFFF: every
        port, not checked), which must begin at a LID in use or below."""
        if info.gid:
            port = self.gid_port(info.gid)
            return port is not None and (self.everything or self.sees(port))
        if info.lid_range_begin == ALL_LIDS:
            return True
        if info.lid_range_begin > max(self.subnet.lids, default=0):
            return False
        if self.everything:
            return True
        end = info.lid_range_end or info.lid_range_begin
        return all(self.sees(self.port(lid)) for lid in range(info.lid_range_begin, end + 1)
                   if self.subnet.port_of_lid(lid) is not None)

    def hears(self, notice: SaNotice, group_pkey: Callable[[int], int | None]) -> bool:
        """Whether a Report of ``notice`` may go to this port (IBA o13-17.1.1, as OpenSM):
        one of a group created or deleted (66, 67) to a member of the group's partition
        (``group_pkey``: the P_Key of an MGID, None for a group no longer known: sent); any
        other to a port sharing with its source, the port of the GID in its details (64,
        65) or its issuer (a port the snapshot no longer has: sent)."""
        if self.everything:
            return True
        trap = notice.trap_number_or_device_id if notice.is_generic else None
        subject = int.from_bytes(bytes(notice.data_details)[6:22], "big")
        if trap in (informs.MCG_CREATED, informs.MCG_DELETED):
            pkey = group_pkey(subject)
            return pkey is None or (self.me != NOBODY and self.subnet.holds_pkey(self.me, pkey))
        return self.sees(self.gid_port(subject if trap in (informs.GID_IN, informs.GID_OUT) else notice.issuer_gid))

    def may_register(self, r: ServiceRecord, mask: int) -> bool:
        """Whether the requester may register or delete ``r``, as OpenSM checks it
        (ERR_REQ_INVALID otherwise): with ServiceP_Key in the mask, the requester is a member
        of its partition, and so is the port of a unicast ServiceGID in the mask, which must
        be a port of the subnet; an invalid P_Key (0x0000, 0x8000) is everyone's. Without
        partitions too: a port holds the default P_Key alone."""
        if not mask & ServiceRecord.mask("service_p_key"):
            return True
        if self.me == NOBODY or not self._holds(self.me, r.service_p_key):
            return False
        if not mask & ServiceRecord.mask("service_gid") or r.service_gid >> 120 == 0xFF:  # multicast
            return True
        port = self.gid_port(r.service_gid)
        return port is not None and self._holds(port, r.service_p_key)

    def _holds(self, port: Port, p_key: int) -> bool:
        return not p_key & 0x7FFF or self.subnet.holds_pkey(port, p_key)


_ABOUT: dict[type, Callable[[Viewer, Any], bool]] = {
    NodeRecord: lambda v, r: v.sees(v.port(r.lid)),
    PortInfoRecord: lambda v, r: v.sees(v.port(r.endport_lid, r.port_num)),
    LinkRecord: Viewer.link,
    SwitchInfoRecord: lambda v, r: v.sees(v.port(r.lid)),
    LinearForwardingTableRecord: lambda v, r: v.sees(v.port(r.lid)),
    MulticastForwardingTableRecord: lambda v, r: v.sees(v.port(r.lid)),
    GUIDInfoRecord: lambda v, r: v.sees(v.port(r.lid)),
    P_KeyTableRecord: lambda v, r: v.sees(v.port(r.lid, r.port_num)),
    SLtoVLMappingTableRecord: lambda v, r: v.sees(v.port(r.lid, r.output_port_num)),
    VLArbitrationTableRecord: lambda v, r: v.sees(v.port(r.lid, r.output_port_num)),
    SMInfoRecord: lambda v, r: r.lid != v.subnet.sm_lid or v.sees(v.port(r.lid)),  # ours only, as OpenSM
    InformInfoRecord: lambda v, r: v.sees(v.gid_port(r.subscriber_gid)),
    PathRecord: lambda v, r: v.path(r.slid, r.dlid),
    ServiceRecord: Viewer.service,
}
