"""Multicast groups made by joins (IBA 15.2.5.17, MCMemberRecord Set and Delete): sans-I/O.

A group is an MGID with its MLID and parameters (Q_Key, P_Key, MTU, rate, SL, FlowLabel,
TClass, HopLimit, Scope, packet lifetime), fixed by the join that creates it, and its
members: port GID -> JoinState bits (full 1, non 2, send-only non-member 4, send-only full
member 8: a sender that never receives, yet keeps the group alive). A join names the MGID
(or 0: one is assigned) and the port; the first join creates the group and must give
the components IBA 15.2.5.17.1 requires (else ERR_REQ_INSUFFICIENT_COMPONENTS); MTU and
rate are chosen with their selectors from what the member's link carries, and a join
whose MTU or rate that link cannot carry is refused (ERR_REQ_INVALID), as OpenSM does. A
Delete clears the JoinState bits it names; the group dies with its last full or send-only
full member (OpenSM 3.3.23 counts both as full members) unless it is well known (the IPoIB broadcast group the SM pre-creates, as OpenSM keeps
its partition groups).

MLIDs come from 0xC000 up, below every switch's MulticastFDBCap, never one the SM's
configured groups use. `version` counts changes of what the MFTs must hold; `spec`
turns the groups into `smagent.planning.multicast.Group`s for the sweep, and `released` is the
MLIDs of dead groups whose entries must be cleared."""
from __future__ import annotations

import dataclasses

from mad import codes
from mad import forwarding as fw
from mad.sa import SaStatus, matcher
from mad.sa_records import MCMemberRecord, PathRecord
from smagent.planning import multicast
from smagent.sa.pathrecords import EXACTLY, GREATER, LARGEST, LESS, PACKET_LIFE_TIME, PathQueryError
from smagent.sa.records import Records, port_mtu

FULL, NON, SEND_ONLY, SEND_ONLY_FULL = 1, 2, 4, 8
FULL_KINDS = FULL | SEND_ONLY_FULL  # a group lives while one member holds either (OpenSM 3.3.23)
IPOIB_QKEY = 0x0B1B  # the IPoIB Q_Key (RFC 4391), OpenSM's for its broadcast groups
LINK_LOCAL = 2
DEFAULT_PKEY = 0xFFFF
IPOIB_SIGNATURES = (0x401B, 0x601B)  # IPv4 and IPv6 over IB (RFC 4391, 2464)
SA_SIGNATURE = 0xA01B  # MGIDs an SA assigns (OpenSM's)


def ipoib_broadcast_mgid(p_key: int = DEFAULT_PKEY, scope: int = LINK_LOCAL) -> int:
    """ff1S:401b:PPPP::ffff:ffff, the IPv4 broadcast group of a partition (RFC 4391)."""
    return (0xFF10 | scope) << 112 | 0x401B << 96 | (p_key | 0x8000) << 80 | 0xFFFFFFFF


# the components a create needs (IBA 15.2.5.17.1, OpenSM's REQUIRED mask); MGID may be 0
CREATE_NEEDS = ("mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")
JOIN_NEEDS = ("mgid", "port_gid", "join_state")


class GroupError(PathQueryError):
    """A join or leave refused: ``status`` is the SA status to send."""


@dataclasses.dataclass
class McGroup:
    mgid: int
    mlid: int
    q_key: int
    p_key: int
    mtu: int
    rate: int
    sl: int = 0
    flow_label: int = 0
    tclass: int = 0
    hop_limit: int = 0
    scope: int = LINK_LOCAL
    packet_life_time: int = PACKET_LIFE_TIME
    well_known: bool = False
    members: dict[int, int] = dataclasses.field(default_factory=dict)  # port GID -> JoinState

    def record(self, port_gid: int = 0, join_state: int = 0) -> MCMemberRecord:
        return MCMemberRecord(mgid=self.mgid, port_gid=port_gid, q_key=self.q_key, mlid=self.mlid,
                              mtu_selector=EXACTLY, mtu=self.mtu, tclass=self.tclass, p_key=self.p_key,
                              rate_selector=EXACTLY, rate=self.rate, packet_life_time_selector=EXACTLY,
                              packet_life_time=self.packet_life_time, sl=self.sl, flow_label=self.flow_label,
                              hop_limit=self.hop_limit, scope=self.scope, join_state=join_state)


def _pick(mask: int, q: MCMemberRecord, field: str, carried: int, order=lambda v: v) -> int | None:
    """The value a new group gets for ``field`` (mtu, rate) given the member's link carries
    ``carried``; None if the request cannot be met."""
    if not mask & MCMemberRecord.mask(field):
        return carried
    sel = getattr(q, f"{field}_selector") if mask & MCMemberRecord.mask(f"{field}_selector") else EXACTLY
    want = getattr(q, field)
    if sel == LARGEST:
        return carried
    if sel == GREATER:
        return carried if order(carried) > order(want) else None
    if sel == LESS:  # as OpenSM: the link's if the one named is above it, else the next below that one
        if order(want) > order(carried):
            return carried
        if field == "mtu":  # MTU codes are in order
            return want - 1 if want > 1 else None
        below = [c for g, c in codes.RATE_CODES.items() if g < codes.rate_gbps(want)]
        return max(below, key=codes.rate_gbps) if below else None
    return want if order(want) <= order(carried) else None


def _accepts(mask: int, q: MCMemberRecord, field: str, value: int, order=lambda v: v) -> bool:
    """Whether an existing group's ``value`` meets the join's selector for ``field``."""
    if not mask & MCMemberRecord.mask(field):
        return True
    sel = getattr(q, f"{field}_selector") if mask & MCMemberRecord.mask(f"{field}_selector") else EXACTLY
    want = getattr(q, field)
    return {GREATER: order(value) > order(want), LESS: order(value) < order(want),
            LARGEST: True}.get(sel, value == want)


class McastGroups:
    """The groups the SA holds. ``reserved``: MLIDs the SM's configured groups use."""

    def __init__(self, reserved: frozenset[int] = frozenset()):
        self.groups: dict[int, McGroup] = {}
        self.reserved = reserved
        self.released: set[int] = set()
        self.version = 0

    # -- making groups ---------------------------------------------------------------
    def precreate(self, mgid: int, *, mtu: int, rate: int, sl: int = 0, p_key: int = DEFAULT_PKEY,
                  q_key: int = IPOIB_QKEY, mlid: int | None = None, limit: int = fw.MULTICAST_LID_MAX) -> McGroup:
        """A well-known group (the IPoIB broadcast group): it lives without members."""
        g = McGroup(mgid, mlid if mlid is not None else self._free_mlid(limit), q_key, p_key | 0x8000, mtu, rate,
                    sl, well_known=True)
        self.groups[mgid] = g
        return g

    def _free_mlid(self, limit: int) -> int:
        used = {g.mlid for g in self.groups.values()} | self.reserved
        for m in range(fw.MULTICAST_LID_MIN, limit + 1):
            if m not in used:
                self.released.discard(m)
                return m
        raise GroupError(SaStatus.ERR_NO_RESOURCES, "no free MLID below the switches' MulticastFDBCap")

    def _new_mgid(self, q: MCMemberRecord, mlid: int) -> int:
        """An MGID for a join that gave 0: ff1S:a01b:PPPP::MLID (OpenSM's signature a01b)."""
        scope = q.scope or LINK_LOCAL
        return (0xFF10 | scope) << 112 | 0xA01B << 96 | (q.p_key or DEFAULT_PKEY) << 80 | mlid

    # -- the SA's methods ------------------------------------------------------------
    def join(self, recs: Records, q: MCMemberRecord, mask: int) -> MCMemberRecord:
        """MCMemberRecord Set: the group (created if new) as the member sees it."""
        has = lambda *names: all(mask & MCMemberRecord.mask(n) for n in names)  # noqa: E731
        if not has(*JOIN_NEEDS) or not q.join_state & 0xF:
            raise GroupError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS, "a join names MGID, PortGID and JoinState")
        node, port = self._port(recs, q.port_gid)
        mtu, rate = port_mtu(node, port), codes.rate_code(node.ports[port]) if port in node.ports else 0
        g = self.groups.get(q.mgid) if q.mgid else None
        pkey = g.p_key if g is not None else q.p_key
        if (g is not None or has("p_key")) and not recs.subnet.holds_pkey((node.guid, 0 if node.is_switch else port),
                                                                          pkey):
            raise GroupError(SaStatus.ERR_REQ_INVALID, f"the port is not a member of partition {pkey & 0x7FFF:#06x}")
        if g is None:
            if not has(*CREATE_NEEDS):
                raise GroupError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS,
                                 "creating a group needs Q_Key, P_Key, SL, FlowLabel, TClass")
            if q.join_state & FULL_KINDS == 0:  # o15.0.1.9; a send-only full member may (OpenSM 3.3.23)
                raise GroupError(SaStatus.ERR_REQ_INVALID, "only a full or send-only full member creates a group")
            if q.mgid:
                self._check_requested_mgid(q, mask)
            g_mtu, g_rate = _pick(mask, q, "mtu", mtu), _pick(mask, q, "rate", rate, codes.rate_gbps)
            if g_mtu is None or g_rate is None:
                raise GroupError(SaStatus.ERR_REQ_INVALID, "the member's link cannot carry the MTU/rate asked for")
            mlid = self._free_mlid(mlid_limit(recs.subnet))
            mgid = q.mgid or self._new_mgid(q, mlid)
            # the rest as the creating join has it, masked or not, as OpenSM keeps it
            g = McGroup(mgid, mlid, q.q_key, q.p_key, g_mtu, g_rate, q.sl, q.flow_label, q.tclass, q.hop_limit,
                        q.scope, q.packet_life_time)
            self.groups[mgid] = g
        else:
            for f, order in (("mtu", int), ("rate", codes.rate_gbps)):
                if not _accepts(mask, q, f, getattr(g, f), order):
                    raise GroupError(SaStatus.ERR_REQ_INVALID, f"the group's {f} does not meet the join's")
            for f in ("q_key", "p_key", "sl", "flow_label", "tclass", "mlid"):
                if has(f) and getattr(q, f) != getattr(g, f):
                    raise GroupError(SaStatus.ERR_REQ_INVALID, f"the join's {f} differs from the group's")
            if mtu < g.mtu or codes.rate_gbps(rate) < codes.rate_gbps(g.rate):
                raise GroupError(SaStatus.ERR_REQ_INVALID, "the member's link cannot carry the group's MTU/rate")
        before = g.members.get(q.port_gid, 0)
        g.members[q.port_gid] = before | q.join_state
        if not before:
            self.version += 1
        return g.record(q.port_gid, g.members[q.port_gid])

    def _check_requested_mgid(self, q: MCMemberRecord, mask: int) -> None:
        """A new group's MGID as OpenSM validates it (ipoib_mcgroup_creation_validation, on
        by default; ERR_REQ_INVALID): an IPoIB one (signature 401b/601b) other than the IPv4
        broadcast group needs its partition's and scope's broadcast group to exist and the
        join's Q_Key, P_Key, TClass, SL, FlowLabel, HopLimit, where masked, to be that
        group's; any other has no reserved flag bits, and an SA-style one (a01b) is not
        link-local."""
        signature, scope = q.mgid >> 96 & 0xFFFF, q.mgid >> 112 & 0xF
        if signature not in IPOIB_SIGNATURES:
            if q.mgid >> 117 & 0x7 or signature == SA_SIGNATURE and scope == LINK_LOCAL:
                raise GroupError(SaStatus.ERR_REQ_INVALID, f"MGID {mgid_text(q.mgid)}: reserved flags, or "
                                 "the SA's signature a01b with link-local scope")
            return
        bcast = (0xFF10 | scope) << 112 | 0x401B << 96 | (q.mgid >> 80 & 0xFFFF) << 80 | 0xFFFFFFFF
        if q.mgid == bcast:
            return
        b = self.groups.get(bcast)
        if b is None:
            raise GroupError(SaStatus.ERR_REQ_INVALID, f"IPoIB group {mgid_text(q.mgid)}: its broadcast group "
                             f"{mgid_text(bcast)} does not exist")
        has = lambda n: mask & MCMemberRecord.mask(n)  # noqa: E731
        pkey_ok = (q.p_key & 0x8000 or b.p_key & 0x8000) and q.p_key & 0x7FFF == b.p_key & 0x7FFF
        if has("p_key") and not pkey_ok or any(has(f) and getattr(q, f) != getattr(b, f) for f in
                                              ("q_key", "tclass", "sl", "flow_label", "hop_limit")):
            raise GroupError(SaStatus.ERR_REQ_INVALID, f"IPoIB group {mgid_text(q.mgid)}: the join's parameters "
                             f"differ from its broadcast group's")

    def leave(self, q: MCMemberRecord, mask: int) -> MCMemberRecord:
        """MCMemberRecord Delete: the JoinState bits named (every one held: o15-0.1.14) are
        cleared; the answer is the request with the group's scope, the JoinState left and
        its selectors "exactly", as OpenSM answers."""
        if not all(mask & MCMemberRecord.mask(n) for n in JOIN_NEEDS):
            raise GroupError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS, "a leave names MGID, PortGID and JoinState")
        g = self.groups.get(q.mgid)
        state = g.members.get(q.port_gid, 0) if g is not None else 0
        if g is None or not state & q.join_state or q.join_state & ~state & 0xF:
            raise GroupError(SaStatus.ERR_REQ_INVALID, "no such membership")
        left = state & ~q.join_state
        if left:
            g.members[q.port_gid] = left
        else:
            del g.members[q.port_gid]
            self.version += 1
        self._end_if_no_full_member(g)
        return q.replace(scope=g.scope, join_state=left, mtu_selector=EXACTLY, rate_selector=EXACTLY,
                         packet_life_time_selector=EXACTLY)

    def _end_if_no_full_member(self, g: McGroup) -> bool:
        """Whether ``g`` died: no full or send-only full member left, and not well known."""
        if g.well_known or any(s & FULL_KINDS for s in g.members.values()):
            return False
        del self.groups[g.mgid]
        self.released.add(g.mlid)
        self.version += 1
        return True

    def drop_ports(self, gone_port) -> list[int]:
        """The member GIDs (port or alias) of ports that left the subnet (``gone_port(gid)``)
        leave every group, as OpenSM drops a port that is gone from its groups; the MGIDs of
        the groups that died of it."""
        dead = []
        for g in list(self.groups.values()):
            gone = [gid for gid in g.members if gone_port(gid)]
            for gid in gone:
                del g.members[gid]
            if gone:
                self.version += 1
                if self._end_if_no_full_member(g):
                    dead.append(g.mgid)
        return dead

    def has_member(self, guid: int) -> bool:
        """Whether a port or alias GUID is a member of any group."""
        return any(gid & (1 << 64) - 1 == guid for g in self.groups.values() for gid in g.members)

    def records(self) -> list[MCMemberRecord]:
        """One record per (group, member)."""
        return [g.record(gid, s) for g in sorted(self.groups.values(), key=lambda g: g.mlid)
                for gid, s in sorted(g.members.items())]

    def query(self, q: MCMemberRecord, mask: int, *, trusted: bool, visible=lambda p_key: True) -> list[MCMemberRecord]:
        """Get and GetTable, as OpenSM answers them: groups in MGID order, only those whose
        partition the requester is in (``visible(p_key)``); a query naming a PortGID gets
        that member's record; a trusted one (our SM_Key) one record per member; any
        other one record per group. PortGID, JoinState and ProxyJoin are zero except to a
        trusted request (IBA 15.2.5.17: members are not shown to any host)."""
        test = matcher(q, mask)
        per_port = bool(mask & MCMemberRecord.mask("port_gid"))
        group_test = matcher(q, mask & ~MCMemberRecord.mask("join_state", "proxy_join"))
        out: list[MCMemberRecord] = []
        for g in sorted(self.groups.values(), key=lambda g: g.mgid):
            if not visible(g.p_key):
                continue
            if per_port:
                state = g.members.get(q.port_gid)
                out += [g.record(q.port_gid, state)] if state is not None and test(g.record(q.port_gid, state)) else []
            elif trusted:
                out += [r for r in (g.record(gid, s) for gid, s in sorted(g.members.items())) if test(r)]
            elif group_test(g.record()):
                out.append(g.record())
        return out if trusted else [dataclasses.replace(r, port_gid=0, join_state=0, proxy_join=0) for r in out]

    def path(self, recs: Records, q: PathRecord, mask: int, is_get: bool) -> list[PathRecord]:
        """A PathRecord query whose DGID is a group's MGID, as OpenSM answers it (its
        pr_process_multicast): the request itself with the group's MGID, MLID, P_Key, SL,
        TClass, FlowLabel and hop limit (255 when the MGID's scope is beyond link-local), its MTU, rate and
        packet lifetime 'exactly', NumbPath 1 and QoSClass 0; nothing when the group is
        unknown, the SGID's or SLID's port is no member, or DLID, P_Key, SL, FlowLabel,
        HopLimit or TClass in the mask differ from the group's (MTU, rate, packet lifetime
        and RawTraffic are not compared), or a GetTable asks NumbPath 0."""
        g = self.groups.get(q.dgid)
        if g is None:
            return []
        members = {gid & (1 << 64) - 1 for gid in g.members}
        hit = recs.subnet.port_of_lid(q.slid) if mask & PathRecord.mask("slid") else None
        hop_limit = g.hop_limit if g.mgid >> 112 & 0xF == LINK_LOCAL else 0xFF  # the MGID's scope
        if (mask & PathRecord.mask("dlid") and q.dlid != g.mlid
                or mask & PathRecord.mask("sgid") and q.sgid & (1 << 64) - 1 not in members
                or mask & PathRecord.mask("slid") and (hit is None or recs.gid(*hit) & (1 << 64) - 1 not in members)
                or mask & PathRecord.mask("num_path") and not is_get and q.num_path == 0):
            return []
        for field, value in (("p_key", g.p_key), ("sl", g.sl), ("flow_label", g.flow_label),
                             ("hop_limit", g.hop_limit), ("tclass", g.tclass)):
            if mask & PathRecord.mask(field) and getattr(q, field) != value:
                return []
        return [q.replace(dgid=g.mgid, dlid=g.mlid, tclass=g.tclass, reversible=0, num_path=1, p_key=g.p_key,
                          mtu_selector=EXACTLY, mtu=g.mtu, rate_selector=EXACTLY, rate=g.rate,
                          packet_life_time_selector=EXACTLY, packet_life_time=g.packet_life_time, sl=g.sl,
                          qos_class=0, hop_limit=hop_limit, flow_label=g.flow_label)]

    @staticmethod
    def _port(recs: Records, gid: int):
        hit = recs.port_of_gid(gid)  # its port GID, or an alias GID of it (as OpenSM joins by alias)
        if hit is None:
            raise GroupError(SaStatus.ERR_REQ_INVALID_GID, f"PortGID {gid:#034x} is no port of the subnet")
        return hit

    # -- for the sweep ---------------------------------------------------------------
    def spec_groups(self, in_fabric, base=lambda guid: guid) -> list[multicast.Group]:
        """A `multicast.Group` per group with a member port ``in_fabric`` (port GUID -> bool),
        MLIDs the configured groups use left out (those are programmed as configured);
        ``base``: the port GUID a member's GUID names (an alias GUID its port's)."""
        out = []
        for g in sorted(self.groups.values(), key=lambda g: g.mlid):
            if g.mlid in self.reserved:
                continue
            guids = tuple(sorted(guid for guid in {base(gid & (1 << 64) - 1) for gid in g.members} if in_fabric(guid)))
            if guids:
                out.append(multicast.Group(g.mlid, guids, f"SA group {mgid_text(g.mgid)}"))
        return out


def mgid_text(mgid: int) -> str:
    return ":".join(f"{mgid >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8))


def mlid_limit(subnet) -> int:
    """The highest MLID every switch's MFT holds (below 0xC000: none)."""
    caps = [n.switch_info.multicast_fdb_cap for n in subnet.nodes.values()
            if n.is_switch and n.switch_info is not None]
    return min(fw.MULTICAST_LID_MAX, fw.MULTICAST_LID_MIN + min(caps, default=0) - 1)
