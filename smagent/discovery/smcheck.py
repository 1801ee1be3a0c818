"""The master-SM check: every path that writes a switch asks the other subnet managers
before its first Set, and refuses (`OtherMasterSM`, exit 4) while one is MASTER: it would
undo the change on its next sweep. ``force`` proceeds (with a note).

Two ways to find them, one judgement (`judge`):

* the sweep has discovered the whole fabric: every port with IsSM is asked its SMInfo
  by directed route (`find_sms`, also what the running SM uses to find its peers);
* a table write (`lft`/`mft`/`rft set`, load, restore) has read a switch or two: the SMs
  their MasterSMLIDs name are asked by LID, and the local port too when it shows IsSM
  (`check_master_sm`).

Our own port is skipped only when the transport itself is the SM there
(`Transport.owns_sm_port`, `smagent run`): else its IsSM is another SM on the same port
(OpenSM on this HCA), and ibsim and the kernel hand it the SMInfo Get sent to DR path 0.
The topology is read duck-typed (``nodes``, ``local``): this module sits below discovery.
"""
from __future__ import annotations

from typing import Any, Iterable

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import CAP_IS_SM, AttrID, NodeType, PortInfo, SMInfo, SMState
from mad.header import Method
from smagent.errors import SafetyRefusal
from smagent.transport.base import Reply, Request, Transport


class OtherMasterSM(SafetyRefusal):
    """Another subnet manager is MASTER: refused before the first Set (--force overrides).
    ``node`` (its node's description and port, when known), ``lid``, ``guid``,
    ``priority``: that SM."""

    def __init__(self, message: str, *, node: str = "", lid: int = 0, guid: int = 0, priority: int = 0):
        super().__init__(message)
        self.node, self.lid, self.guid, self.priority = node, lid, guid, priority

    def details(self) -> dict:
        return {"sm": {"lid": self.lid, "guid": f"0x{self.guid:016x}", "priority": self.priority}}


def _owns_sm_port(transport: Transport) -> bool:
    return bool(getattr(transport, "owns_sm_port", False))


def _state_name(sm: SMInfo) -> str:
    return SMState(sm.sm_state).name if sm.sm_state in SMState._value2member_map_ else str(sm.sm_state)


def judge(sm: SMInfo, who: str, *, force: bool, warn_only: bool, sweep: bool, node: str = "",
          lid: int = 0) -> str:
    """The one rule: a MASTER refuses (OtherMasterSM) unless ``force`` or ``warn_only`` (a
    table write's dry run), which make it a note; another state is a note. ``who``
    describes the SM; ``sweep`` picks the sweep's wording (it names every SM it finds)."""
    if sm.sm_state == SMState.MASTER:
        if not (force or warn_only):
            if sweep:
                msg = (f"another subnet manager is MASTER: {who}. It would undo our changes on its next sweep; "
                       f"stop it, or pass --force")
            else:
                msg = (f"a subnet manager is MASTER ({who}): it would overwrite this change on its next "
                       f"re-route; stop it, or pass --force (force=True)")
            raise OtherMasterSM(msg, node=node, lid=lid, guid=sm.guid, priority=sm.priority)
        if sweep:
            return f"--force: proceeding although another SM is MASTER ({who})"
        return f"warning: a subnet manager is MASTER ({who}); it will overwrite this change on its next re-route"
    if sweep:
        return f"other SM present: {who}"
    return f"note: the subnet manager the switches name ({who}) is {_state_name(sm)}, not MASTER"


# -- a sweep: every port with IsSM of a discovered fabric ---------------------------------------
def find_sms(transport: Transport, topo: Any) -> list[tuple[Any, int, PortInfo, Reply]]:
    """Every other port with IsSM, asked for its SMInfo: (node, port, PortInfo, Reply).
    ``topo``: a `smagent.discovery.Topology`. The local port is skipped only when the
    transport itself is the SM there (see the module docstring)."""
    reqs, who = [], []
    own = _owns_sm_port(transport)
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.capability_mask & CAP_IS_SM:
                continue
            if own and ((n.guid, p) == topo.local or (n.is_switch and topo.local[0] == n.guid)):
                continue
            reqs.append(Request.dr(Method.GET, AttrID.SM_INFO, n.path_to_port(p)))
            who.append((n, p, pi))
    return [(n, p, pi, r) for (n, p, pi), r in zip(who, transport.execute(reqs))]


def check_other_sms(transport: Transport, topo: Any, *, force: bool) -> list[str]:
    """Find ports with IsSM and ask their SMInfo (`find_sms`); refuse while another is MASTER."""
    notes = []
    for n, p, pi, r in find_sms(transport, topo):
        if not r.ok:
            notes.append(f"{n.description} port {p} has IsSM but SMInfo did not answer: {r.error}")
            continue
        sm = r.value(SMInfo)
        who = (f"{n.description} port {p}: SM GUID {sm.guid:#018x}, LID {pi.lid}, priority {sm.priority}, "
               f"state {_state_name(sm)}")
        notes.append(judge(sm, who, force=force, warn_only=False, sweep=True, node=f"{n.description} port {p}",
                           lid=pi.lid))
    return notes


# -- a table write: the SMs the switches name, and one on our own port ---------------------------
def _ask(transport: Transport, req: Request) -> Reply:
    saved = transport.retries
    transport.retries = 0  # a port with no SM may never answer: don't wait for retries
    try:
        (r,) = transport.execute([req])
    finally:
        transport.retries = saved
    return r


def check_master_sm(transport: Transport, master_lids: Iterable[int], own: PortInfo | None, *, force: bool,
                    dry_run: bool) -> list[str]:
    """Ask the SM each MasterSMLID names for its SMInfo, and the local port's when it shows
    IsSM (``own``: the local port's PortInfo, None: unknown). Our own LID is asked only
    when the transport is not the SM there, by DR path 0 (the SM on our port answers it).
    A MASTER: OtherMasterSM before any Set, unless ``force`` or ``dry_run`` (then a
    warning). Another state: a note. No answer: nothing (best effort)."""
    own_lid = own.lid if own is not None else None
    local_sm = own is not None and bool(own.capability_mask & CAP_IS_SM) and not _owns_sm_port(transport)
    asks: dict[int, Request] = {}
    for lid in sorted({x for x in master_lids if x}):
        if lid != own_lid:
            asks[lid] = Request(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO), dlid=lid)
    if local_sm:
        asks[own_lid or 0] = Request.dr(Method.GET, AttrID.SM_INFO, (0,))
    notes = []
    for lid, req in sorted(asks.items()):
        r = _ask(transport, req)
        if not r.ok:
            continue
        sm = r.value(SMInfo)
        where = f"LID {lid}" if lid else "the local port"
        who = f"{where}, GUID 0x{sm.guid:016x}, priority {sm.priority}"
        notes.append(judge(sm, who, force=force, warn_only=dry_run, sweep=False, lid=lid))
    return notes


def local_portinfo(transport: Transport, local_info) -> PortInfo | None:
    """The local port's PortInfo (port 0 of a switch), read by DR path 0; ``local_info``:
    the local NodeInfo (None: unknown, nothing read)."""
    if local_info is None:
        return None
    lp = 0 if local_info.node_type == NodeType.SWITCH else local_info.local_port_num
    r = transport.execute([Request.dr(Method.GET, AttrID.PORT_INFO, (0,), fw.portinfo_modifier(lp))])[0]
    return r.value(PortInfo) if r.ok else None
