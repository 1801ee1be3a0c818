"""`smagent snapshot FILE`: one recording of every table any plan could read.

A plan's Gets depend on its desired state (which LFT blocks, which MFT units, which link
tables), and a recording of one plan answers only those (`transport/replay.py`). A
snapshot is a discovery followed by one Get of every unit a plan may ask, recorded
through the transport's recorder (`Session.recording`): per node NodeInfo, NodeDescription
and PortInfo of every port (port 0 and each CA port by its own path), per switch
SwitchInfo, the LFT blocks up to what it forwards (`fdb.lft.lft_blocks_to_read`, what
the sweep reads), the RFT blocks its RandomFDBCap covers, the MFT units of every position
up to its MulticastFDBTop and at least ``mft_blocks`` blocks (where a new group's MLIDs
are handed out), SL2VL of every (input, output) pair, VLArb of every port, the P_Key
blocks of port 0 (PartitionCap) and of every external port (PartitionEnforcementCap);
per CA port SL2VL, VLArb and P_Keys; SMInfo of every port showing IsSM. A replay of the
file answers a Get by the place it reaches (`transport.replay.Places`), whatever path the
later plan takes.
"""
from __future__ import annotations

import collections
import dataclasses

from mad import forwarding as fw
from mad.attributes import ATTRIBUTE_NAMES, AttrID
from mad.header import Method
from mad.smp import attribute_id_of
from smagent import discovery
from smagent.fdb import lft as linear
from smagent.transport.base import Request, SmpStatusError, Transport

CAP_IS_SM = 1 << 1  # PortInfo.CapabilityMask.IsSM
MFT_BLOCKS_DEFAULT = 2  # MLIDs 0xC000-0xC03F: a new group's MLIDs are handed out from 0xC000 up
ALL_VLARB_PARTS = (1, 2, 3, 4)  # low 0-31, low 32-63, high 0-31, high 32-63


@dataclasses.dataclass
class SnapshotResult:
    """What a snapshot read: ``reads`` by attribute name; ``refused``: Gets answered with an
    error status (a port without that table or part: recorded, and replayed, as such);
    ``failed``: Gets that got no answer (a node gone), readable."""
    path: str
    topology: discovery.Topology
    reads: dict[str, int]
    failed: list[str]
    refused: int = 0

    @property
    def requests(self) -> int:
        return sum(self.reads.values())

    def summary(self) -> dict:
        return {"file": self.path, "nodes": len(self.topology.nodes), "switches": len(self.topology.switches()),
                "requests": self.requests, "reads": dict(self.reads), "refused": self.refused,
                "failed": len(self.failed),
                "failed_examples": self.failed[:10], "unreachable": list(self.topology.unreachable)}

    def __repr__(self) -> str:
        return (f"<SnapshotResult {self.path}: {len(self.topology.nodes)} nodes, {self.requests} reads, "
                f"{len(self.failed)} failed>")


def _get(attr: int, path: tuple[int, ...], modifier: int = 0) -> Request:
    return Request.dr(Method.GET, attr, path, modifier)


def _switch_reads(n: discovery.DNode, mft_blocks: int) -> list[Request]:
    si, path, ports = n.switch_info, n.path, range(n.num_ports + 1)
    out = [_get(AttrID.NODE_DESCRIPTION, path), _get(AttrID.SWITCH_INFO, path)]
    out += [_get(AttrID.PORT_INFO, path, fw.portinfo_modifier(p)) for p in ports]
    outs = [o for o in ports if o or (si is not None and si.enhanced_port0)]  # a base port 0 has no VLs
    out += [_get(AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(i, o)) for i in ports for o in outs]
    out += [_get(AttrID.VL_ARBITRATION_TABLE, path, fw.vlarb_modifier(part, p)) for p in ports
            for part in ALL_VLARB_PARTS]
    out += [_get(AttrID.P_KEY_TABLE, path, fw.pkey_modifier(b, 0))
            for b in range(max(1, fw.pkey_blocks_for(n.node_info.partition_cap)))]
    enforce = si.partition_enforcement_cap if si is not None else 0
    out += [_get(AttrID.P_KEY_TABLE, path, fw.pkey_modifier(b, p)) for p in ports if p
            for b in range(fw.pkey_blocks_for(enforce))]
    if si is None:
        return out
    out += [_get(AttrID.LINEAR_FORWARDING_TABLE, path, fw.lft_modifier(b)) for b in linear.lft_blocks_to_read(si)]
    out += [_get(AttrID.RANDOM_FORWARDING_TABLE, path, fw.rft_modifier(b))
            for b in range(min(fw.RFT_BLOCKS, -(-si.random_fdb_cap // fw.RFT_BLOCK_SIZE)))]
    if si.multicast_fdb_cap:
        last = mft_blocks - 1
        if si.multicast_fdb_top >= fw.MULTICAST_LID_MIN:
            last = max(last, fw.mft_block(min(si.multicast_fdb_top, fw.MULTICAST_LID_MAX))[0])
        last = min(last, fw.mft_blocks_for(si.multicast_fdb_cap) - 1)
        out += [_get(AttrID.MULTICAST_FORWARDING_TABLE, path, fw.mft_modifier(b, pos))
                for b in range(last + 1) for pos in range(fw.mft_positions_for(n.num_ports))]
    return out


def _ca_reads(n: discovery.DNode) -> list[Request]:
    out = []
    for p, path in sorted(n.port_paths.items()):
        out += [_get(AttrID.NODE_INFO, path), _get(AttrID.NODE_DESCRIPTION, path),
                _get(AttrID.PORT_INFO, path, 0), _get(AttrID.PORT_INFO, path, fw.portinfo_modifier(p)),
                _get(AttrID.SL_TO_VL_MAPPING_TABLE, path, 0)]
        out += [_get(AttrID.VL_ARBITRATION_TABLE, path, fw.vlarb_modifier(part, 0)) for part in ALL_VLARB_PARTS]
        out += [_get(AttrID.P_KEY_TABLE, path, fw.pkey_modifier(b, 0))
                for b in range(max(1, fw.pkey_blocks_for(n.node_info.partition_cap)))]
    return out


def _sm_reads(topo: discovery.Topology) -> list[Request]:
    """SMInfo of every port showing IsSM (what the SM check asks)."""
    return [_get(AttrID.SM_INFO, n.path_to_port(p)) for n in topo.nodes.values() for p, pi in sorted(n.ports.items())
            if pi.capability_mask & CAP_IS_SM and (n.is_switch and p == 0 or p in n.port_paths)]


def reads(topo: discovery.Topology, *, mft_blocks: int = MFT_BLOCKS_DEFAULT) -> list[Request]:
    """Every Get a snapshot sends after discovery, node by node."""
    out: list[Request] = []
    for n in topo.nodes.values():
        out += _switch_reads(n, mft_blocks) if n.is_switch else _ca_reads(n)
    return out + _sm_reads(topo)


def take(transport: Transport, path: str, *, mft_blocks: int = MFT_BLOCKS_DEFAULT) -> SnapshotResult:
    """Discover and read every table (the caller records: `api.Session.snapshot`)."""
    topo = discovery.discover(transport)
    reqs = reads(topo, mft_blocks=mft_blocks)
    counts: collections.Counter = collections.Counter()
    failed, refused = [], 0
    for req, rep in zip(reqs, transport.execute(reqs)):
        attr = attribute_id_of(req.raw)  # type: ignore[arg-type]
        counts[ATTRIBUTE_NAMES.get(attr, f"{attr:#06x}")] += 1
        if isinstance(rep.error, SmpStatusError):
            refused += 1
        elif not rep.ok:
            failed.append(str(rep.error))
    return SnapshotResult(path, topo, dict(counts), failed, refused)


__all__ = ["SnapshotResult", "take", "reads", "MFT_BLOCKS_DEFAULT"]
