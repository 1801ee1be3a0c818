"""The SA inside the running SM: class-0x03 MADs from the dispatcher to the sans-I/O
`smagent.sa.SaAgent`, its answers out through the transport, a `Subnet` snapshot
published after every sweep or repair, and the RMPP retransmission deadline kept by the
daemon's loop (and between sweep rounds, so a long sweep does not stall a table).

Only a MASTER serves; a STANDBY or DISCOVERING SM's SA answers "method/attribute not
supported" (never silence: a client would wait for ever).

Multicast groups by join: the IPoIB broadcast group of the default partition (or, with
partitions, of every partition flagged ``ipoib``, with its mtu/rate/sl/scope/q_key) is
pre-created at the first snapshot, as OpenSM does; the default partition's takes MLID
0xC000. Without a group file or desired-state groups the joins decide every tree, as
under OpenSM: no configured group (the one-shot `sweep`'s default, every CA port on
0xC000, is not programmed), so a group's MFT entries reach exactly its members (all of
them, send-only ones too, as OpenSM's tree rebuild does), and a group with no member in
the fabric, the broadcast group before any join among them, holds no entry. A join or
leave is answered at once; the groups go into the sweep options at once (any later sweep
programs them) and `follow_groups`, from the daemon's loop, runs a repair against the
known state: only the MFT blocks that change are written, through the one write path. A
CA port that leaves the subnet (a snapshot without it) leaves every group, as OpenSM
drops it; a group left with no full member dies (trap 67).

Alias GUIDs (GUIDInfoRecord Set/Delete) likewise: answered at once, handed to the sweep
options (`SweepOptions.alias_guids`), and `follow` runs a repair that reads the changed
ports' GUIDInfo blocks and writes those that differ (`smagent.linkconf.guids`), as
OpenSM's GUID manager does after a change. A port that refuses the Set (ibsim) is logged
once and never asked again.

Events: subscribers (InformInfo) get Reports of CA ports that came or went between two
snapshots (traps 64/65), of groups created or deleted (66/67, from the agent), and of the
traps SMAs send us (`forward_trap`, from the daemon's trap handler)."""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Callable, Protocol

from mad import forwarding as fw
from mad.attributes import SMInfo
from mad.errors import MadError
from mad.gmp import CLASS_PORT_INFO
from mad.header import Method, method_name
from mad.sa import SA_CLASS, SaStatus
from mad.sa_records import record_class
from smagent.planning import multicast
from smagent.errors import SmagentError
from smagent.sa import SaAgent
from smagent.sa import groups as groupsmod
from smagent.sa import informs as informsmod
from smagent.model.subnet import PerModel, Subnet
from smagent.transport.address import Address, Incoming

# how long the kernel keeps a Report awaiting its ReportResp: as long as the SA waits
_REPORT_WAIT_MS = int(informsmod.REPORT_TIMEOUT_S * 1000)

if TYPE_CHECKING:
    from smagent.discovery import Topology
    from smagent.sm.options import Counters, DaemonOptions
    from smagent.sm.peers import OtherSms
    from smagent.transport.base import Transport


class SaHost(Protocol):
    """What the SA service sees of the daemon (`sm.daemon.Daemon` is one): its settings,
    transport and clock, the subnet model's topology and the model itself when repairs may
    plan against it, the other SMs, and a sweep to ask for; never the daemon's private
    members."""

    t: Transport
    opts: DaemonOptions
    clock: Callable[[], float]
    counters: Counters
    known: Subnet | None  # the model, when repairs may plan against it; consumed (set to None) by `follow`'s repair
    peers: OtherSms

    @property
    def activity(self) -> str | None: ...

    @property
    def topo(self) -> Topology | None: ...

    def is_master(self) -> bool: ...

    def own_sminfo(self) -> tuple[int, SMInfo] | None: ...

    def sweep_against(self, why: str, known: Subnet | None) -> None: ...

log = logging.getLogger("smagent.sm")
WORK_SLICE_S = 0.005  # the longest a table being worked out holds the loop at a time


class SaService:
    def __init__(self, daemon: SaHost):
        self.d = daemon
        self.agent = SaAgent(daemon.opts.sm_key, master=False, sms=self._sms_seen)
        self.agent.multicast = daemon.opts.sweep.multicast  # ClassPortInfo: IsUDMulticastSupported
        self.groups_pending = False  # joins or leaves the MFTs do not follow yet
        self.alias_nodes: set[int] = set()  # node GUIDs whose ports' alias GUIDs changed, not yet written
        self._precreated = False
        # the last publish's "after" is the next one's "before": once per snapshot
        self._ports_of = PerModel(self._gid_lids)
        sw = daemon.opts.sweep
        # no configured groups: the joins decide every tree; the first sweep clears the
        # broadcast MLID (no one joined yet) where an earlier SM left it
        self.joins_decide = sw.multicast and sw.mcast_groups is None and not getattr(sw.desired, "multicast", None)
        if self.joins_decide:
            sw.mcast_groups = multicast.GroupSpec([], source="SA joins")
            sw.mcast_released = frozenset({multicast.DEFAULT_MLID})
        daemon.t.answer_at_once = self.answer_at_once  # a flood of PathRecord Gets: no Incoming each

    def answer_at_once(self, raw: bytes, source) -> list[tuple[bytes, bytes]] | None:
        """A request the agent answers from whole cached MADs (`SaAgent.answer_fast`), while
        MASTER; None for everything else (the dispatcher then gets it as an `Incoming`)."""
        if not self.d.is_master():
            return None  # `on_mad` tells the agent so (then ``master`` is False there)
        return self.agent.answer_fast(raw, source, self.d.clock)

    @property
    def deadline(self) -> float:
        """When `tick` has RMPP work (inf: none; -inf: tables to work out, at once)."""
        if self.agent.working:
            return -math.inf
        at = self.agent.deadline
        return math.inf if at is None else at

    def on_mad(self, m: Incoming) -> None:
        """A class-0x03 MAD (called inside the transport, perhaps mid-sweep)."""
        d = self.d
        self.agent.master = d.is_master()
        version = self.agent.groups.version
        self._send(self.agent.handle(m, d.clock()))
        if self.agent.groups.version != version:
            self._groups_changed()
        if self.agent.aliases.dirty:
            self._aliases_changed()

    def tick(self) -> None:
        """RMPP segments whose ACK did not come: sent again (or the transfer aborted); then,
        from the loop only (not inside a sweep or repair: those go first), a slice of
        `WORK_SLICE_S` of the tables being worked out, so what arrives meanwhile (a Get, a
        trap) waits at most that long."""
        clock = self.d.clock
        at = self.agent.deadline
        if at is not None and at <= clock():
            self._send(self.agent.on_timeout(clock()))
        if self.agent.working and self.d.activity is None:
            end = clock() + WORK_SLICE_S
            self._send(self.agent.work(clock(), lambda: clock() < end))

    def snapshot(self, result) -> Subnet:
        """The snapshot of a finished sweep, not yet answered from: the daemon builds it
        while requests are still served, from the last one (it takes tens of ms on a
        1,024-host fabric, which a request arriving meanwhile would otherwise wait)."""
        opts = self.d.opts.sweep  # the partitions the sweep wrote: PathRecords only within them
        parts = opts.partitions or getattr(opts.desired, "partitions", None)
        policy = opts.qos_policy or getattr(opts.desired, "qos_policy", None)  # SLs by service ID and P_Key
        links = opts.links
        qos = links is not False and (links is None or links.qos is not False)  # QoS off: partitions' SLs unused
        return Subnet.from_sweep(result, generation=self.d.counters.sweeps + 1, partitions=parts,
                                 qos_policy=policy, previous=self.agent.subnet, qos=qos)

    def publish(self, result, snapshot: Subnet | None = None) -> None:
        """A finished sweep's result (and its `snapshot`, if built already) becomes the
        snapshot every answer comes from; end ports (CA ports, switch port 0s) that came or
        went since the last one are reported to subscribers (traps 64/65)."""
        before = self._end_ports()
        owners = dict(self.agent.aliases.by_alias)  # alias GUID -> port GUID, before gone ports lose theirs
        self.agent.publish(snapshot if snapshot is not None else self.snapshot(result))
        self._refused(result)
        after = self._end_ports()
        if before is not None and after is not None and before != after:
            a = self.agent
            a.master = self.d.is_master()
            gone = {gid: lid for gid, lid in before.items() if after.get(gid) != lid}
            a.informs.forget_lids(set(gone.values()))
            now = self.d.clock()
            out = [r for gid in sorted(set(after) - set(before)) for r in a.sm_notice(informsmod.GID_IN, gid, now)]
            out += [r for gid in sorted(set(before) - set(after)) for r in a.sm_notice(informsmod.GID_OUT, gid, now)]
            version = a.groups.version
            left = {gid & (1 << 64) - 1 for gid in set(before) - set(after)}  # port GUIDs gone
            for mgid in a.groups.drop_ports(lambda gid: gid & (1 << 64) - 1 in left  # they leave their groups
                                            or owners.get(gid & (1 << 64) - 1) in left):
                out += a.sm_notice(informsmod.MCG_DELETED, mgid, now)
            self._send(out)
            if a.groups.version != version:
                self._groups_changed()
        if not self._precreated:
            self._precreated = True
            self._precreate(set(result.multicast.mlids()) if result.multicast is not None else set())

    def _end_ports(self) -> dict[int, int] | None:
        """GID -> base LID of every end port of the snapshot, CA ports and switch port 0s
        (as OpenSM, which reports both in and out of service) (None: no snapshot yet)."""
        sub = self.agent.subnet
        if sub is None:
            return None
        return self._ports_of(sub)

    def _gid_lids(self, sub: Subnet) -> dict[int, int]:
        recs = self.agent._recs
        lids = ((n, p, sub.base_lid(n, p)) for n, p in sub.end_ports)
        return {recs.gid(n, p): lid for n, p, lid in lids if lid}

    def forward_trap(self, trap) -> None:
        """A trap an SMA sent us (128, 144, 256, ...): reported to whoever subscribed."""
        from mad.attributes import Notice
        from mad.sa_records import SaNotice
        a = self.agent
        if a.subnet is None:
            return
        n = trap.smp.attribute(Notice)
        hit = a.subnet.port_of_lid(n.issuer_lid)
        notice = SaNotice(**{k: getattr(n, k) for k in Notice.LAYOUT.names},
                          issuer_gid=a._recs.gid(*hit) if hit is not None else 0)
        self._send(a.notify(notice, self.d.clock()))

    # -- multicast groups by join ----------------------------------------------------
    def _precreate(self, static: set[int]) -> None:
        """The IPoIB broadcast groups (OpenSM's defaults: 2048 MTU, 10 Gb/s, SL 0, link-local).
        ``static``: the MLIDs the configured groups program, never handed to a join."""
        opts, groups = self.d.opts.sweep, self.agent.groups
        groups.reserved = frozenset(static)
        default = self.joins_decide
        parts = opts.partitions or getattr(opts.desired, "partitions", None)
        wanted = [(groupsmod.DEFAULT_PKEY & 0x7FFF, {})] if parts is None else [
            (p.pkey, dict(p.flags)) for p in getattr(parts, "partitions", ()) if p.ipoib]
        limit = groupsmod.mlid_limit(self.agent.subnet)
        for pkey, flags in wanted:
            mlid = fw.MULTICAST_LID_MIN if pkey == 0x7FFF and default else None
            try:
                g = groups.precreate(groupsmod.ipoib_broadcast_mgid(pkey, flags.get("scope", groupsmod.LINK_LOCAL)),
                                     mtu=flags.get("mtu", 4), rate=flags.get("rate", 3), sl=flags.get("sl", 0),
                                     p_key=pkey, q_key=flags.get("q_key", groupsmod.IPOIB_QKEY), mlid=mlid,
                                     limit=limit)
            except groupsmod.GroupError as e:
                log.warning("IPoIB broadcast group of P_Key 0x%04x not created: %s", pkey | 0x8000, e)
                continue
            log.info("IPoIB broadcast group %s: MLID 0x%04x", groupsmod.mgid_text(g.mgid), g.mlid)
        self._set_sweep_groups()  # the next sweep clears what the new groups' MLIDs hold

    # -- alias GUIDs -------------------------------------------------------------------
    def _aliases_changed(self) -> None:
        """Aliases set or deleted: the sweep options hold them now, `follow` writes them."""
        a = self.agent.aliases
        ports = a.dirty - a.refused  # a port that refused is not asked again
        hits = (self.agent.subnet.port_of_guid(g) for g in ports) if self.agent.subnet is not None else ()
        self.alias_nodes |= {hit[0].guid for hit in hits if hit is not None}
        a.dirty.clear()
        self.d.opts.sweep.alias_guids = a.wanted()

    def _refused(self, result) -> None:
        """Ports a sweep found refusing GUIDInfo: logged once, never asked again; the sweep
        options follow the aliases (ports gone took theirs)."""
        a = self.agent.aliases
        new = set(getattr(result, "guids_refused", ())) - a.refused
        if new:
            log.warning("alias GUIDs: %d port(s) refuse SubnSet(GUIDInfo) (e.g. port GUID 0x%016x): their alias "
                        "GUIDs are the SA's alone; not asked again", len(new), min(new))
            a.refused |= new
        self.d.opts.sweep.alias_guids = a.wanted()

    def _groups_changed(self) -> None:
        """Membership changed: the sweep options say so now, the MFTs follow from the loop."""
        self._set_sweep_groups()
        self.groups_pending = True

    def _set_sweep_groups(self) -> None:
        """The joined groups into the sweep options: a tree for each with a member in the
        fabric; the MLIDs of dead groups, and of live ones with no such member, cleared."""
        d, groups = self.d, self.agent.groups
        topo = d.topo
        cas = multicast.ca_ports(topo) if topo is not None else {}
        switches = {n.guid for n in topo.switches()} if topo is not None else set()
        joined = groups.spec_groups(lambda g: g in cas or g in switches,
                                    lambda guid: self.agent.aliases.port_of(guid) or guid)
        treed = {g.mlid for g in joined}
        empty = {g.mlid for g in groups.groups.values() if g.mlid not in treed and g.mlid not in groups.reserved}
        d.opts.sweep.mcast_joined = tuple(joined)
        d.opts.sweep.mcast_released = frozenset(groups.released | empty)

    def follow(self) -> None:
        """Called by the daemon's loop: after joins or leaves, or alias GUIDs set or
        deleted, a MASTER repairs against the known state (no reads but the link tables
        of the nodes whose aliases changed, their GUIDInfo blocks among them; only the
        MFT blocks and GUIDInfo blocks that change are written), or sweeps."""
        d = self.d
        if not (self.groups_pending or self.alias_nodes) or not d.is_master():
            return
        why = " and ".join(w for w, on in (("multicast groups", self.groups_pending),
                                           ("alias GUIDs", self.alias_nodes)) if on) + " changed"
        known, d.known = d.known, None  # consumed: the sweep sets it again
        if known is not None:  # their link tables read again, GUIDInfo among them
            known = known.evolve(link_tables_unknown=known.link_tables_unknown | self.alias_nodes)
        self.groups_pending, self.alias_nodes = False, set()
        d.sweep_against(why, known)

    def status(self) -> dict:
        """The SA's part of `smagent status`: requests answered, RMPP transfers in flight,
        and which snapshot it answers from (the sweep count that published it)."""
        a = self.agent
        return {"answered": a.answered, "tables_in_flight": len(a.senders), "tables_pending": len(a.pending),
                "snapshot": a.subnet.generation if a.subnet is not None else None,
                "groups": len(a.groups.groups), "groups_pending": self.groups_pending,
                "subscriptions": len(a.informs.subs), "reports_sent": a.informs.sent}

    def requests(self) -> list[dict]:
        """The requests answered by attribute, method and the answer's status (the metrics'
        `smagent_sa_requests_total`)."""
        return [{"attribute": _attribute_name(attr), "method": method_name(method, SA_CLASS),
                 "status": _status_name(status), "count": n}
                for (attr, method, status), n in sorted(self.agent.requests.items())]

    def _send(self, out: list[tuple[bytes, Address]]) -> None:
        for raw, addr in out:
            try:  # a Report waits in the kernel for its ReportResp, or that is dropped
                self.d.t.respond(raw, addr, wait_ms=_REPORT_WAIT_MS if raw[3] == Method.REPORT else 0)
            except SmagentError as e:  # never fatal: we may be inside a sweep's batch
                log.warning("SA answer to %s not sent: %s", addr.describe(), e)

    def _sms_seen(self) -> list[tuple[int, SMInfo]]:
        """(LID, SMInfo) of every SM we know: ours first, then the others as they last answered."""
        d = self.d
        me = d.own_sminfo()
        if me is None:
            return []
        out = [me]
        out += [(p.lid, SMInfo(guid=p.guid, sm_key=0, act_count=p.act_count, priority=p.priority, sm_state=p.state))
                for p in d.peers.values()]
        return out


def _attribute_name(attr: int) -> str:
    """An SA attribute as IBA names it (the record's class name), its ID if unknown."""
    if attr == CLASS_PORT_INFO:
        return "ClassPortInfo"
    try:
        return record_class(attr).__name__
    except MadError:
        return f"{attr:#06x}"


def _status_name(word: int) -> str:
    """"success", an SA status (ERR_NO_RECORDS, ...), or the MAD status word in hex."""
    if word == 0:
        return "success"
    if not word & 0xFF and word >> 8 in SaStatus._value2member_map_:
        return SaStatus(word >> 8).name
    return f"{word:#06x}"
