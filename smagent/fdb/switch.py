"""A switch as the table code addresses it: by DR path (what discovery knows) or by a
`smagent.discovery.targets.Target` (a LID or path an operator gave); its facts; the order in which
table SMPs go out; the reads the table commands start with."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar, Union

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import AttrID, Attribute, NodeDescription, NodeInfo, NodeType, PortInfo, SwitchInfo
from mad.header import Method
from smagent.model.lftdump import NODE_TYPE_NAMES
from smagent.discovery.targets import Target
from smagent.transport.base import Reply, Request, Transport
from smagent.errors import BadInput, FabricFailure

if TYPE_CHECKING:
    from smagent.discovery import Topology


class TableFailure(FabricFailure):
    """The fabric failed a table read or write (exit 3)."""


class TableBadInput(BadInput):
    """A table command asked for something the switch cannot do (exit 2, nothing sent)."""


# A switch's address: a DR path tuple (discovery) or a Target (an operator's argument)
Where = Union[tuple[int, ...], Target]
C = TypeVar("C")


class TableUnit(Protocol):
    """One unit of a table write (a BlockChange, MftChange, RftChange)."""
    @property
    def switch(self) -> int: ...
    @property
    def block(self) -> int: ...
    @property
    def path(self) -> Where: ...


K = TypeVar("K", bound=TableUnit)


def request(where: Where, method: int, attr_id: int, modifier: int = 0,
            value: Attribute | bytes | None = None) -> Request:
    """An SMP to a switch addressed by a DR path tuple or by a Target."""
    if isinstance(where, Target):
        return where.request(method, attr_id, modifier, value)
    return Request.dr(method, attr_id, where, modifier, value)


def where_str(where: Where) -> str:
    return where.describe() if isinstance(where, Target) else "DR " + ",".join(map(str, where))


def per_switch(errors: list[Any], keys: list[Any]) -> dict[Any, list[Any]]:
    """{switch: [its errors, in order]}: ``keys`` are the switches of ``errors``, in the
    same order (a batch's failures, grouped so a switch that stopped answering is one
    report, not one per table unit)."""
    out: dict = {}
    for g, e in zip(keys, errors):
        out.setdefault(g, []).append(e)
    return out


def failed_units_lines(failures: list[Any], unit: str) -> list[str]:
    """One line per switch for table units that got no (good) answer: ``failures`` holds
    (switch name, which unit ("3", "0 position 1"), error[, the line when it is the
    switch's only failure]) in order; ``unit`` names the kind ("LFT block"). A single
    failure reads as before (default "NAME UNIT WHICH: ERROR"); several, as one line
    naming how many and the first error."""
    by: dict[str, list[tuple[str, Any, str]]] = {}
    for name, label, err, *alone in failures:
        by.setdefault(name, []).append((label, err, alone[0] if alone else f"{name} {unit} {label}: {err}"))
    out = []
    for name, items in by.items():
        if len(items) == 1:
            out.append(items[0][2])
            continue
        labels = [label for label, _e, _a in items]
        shown = ", ".join(labels[:4]) + (f" (+{len(labels) - 4} more)" if len(labels) > 4 else "")
        out.append(f"{name}: {len(items)} {unit}s failed ({shown}); the first: {items[0][1]}")
    return out


def read_units(transport: Transport, wanted: Sequence[tuple[Any, ...]], attr_id: int, modifier: Callable[..., int],
               content: Callable[[Any], C], label: Callable[..., str]) -> tuple[dict[Any, C], list[str]]:
    """Get table units: ``wanted`` holds (switch, where, *unit) tuples (unit: the block,
    or block and position), sent as one batch. Returns ({(switch, *unit): content(value)}
    for those that answered, [errors naming where and ``label(*unit)``])."""
    reqs = [request(w[1], Method.GET, attr_id, modifier(*w[2:])) for w in wanted]
    got: dict[Any, C] = {}
    errors: list[str] = []
    for w, r in zip(wanted, transport.execute(reqs)):
        if r.ok:
            got[(w[0], *w[2:])] = content(r.value())
        else:
            errors.append(f"{where_str(w[1])}: {label(*w[2:])}: {r.error}")
    return got, errors


def set_units(transport: Transport, order: Sequence[K], attr_id: int, modifier: Callable[[K], int],
              value: Callable[[K], Attribute | bytes]) -> list[tuple[K, Reply]]:
    """SubnSet every change of ``order``; (change, reply) pairs. The reply's value is what
    the switch now holds: the caller checks it against what it wrote."""
    reqs = [request(c.path, Method.SET, attr_id, modifier(c), value(c)) for c in order]
    return list(zip(order, transport.execute(reqs)))


def interleave(changes: Sequence[K]) -> list[K]:
    """Order writes round-robin over switches (block 0 of every switch, then block 1, ...)
    so the window stays full; within a switch, by block and position, stable."""
    by_sw: dict[int, list[K]] = {}
    for c in changes:
        by_sw.setdefault(c.switch, []).append(c)
    queues = [sorted(q, key=lambda c: (c.block, getattr(c, "position", 0))) for q in by_sw.values()]
    out: list[K] = []
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


@dataclasses.dataclass
class SwitchFacts:
    """What a plan needs to know about a switch (from discovery or from Gets)."""
    guid: int
    name: str
    num_ports: int
    switch_info: SwitchInfo
    path: tuple[int, ...] | None = None
    target: Target | None = None

    @property
    def lft_cap(self) -> int:
        return self.switch_info.linear_fdb_cap

    @property
    def lft_top(self) -> int:
        return min(self.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX)

    @property
    def max_lid(self) -> int:
        """The highest LID this switch's LFT can hold."""
        return min(self.lft_cap - 1, fw.UNICAST_LID_MAX)

    def where(self) -> Where:
        if self.target is not None:
            return self.target
        assert self.path is not None, "a switch has a path or a target"
        return self.path


def facts_from_topology(topo: Topology) -> dict[int, SwitchFacts]:
    return {n.guid: SwitchFacts(n.guid, n.description, n.num_ports, n.switch_info, path=n.path)
            for n in topo.switches() if n.switch_info is not None}


@dataclasses.dataclass
class SwitchRead:
    facts: SwitchFacts
    node_info: NodeInfo
    port0: PortInfo | None  # PortInfo of port 0, if it answered
    local_info: NodeInfo | None  # NodeInfo of the local node, if asked and answered


def read_switch(transport: Transport, target: Target, *, for_set: bool = False) -> SwitchRead:
    """NodeInfo, NodeDescription, SwitchInfo of TARGET in one batch (plus, for a Set, port
    0's PortInfo and the local node's NodeInfo for the master-SM check)."""
    reqs = [target.request(Method.GET, AttrID.NODE_INFO), target.request(Method.GET, AttrID.NODE_DESCRIPTION),
            target.request(Method.GET, AttrID.SWITCH_INFO)]
    if for_set:
        reqs += [target.request(Method.GET, AttrID.PORT_INFO, fw.portinfo_modifier(0)),
                 Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,)))]
    replies = transport.execute(reqs)
    ni_r = replies[0]
    if not ni_r.ok:
        raise TableFailure(f"{target.describe()}: NodeInfo: {ni_r.error}")
    ni = ni_r.value(NodeInfo)
    if ni.node_type != NodeType.SWITCH:
        kind = NODE_TYPE_NAMES.get(ni.node_type, f"node type {ni.node_type}")
        raise TableBadInput(f"{target.describe()} is not a switch (it is a {kind}, GUID 0x{ni.node_guid:016x})")
    for r, what in ((replies[1], "NodeDescription"), (replies[2], "SwitchInfo")):
        if not r.ok:
            raise TableFailure(f"{target.describe()}: {what}: {r.error}")
    desc = transport.names.name(ni.node_guid, replies[1].value(NodeDescription).node_string)
    facts = SwitchFacts(ni.node_guid, desc, ni.num_ports, replies[2].value(SwitchInfo), path=target.path, target=target)
    port0 = local = None
    if for_set:
        port0 = replies[3].value(PortInfo) if replies[3].ok else None
        local = replies[4].value(NodeInfo) if replies[4].ok else None
    return SwitchRead(facts, ni, port0, local)
