"""The simulated fabric: SMPs in at a port, responses out, every hop on the way modelled.

`SimFabric.handle(raw, ingress, dlid)` takes the 256 bytes an SM at `ingress` sends (with
LRH DLID `dlid`) and returns the response as that SM receives it, or None when the
fabric loses the SMP or its response (the reason goes to `drops`; a transport turns it
into umad status 110). How SMPs travel is in `routes`, what each SMA answers in `sma`,
how switches forward in `dataplane`.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import random
import time
from typing import Callable

from mad import smp as smpcodec
from mad.attributes import AttrID, Notice, NoticeType, NodeType, Trap128Details, Trap256Details, TrapNumber
from mad.header import Method
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import MAD_SIZE
from smagent.model.fabric import Fabric
from smagent.sim import dataplane, nodes as model, routes
from smagent.sim.nodes import Dropped, SimConfigError, SimNode

DEFAULT_TOPOLOGY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "default.net")


@dataclasses.dataclass(frozen=True, slots=True)
class Drop:
    """One lost SMP: why, where, and what it was."""
    reason: str
    where: tuple | None
    what: str

    def __str__(self) -> str:
        return f"{self.what}: {Dropped(self.reason, self.where)}"


class SimFabric:
    """A fabric of simulated nodes. Build with `from_fabric` or `load`."""

    def __init__(self, nodes: dict[str, SimNode], *, seed: int = 0, drop_rate: float = 0.0):
        self.nodes = nodes
        self.drop_rate = drop_rate  # probability that any SMP is lost (fault injection)
        self.rng = random.Random(seed)
        self.clock = time.monotonic  # M_Key lease timers; tests may substitute a fake clock
        self.drops: collections.deque[Drop] = collections.deque(maxlen=1000)
        self.counters: collections.Counter[str] = collections.Counter()
        # observer(event, node name, port, hop_pointer, d) sees a directed-route SMP leave a
        # node ("out": port = exit port, hop_pointer as on that link), reach the start of its
        # directed part by LID ("lid"), reach the SMA ("sma") and the requester ("deliver").
        self.observer = None
        # SMs that receive traps: (node name, port) -> callable(raw MAD, source LID); a switch
        # sends trap 128 to its MasterSMLID when a link of its goes down or comes up
        self.trap_sinks: dict[tuple[str, int], Callable[[bytes, int], None]] = {}

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_fabric(cls, fabric: Fabric, *, node_caps: dict | None = None, seed: int = 0,
                    drop_rate: float = 0.0, **caps) -> "SimFabric":
        """Simulate `fabric`. Keyword capabilities (linear_fdb_cap=..., m_key=...) apply to
        every node they fit; `node_caps={"S1": {...}}` to one node. Precedence: defaults
        < keywords < Node.caps < node_caps."""
        return cls(model.build_nodes(fabric, caps, node_caps), seed=seed, drop_rate=drop_rate)

    @classmethod
    def load(cls, src=None, **kw) -> "SimFabric":
        """Simulate a topology file (ibsim net file or ibnetdiscover output), or text;
        None = the bundled default topology."""
        from smagent.model import netfile
        fabric = netfile.load(DEFAULT_TOPOLOGY if src is None else src)
        if not fabric.nodes:
            where = src if isinstance(src, os.PathLike) or (isinstance(src, str) and "\n" not in src) else "the topology"
            raise SimConfigError(f"{where}: no nodes (an empty or comment-only topology): nothing to simulate")
        return cls.from_fabric(fabric, **kw)

    # -- inspection ----------------------------------------------------------------------
    def node(self, name) -> SimNode:
        if isinstance(name, SimNode):
            return name
        try:
            return self.nodes[name]
        except KeyError:
            raise SimConfigError(f"no node named {name!r} in the simulated fabric") from None

    def __iter__(self):
        return iter(self.nodes.values())

    def switches(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.is_switch]

    def default_port(self) -> tuple[str, int]:
        """Where ibsim attaches its SM: the first node's port 0 if it is a switch, else
        its first cabled port (port 1 when none is)."""
        first = next(iter(self.nodes.values()))
        if first.is_switch:
            return first.name, 0
        cabled = [p for p in range(1, first.num_ports + 1) if first.peers[p] is not None]
        return first.name, cabled[0] if cabled else 1

    def resolve(self, where) -> tuple[SimNode, int]:
        """(name, port) -> (SimNode, port), checking the port can host an SM."""
        name, port = where
        node = self.node(name)
        if node.is_switch and port != 0:
            raise SimConfigError(f"{node.name!r} is a switch: an SM attaches to its port 0, not port {port}")
        if not node.port_exists(port):
            raise SimConfigError(f"{node.name!r} has ports 1..{node.num_ports}; port {port} does not exist")
        return node, port

    def port_lid(self, where) -> int:
        node, port = self.resolve(where) if not isinstance(where[0], SimNode) else where
        return node.pi[node.lid_port(port)].lid

    def lft(self, name) -> bytearray | None:
        return self.node(name).lft

    @property
    def last_drop(self) -> Drop | None:
        return self.drops[-1] if self.drops else None

    # -- fault injection and shortcuts for tests -----------------------------------------------
    def unlink(self, name, port: int):
        """Pull the cable on (name, port); both ends go DOWN. Returns the old peer's (name, port)."""
        node = self.node(name)
        if not 1 <= port <= node.num_ports:
            raise SimConfigError(f"{node.name!r} has no cable port {port}")
        peer = model.disconnect(node, port)
        if peer is not None:
            self._trap_128(node, peer[0])
        return None if peer is None else (peer[0].name, peer[1])

    def link(self, a, pa: int, b, pb: int) -> None:
        """Cable (a, pa) to (b, pb); both ports must be free. The link comes up in INIT."""
        na, nb = self.node(a), self.node(b)
        for n, p in ((na, pa), (nb, pb)):
            if not 1 <= p <= n.num_ports:
                raise SimConfigError(f"{n.name!r} has no cable port {p}")
            peer = n.peers[p]
            if peer is not None:
                raise SimConfigError(f"{n.name!r} port {p} is already cabled to {peer[0].name!r}")
        model.connect(na, pa, nb, pb)
        self._trap_128(na, nb)

    def _trap_128(self, *nodes) -> None:
        """Each switch among `nodes` reports a port state change to its master SM, as ibsim
        does: only when its port 0 has a LID and a MasterSMLID, and only if an SM there
        listens (`trap_sinks`)."""
        for node in nodes:
            if not node.is_switch:
                continue
            pi = node.pi[0]
            if not pi.lid or not pi.master_sm_lid:
                continue
            notice = Notice(is_generic=1, type=int(NoticeType.URGENT), producer_type_or_vendor_id=int(NodeType.SWITCH),
                                trap_number_or_device_id=int(TrapNumber.LINK_STATE_CHANGE), issuer_lid=pi.lid,
                                notice_toggle=0, notice_count=0,
                                data_details=Trap128Details.LAYOUT.encode(Trap128Details(lid=pi.lid)))
            self._send_trap(notice, pi.master_sm_lid)

    def bad_mkey_trap(self, node: SimNode, in_port: int, smp, slid: int | None = None) -> None:
        """Trap 256 (Bad M_Key) from the port that refused ``smp`` to its MasterSMLID, when
        the port has a LID and an SM listens there. The details name the requester (its
        SLID; DrSLID for a directed route), the method, attribute and modifier, and the key
        it carried."""
        pi = node.pi[node.lid_port(in_port)]
        if not pi.lid or not pi.master_sm_lid:
            return
        details = Trap256Details(lid=smp.dr_slid if smp.directed else (slid or 0),
                                 dr_slid=smp.dr_slid if smp.directed else 0,
                                 method=smp.method, attribute_id=smp.attribute_id,
                                 attribute_modifier=smp.attribute_modifier, m_key=smp.m_key,
                                 dr_notice=int(smp.directed), dr_hop_count=smp.hop_count if smp.directed else 0)
        notice = Notice(is_generic=1, type=int(NoticeType.SECURITY), producer_type_or_vendor_id=int(node.node_type),
                        trap_number_or_device_id=int(TrapNumber.BAD_M_KEY), issuer_lid=pi.lid, notice_toggle=0,
                        notice_count=0, data_details=Trap256Details.LAYOUT.encode(details))
        self._send_trap(notice, pi.master_sm_lid)

    def _send_trap(self, notice: Notice, master_lid: int) -> None:
        raw = smpcodec.encode(smpcodec.lid_routed(Method.TRAP, AttrID.NOTICE, 0, notice))
        for (name, port), sink in list(self.trap_sinks.items()):
            if self.port_lid((name, port)) == master_lid:
                self.counters["traps"] += 1
                sink(raw, notice.issuer_lid)

    def set_port_state(self, name, port: int, state: int) -> None:
        """Force a logical port state (no checks: for building test scenarios)."""
        self.node(name).state[port] = state

    def set_lid(self, name, port: int, lid: int, lmc: int = 0) -> None:
        """Give a port (a switch: port 0) a LID without an SMP."""
        node = self.node(name)
        pi = node.pi[node.lid_port(port)]
        pi.lid, pi.lmc = lid, lmc

    def activate_all(self) -> None:
        """Every cabled, enabled port ACTIVE (as after an SM's bring-up)."""
        for n in self.nodes.values():
            for p in range(1, n.num_ports + 1):
                if n.state[p] != model.DOWN:
                    n.state[p] = model.ACTIVE

    def attach_sm(self, where, **kw) -> None:
        """An SM at (name, port): IsSM set, SMInfo answered (guid, priority, state kwargs)."""
        node, port = self.resolve(where)
        node.attach_sm(port, **kw)

    def trace(self, src, dlid: int, **kw) -> dataplane.Trace:
        return dataplane.trace(self, src, dlid, **kw)

    # -- the SMP path ----------------------------------------------------------------------
    def handle(self, raw: bytes, ingress, dlid: int = PERMISSIVE_LID, slid: int | None = None) -> bytes | None:
        """Deliver the SMP `raw` that the SM at `ingress` = (name, port) sends with LRH
        DLID `dlid`; return the response it receives, or None if the SMP or its response
        is lost. `slid` (LID-routed only) defaults to the ingress port's LID, or to the
        permissive LID when `dlid` is permissive."""
        src, sport = ingress if isinstance(ingress[0], SimNode) else self.resolve(ingress)
        self.counters["smps"] += 1
        try:
            if self.drop_rate and self.rng.random() < self.drop_rate:
                raise Dropped("lost (drop_rate fault injection)")
            if len(raw) != MAD_SIZE:
                raise Dropped(f"{len(raw)} bytes is not a MAD")
            try:
                req = smpcodec.decode(raw)
            except MadError as e:
                raise Dropped(f"not an SMP: {e}") from None
            if req.directed:
                resp = routes.directed(self, req, src, sport, dlid)
            else:
                resp = routes.lid_routed(self, req, src, sport, dlid, slid)
        except Dropped as d:
            self.counters["dropped"] += 1
            self.drops.append(Drop(d.reason, d.where, _describe(raw)))
            return None
        self.counters["responses"] += 1
        return smpcodec.encode(resp)


def _describe(raw: bytes) -> str:
    try:
        s = smpcodec.decode(raw)
    except MadError:
        return "undecodable MAD"
    where = s.target() if s.directed else "LID-routed"
    return f"{s.method_name}({s.attribute_name}, modifier {s.attribute_modifier:#x}) {where}"
