"""Port counters over Performance Management (class 0x04): LID-routed GMPs to each port
agent's QP1 (`Address.gsi`, Q_Key 0x80010000), sent in batches through the transport's
window.

What a port agent supports comes from its ClassPortInfo (one per LID): its
CapabilityMask says whether PortCountersExtended is answered (`perfmgt.has_extended`)
and whether PortSelect 0xFF reads the sum of every port (AllPortSelect). The fabric
sweep (`sweep`) reads one sum per switch that supports it and reads that switch's
ports one by one only when the sum exceeds a threshold, as ibqueryerrors does: a clean
switch costs two GMPs whatever its radix.

The counters themselves are one table, `COUNTERS`: the IBA name (what perfquery
prints), the field, whether it is an error counter, the ibqueryerrors default threshold
and the Prometheus metric name. Nothing here writes configuration: clearing counters
(`clear`) changes no switch's behaviour, so it is neither backed up nor journalled.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from mad import gmp, perfmgt
from mad.attributes import AttrID, NodeInfo, NodeType, PortInfo
from mad.codes import WIDTHS, active_speed, rate_text
from mad.forwarding import portinfo_modifier
from mad.gmp import ClassPortInfo
from mad.perfmgt import ALL_PORTS, PerfCap, PortCounters, PortCountersExtended
from mad.header import Method
from mad.smp import next_tid
from smagent.discovery import targets
from smagent.discovery import DNode, Topology
from smagent.errors import BadInput
from smagent.transport.address import Address
from smagent.transport.base import Reply, Request, Transport, TransportError


@dataclasses.dataclass(frozen=True)
class Counter:
    iba: str  # the IBA name, as perfquery prints it
    field: str  # the PortCounters field
    metric: str  # the Prometheus name (a counter: "_total")
    threshold: int | None = None  # error counters: ibqueryerrors' default threshold
    scale: int = 1  # data counters count 4-byte words: bytes = words * 4
    # where the counter is read: "basic" PortCounters only, "both" (PortCountersExtended has
    # it 64 bits wide, preferred where the agent answers it), "extended" only there
    source: str = "basic"


COUNTERS = (
    Counter("SymbolErrorCounter", "symbol_error_counter", "smagent_port_symbol_errors_total", 10),
    Counter("LinkErrorRecoveryCounter", "link_error_recovery_counter",
            "smagent_port_link_error_recoveries_total", 10),
    Counter("LinkDownedCounter", "link_downed_counter", "smagent_port_link_downed_total", 10),
    Counter("PortRcvErrors", "port_rcv_errors", "smagent_port_receive_errors_total", 10),
    Counter("PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors",
            "smagent_port_receive_remote_physical_errors_total", 100),
    Counter("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors",
            "smagent_port_receive_switch_relay_errors_total", 100),
    Counter("PortXmitDiscards", "port_xmit_discards", "smagent_port_transmit_discards_total", 100),
    Counter("PortXmitConstraintErrors", "port_xmit_constraint_errors",
            "smagent_port_transmit_constraint_errors_total", 100),
    Counter("PortRcvConstraintErrors", "port_rcv_constraint_errors",
            "smagent_port_receive_constraint_errors_total", 100),
    Counter("LocalLinkIntegrityErrors", "local_link_integrity_errors",
            "smagent_port_local_link_integrity_errors_total", 10),
    Counter("ExcessiveBufferOverrunErrors", "excessive_buffer_overrun_errors",
            "smagent_port_excessive_buffer_overrun_errors_total", 10),
    Counter("VL15Dropped", "vl15_dropped", "smagent_port_vl15_dropped_total", 100),
    Counter("PortXmitWait", "port_xmit_wait", "smagent_port_transmit_wait_total", 1000),
    Counter("QP1Dropped", "qp1_dropped", "smagent_port_qp1_dropped_total"),
    Counter("PortXmitData", "port_xmit_data", "smagent_port_transmit_data_bytes_total", scale=4, source="both"),
    Counter("PortRcvData", "port_rcv_data", "smagent_port_receive_data_bytes_total", scale=4, source="both"),
    Counter("PortXmitPkts", "port_xmit_pkts", "smagent_port_transmit_packets_total", source="both"),
    Counter("PortRcvPkts", "port_rcv_pkts", "smagent_port_receive_packets_total", source="both"),
    Counter("PortUnicastXmitPkts", "port_unicast_xmit_pkts", "smagent_port_unicast_transmit_packets_total",
            source="extended"),
    Counter("PortUnicastRcvPkts", "port_unicast_rcv_pkts", "smagent_port_unicast_receive_packets_total",
            source="extended"),
    Counter("PortMulticastXmitPkts", "port_multicast_xmit_pkts", "smagent_port_multicast_transmit_packets_total",
            source="extended"),
    Counter("PortMulticastRcvPkts", "port_multicast_rcv_pkts", "smagent_port_multicast_receive_packets_total",
            source="extended"),
)
ERROR_COUNTERS = tuple(c for c in COUNTERS if c.threshold is not None)
DEFAULT_THRESHOLDS: dict[str, int] = {c.iba: c.threshold for c in ERROR_COUNTERS if c.threshold is not None}
_BY_FIELD = {c.field: c for c in COUNTERS}


def iba_names(value: PortCounters | PortCountersExtended, *, additional: bool = False) -> dict[str, int]:
    """A counters value as perfquery names its fields (PortSelect, SymbolErrorCounter, ...).
    PortCountersExtended's CounterSelect2 and 64-bit error counters only with
    ``additional`` (where ClassPortInfo.CapabilityMask2 says the agent keeps them, as
    perfquery -x shows them)."""
    out = {}
    names = list(value.LAYOUT.names)
    if isinstance(value, PortCountersExtended):  # perfquery -x: the additional ones after the rest, if at all
        names = [n for n in names if n not in perfmgt.ADDITIONAL_EXTENDED]
        names += list(perfmgt.ADDITIONAL_EXTENDED) if additional else []
    for name in names:
        if name.startswith("reserved"):
            continue
        c = _BY_FIELD.get(name)
        out[c.iba if c else _camel(name)] = getattr(value, name)
    return out


def _camel(field: str) -> str:
    special = {"qp1": "QP1", "vl15": "VL15"}
    return "".join(special.get(w, w.capitalize()) for w in field.split("_"))


def parse_thresholds(items: Iterable[str]) -> dict[str, int]:
    """``NAME=N`` items (IBA counter names, as ibqueryerrors' threshold file) over the
    defaults; BadInput naming what is wrong."""
    out = dict(DEFAULT_THRESHOLDS)
    by_lower = {k.lower(): k for k in out}
    for item in items:
        name, sep, value = item.partition("=")
        key = by_lower.get(name.strip().lower())
        if not sep or key is None:
            raise BadInput(f"--threshold {item!r}: expected NAME=N with NAME one of {', '.join(out)}")
        try:
            n = int(value, 0)
        except ValueError:
            raise BadInput(f"--threshold {item!r}: {value!r} is not a number") from None
        if n < 0:
            raise BadInput(f"--threshold {item!r}: a threshold is 0 or more")
        out[key] = n
    return out


def _gmp(raw: bytes, lid: int) -> Request:
    return Request.gmp(raw, Address.gsi(lid))


def class_port_infos(t: Transport, lids: Sequence[int]) -> dict[int, ClassPortInfo | TransportError]:
    """PerfGet(ClassPortInfo) of each LID's port agent, in one batch: LID -> the value, or
    the error it got (no answer, a status)."""
    replies = t.execute([_gmp(perfmgt.get(gmp.CLASS_PORT_INFO, tid=next_tid()), lid) for lid in lids])
    return {lid: _value(r, ClassPortInfo) for lid, r in zip(lids, replies)}


def _value(r: Reply, kind):
    return r.error if r.error is not None else r.gmp(kind)


def read(t: Transport, ports: Sequence[tuple[int, int]], *, extended: bool = False
         ) -> list[PortCounters | PortCountersExtended | TransportError]:
    """PortCounters (PortCountersExtended with ``extended``) of each (LID, port) in one
    batch, in order: the value or the error it got. Port `ALL_PORTS` reads the sum."""
    get = perfmgt.port_counters_extended_get if extended else perfmgt.port_counters_get
    kind = PortCountersExtended if extended else PortCounters
    replies = t.execute([_gmp(get(port, tid=next_tid()), lid) for lid, port in ports])
    return [_value(r, kind) for r in replies]


def clear(t: Transport, ports: Sequence[tuple[int, int]], *, extended: bool = False) -> None:
    """Clear every counter of each (LID, port) (`ALL_PORTS`: of every port), as
    ``perfquery -r`` does; the first failure raised."""
    t.execute([_gmp(perfmgt.port_counters_clear(port, tid=next_tid(), extended=extended), lid)
               for lid, port in ports], check=True)


def exceeded(value: PortCounters, thresholds: dict[str, int]) -> dict[str, int]:
    """The error counters of ``value`` above their thresholds: IBA name -> value."""
    return {c.iba: v for c in ERROR_COUNTERS
            if (v := getattr(value, c.field)) > thresholds.get(c.iba, c.threshold or 0)}


@dataclasses.dataclass
class PortReading:
    """One port's counters with where it is: the node, its port, the link and the far end."""
    node_guid: int
    node: str  # the node description
    port: int
    lid: int
    counters: PortCounters
    link: str = ""  # "4xQDR"
    remote_guid: int | None = None
    remote: str = ""
    remote_port: int | None = None
    exceeded: dict[str, int] = dataclasses.field(default_factory=dict)
    extended: PortCountersExtended | None = None  # read where the agent answers it (metrics)
    switch: bool = False  # the node is a switch
    width: str = ""  # the active link: "4x"
    speed: str = ""  # "QDR"
    rate_gbps: float = 0.0  # its signalling rate, width times speed
    state: int = 0  # PortInfo.PortState as read

    def value(self, c: Counter) -> int | None:
        """Counter ``c`` of this port: the 64-bit one where it was read, else PortCounters';
        None when not read (an extended-only counter of an agent without it)."""
        if c.source != "basic" and self.extended is not None:
            return getattr(self.extended, c.field)
        return None if c.source == "extended" else getattr(self.counters, c.field)

    def to_json(self) -> dict:
        return {"node_guid": f"{self.node_guid:#018x}", "node": self.node, "port": self.port, "lid": self.lid,
                "link": self.link, "remote_guid": None if self.remote_guid is None else f"{self.remote_guid:#018x}",
                "remote_node": self.remote, "remote_port": self.remote_port, "exceeded": self.exceeded,
                "counters": iba_names(self.counters)}


@dataclasses.dataclass
class Health:
    """A counter sweep: every port read, the ones over a threshold, what could not be read
    (no answer, an error status, no LID)."""
    readings: list[PortReading]
    thresholds: dict[str, int]
    unanswered: list[str] = dataclasses.field(default_factory=list)
    gmps: int = 0

    @property
    def erring(self) -> list[PortReading]:
        return [r for r in self.readings if r.exceeded]


def _agents(topo: Topology) -> list[tuple[DNode, int, int, list[int]]]:
    """(node, LID, PortSelect owner port, the node's linked ports) per port agent: a
    switch has one (port 0's LID, every port), a CA one per port with a LID."""
    linked: dict[int, list[int]] = {}
    for g, p in topo.links:
        linked.setdefault(g, []).append(p)
    out = []
    for n in topo.nodes.values():
        ports = sorted(linked.get(n.guid, []))
        if n.is_switch:
            out.append((n, n.lid(0), 0, ports))
        else:
            out.extend((n, n.lid(p), p, [p]) for p in ports)
    return out


def sweep(t: Transport, topo: Topology, thresholds: dict[str, int] | None = None, *, every_port: bool = False) -> Health:
    """Read the counters of every linked port of every node of ``topo`` (a discovered
    `Topology` whose ports have LIDs). ClassPortInfo first (one per port agent); then a
    switch that supports AllPortSelect gets one summed read, and its ports are read one by
    one only when the sum exceeds a threshold. ``every_port`` (metrics): every port read
    one by one, and PortCountersExtended too where the CapabilityMask says it is answered."""
    thresholds = dict(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    sent0 = t.stats.sent
    health = Health([], thresholds)
    agents = []
    for a in _agents(topo):  # a port without a LID has no address for a GMP (no SM yet?)
        if a[1]:
            agents.append(a)
        else:
            health.unanswered.append(f"{a[0].description!r} port {a[2]}: no LID")
    caps = class_port_infos(t, [lid for _, lid, _, _ in agents])
    summed = [(n, lid, ports) for n, lid, own, ports in agents
              if not every_port and own == 0 and len(ports) > 1 and _cap(caps[lid]) & PerfCap.ALL_PORT_SELECT]
    summed_lids = {lid for _, lid, _ in summed}
    per_port = [(n, lid, p) for n, lid, _, ports in agents for p in ports
                if not isinstance(caps[lid], TransportError) and lid not in summed_lids]
    for (n, lid, ports), value in zip(summed, read(t, [(lid, ALL_PORTS) for _, lid, _ in summed])):
        if isinstance(value, TransportError) or exceeded(value, thresholds):  # type: ignore[arg-type]
            per_port.extend((n, lid, p) for p in ports)
    for n, lid, _, _ in agents:
        if isinstance(cpi := caps[lid], TransportError):
            health.unanswered.append(f"{n.description!r} LID {lid}: {cpi}")
    for (n, lid, p), value in zip(per_port, read(t, [(lid, p) for _, lid, p in per_port])):
        if isinstance(value, TransportError):
            health.unanswered.append(f"{n.description!r} port {p} LID {lid}: {value}")
            continue
        health.readings.append(_reading(topo, n, p, lid, value, thresholds))  # type: ignore[arg-type]
    if every_port:
        _read_extended(t, health, caps)
    health.gmps = t.stats.sent - sent0
    return health


def _read_extended(t: Transport, health: Health, caps: dict[int, ClassPortInfo | TransportError]) -> None:
    """PortCountersExtended of every reading whose agent answers it, in one batch."""
    wanted = [r for r in health.readings if perfmgt.has_extended(_cap(caps[r.lid]))]
    for r, value in zip(wanted, read(t, [(r.lid, r.port) for r in wanted], extended=True)):
        if isinstance(value, TransportError):
            health.unanswered.append(f"{r.node!r} port {r.port} LID {r.lid}: {value}")
        else:
            r.extended = value  # type: ignore[assignment]


def _cap(cpi: ClassPortInfo | TransportError) -> int:
    return 0 if isinstance(cpi, TransportError) else cpi.capability_mask


def _reading(topo: Topology, n: DNode, port: int, lid: int, value: PortCounters, thresholds: dict[str, int]) -> PortReading:
    pi = n.ports.get(port)
    far = topo.neighbor(n.guid, port)
    rn = topo.nodes.get(far[0]) if far else None
    width = WIDTHS.get(pi.link_width_active) if pi is not None else None
    speed = active_speed(pi) if pi is not None else None
    return PortReading(n.guid, n.description, port, lid, value, rate_text(pi) if pi is not None else "",
                       far[0] if far else None, rn.description if rn else "", far[1] if far else None,
                       exceeded(value, thresholds), switch=n.is_switch, width=width[1] if width else "",
                       speed=speed[0] if speed else "",
                       rate_gbps=width[2] * speed[1] if width and speed else 0.0,
                       state=pi.port_state if pi is not None else 0)


def check_transport(t: Transport) -> None:
    """BadInput unless ``t`` reaches port agents: PerfMgt needs a live fabric (umad)."""
    if t.name != "umad":
        raise BadInput(f"port counters need a live fabric (--transport umad): the {t.name} transport carries "
                       "SMPs only, no Performance Management")


@dataclasses.dataclass
class PortCounterRead:
    """What `read_port` got: the port agent's LID, the port, its CapabilityMask, the counters."""
    lid: int
    port: int
    capability_mask: int
    counters: PortCounters | PortCountersExtended
    capability_mask2: int = 0


def locate(t: Transport, target: str | None, port: int | None, *, topology=None) -> tuple[int, int]:
    """(LID, port) of the port agent ``target`` names (None: the local port), as perfquery
    picks them: without ``port``, the port the target's LID belongs to (a switch: 0; a
    CA: the port reached). A DR path, GUID or description is found by directed route and
    its LID read from PortInfo."""
    if target is None:
        local = t.local_port()  # type: ignore[attr-defined]
        if not local.base_lid:
            raise BadInput("the local port has no LID yet: is an SM running?")
        return local.base_lid, local.port if port is None else port
    tgt = targets.resolve_target(target, t, topology=topology)
    (ni,) = t.execute([tgt.request(Method.GET, AttrID.NODE_INFO)], check=True)
    info = ni.value(NodeInfo)
    if port is not None and port != ALL_PORTS and port > info.num_ports:  # as `lft set`: bad input, exit 2
        raise BadInput(f"--port {port}: {tgt.describe()} has ports 1..{info.num_ports}"
                       + (" (0: the switch itself)" if info.node_type == NodeType.SWITCH else ""))
    own = 0 if info.node_type == NodeType.SWITCH else info.local_port_num  # a switch's LID is port 0's
    lid = tgt.lid
    if lid is None:
        (pi,) = t.execute([tgt.request(Method.GET, AttrID.PORT_INFO, portinfo_modifier(own))], check=True)
        lid = pi.value(PortInfo).lid
        if not lid:
            raise BadInput(f"{tgt.describe()} has no LID yet: is an SM running?")
    return lid, own if port is None else port


def read_port(t: Transport, lid: int, port: int, *, extended: bool = False, reset: bool = False) -> PortCounterRead:
    """One port's counters, as perfquery reads them: ClassPortInfo, then PortCounters (or
    PortCountersExtended, refused when the CapabilityMask says it is not answered); with
    ``reset``, the counters read are then cleared (``perfquery -r``)."""
    cpi = class_port_infos(t, [lid])[lid]
    if isinstance(cpi, TransportError):
        raise cpi
    if extended and not perfmgt.has_extended(cpi.capability_mask):
        raise BadInput(f"LID {lid}: the port agent does not answer PortCountersExtended "
                       f"(CapabilityMask {cpi.capability_mask:#06x})")
    if port == ALL_PORTS and not cpi.capability_mask & PerfCap.ALL_PORT_SELECT:
        raise BadInput(f"LID {lid}: the port agent does not support AllPortSelect "
                       f"(CapabilityMask {cpi.capability_mask:#06x})")
    (value,) = read(t, [(lid, port)], extended=extended)
    if isinstance(value, TransportError):
        raise value
    if reset:
        clear(t, [(lid, port)], extended=extended)
    return PortCounterRead(lid, port, cpi.capability_mask, value, cpi.capability_mask2)


def text(r: PortCounterRead) -> str:
    """perfquery's text: the header line, then one dotted line per field."""
    if isinstance(r.counters, PortCountersExtended):
        head = (f"# Port extended counters: Lid {r.lid} port {r.port} "
                f"(CapMask: {r.capability_mask:#06x} CapMask2: {r.capability_mask2:#09x})")
    else:
        head = f"# Port counters: Lid {r.lid} port {r.port} (CapMask: {r.capability_mask:#06x})"
    lines = [head]
    wide = isinstance(r.counters, PortCountersExtended)  # its CounterSelect2 has 32 bits, PortCounters' 8
    for name, value in iba_names(r.counters, additional=perfmgt.has_extended_errors(r.capability_mask2)).items():
        shown = (f"{value:#06x}" if name == "CounterSelect" else
                 f"{value:#0{10 if wide else 4}x}" if name == "CounterSelect2" else value)
        lines.append(f"{name}:".ljust(33, ".") + str(shown))
    return "\n".join(lines)


__all__ = ["COUNTERS", "ERROR_COUNTERS", "DEFAULT_THRESHOLDS", "Counter", "Health", "PortReading", "class_port_infos",
           "read", "clear", "exceeded", "sweep", "parse_thresholds", "iba_names", "check_transport", "read_port",
           "PortCounterRead", "text"]
