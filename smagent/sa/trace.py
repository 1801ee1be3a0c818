"""SubnAdmGetTraceTable of TraceRecord (IBA 15.2.5, attribute 0x0039): the request carries
a PathRecord and its ComponentMask, the answer (a GetTableResp, RMPP when long) is one
TraceRecord per node the packet crosses on the path the SM programmed, in order: the
source, each switch, the destination.

The path is the one a PathRecord Get with the same query finds (`paths.query`: SGID or
SLID, DGID or DLID, LMC offsets, P_Key and partition rules, MTU/rate/lifetime
selectors), the first as a Get answers (GIDs of ports with LMC > 0 name one path per LID
offset: the base LIDs'), and the statuses are that Get's: none found ERR_NO_RECORDS,
a GID of no port ERR_REQ_INVALID_GID, a mask past the PathRecord's components
ERR_REQ_INVALID. The spec wants the PathRecord given whole; as Intel's FM, which serves
the attribute (OpenSM does not), we need only what names one path: the source (SGID or
SLID) and the destination (DGID or DLID), else ERR_REQ_INSUFFICIENT_COMPONENTS.

What a record holds (the IDs are the GUIDs themselves, not obfuscated):
* GIDPrefix: the node's port's subnet prefix; IDGeneration: the snapshot's generation
  (`Subnet.generation`, low 16 bits): it moves when the IDs may have;
* NodeType (1 CA, 2 switch, 3 router), NodeID its node GUID, ChassisID its
  SystemImageGUID (smagent knows no chassis beyond it);
* EntryPort/ExitPort: the port numbers the packet enters and leaves the node by; at the
  source it enters by the port it starts from (a CA's port, a switch's port 0), at the
  destination it leaves by the port it ends at (a CA's port, a switch's port 0): a CA's
  record has both its port, a switch's its LFT's ports;
* EntryPortID/ExitPortID: the GUIDs of those ports (a switch's ports share its port
  GUID, port 0's).
"""
from __future__ import annotations

from mad.errors import MadError
from mad.sa import SaMad, SaStatus, encode_table
from mad.sa_records import PathRecord, TraceRecord
from smagent.sa import pathrecords as paths, visible
from smagent.sa.records import Records
from smagent.model.topology import DNode

_SOURCE = PathRecord.mask("sgid", "slid")
_DESTINATION = PathRecord.mask("dgid", "dlid")


def hops(recs: Records, path: PathRecord) -> list[TraceRecord]:
    """The TraceRecords of ``path`` (one `paths.query` found): its SLID's port through the
    LFTs to its DLID. [] if the LFTs no longer deliver it (they did when it was found)."""
    s = recs.subnet
    src, dst = s.port_of_lid(path.slid), s.port_of_lid(path.dlid)
    if src is None or dst is None:
        return []
    links = s.route((src[0].guid, src[1]), path.dlid)
    if links is None:
        return []
    # (node, entry port, exit port) of every node on the way
    stops: list[tuple[DNode, int, int]] = []
    node, entry = src
    for (_g, out), (peer, peer_port) in links:
        stops.append((node, entry, out))
        node, entry = s.nodes[peer], peer_port
    stops.append((node, entry, dst[1]))
    generation = s.generation & 0xFFFF
    return [TraceRecord(gid_prefix=recs.gid(n, i) >> 64, id_generation=generation, node_type=n.node_info.node_type,
                        node_id=n.guid, chassis_id=n.node_info.system_image_guid, entry_port_id=n.port_guid(i),
                        exit_port_id=n.port_guid(o), entry_port=i, exit_port=o) for n, i, o in stops]


def query(recs: Records, q: PathRecord, mask: int, requester_lid: int) -> list[TraceRecord]:
    """The TraceRecords of the one path a PathRecord query names (`paths.PathQueryError`
    with the status otherwise)."""
    if not mask & _SOURCE or not mask & _DESTINATION:
        raise paths.PathQueryError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS,
                                   "a trace needs the source (SGID or SLID) and the destination (DGID or DLID)")
    # the first the requester may see (partitions), as a Get answers
    viewer = visible.Viewer(recs.subnet, requester_lid)
    found = next(([pr] for pr in paths.each_path(recs, q, mask, requester_lid) if viewer.shown([pr])), [])
    if not found:
        raise paths.PathQueryError(SaStatus.ERR_NO_RECORDS, "no path")
    out = hops(recs, found[0])
    if not out:
        raise paths.PathQueryError(SaStatus.ERR_NO_RECORDS, "the LFTs do not deliver the path")
    return out


def answer(recs: Records, raw: bytes, requester_lid: int) -> tuple[int, bytes, int]:
    """(status, data, AttributeOffset) of the GetTableResp answering a GetTraceTable MAD."""
    try:
        mad = SaMad.decode(raw)
        PathRecord.check_mask(mad.component_mask)
        found = query(recs, PathRecord.decode(mad.data), mad.component_mask, requester_lid)
    except paths.PathQueryError as e:
        return e.status.word, b"", 0
    except MadError:
        return SaStatus.ERR_REQ_INVALID.word, b"", 0
    offset, data = encode_table(found)
    return 0, data, offset
