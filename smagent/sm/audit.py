"""The audit (issue 40.4): the running SM re-reads, a few Gets at a time, every LFT block
and MFT unit it programmed and every LID-carrying port's PortInfo (LID, LMC, state), and
compares each with what it knows it left (the subnet model, `model.subnet.Subnet`). What
differs is drift: someone wrote behind our back (an `lft set`, a host's PortInfo Set that
moved another host's LID). The daemon puts what was read into a fork of the model and
repairs with it: the sweep then writes back only what differs.

The rate is a share of the light sweeps' Gets (`DaemonOptions.audit_share`): each light
sweep earns ``share x its Gets`` credits and the audit reads that many items (fractions
carried over), round robin over the kinds, so an idle daemon sends at most ``share`` more
SMPs. A full pass takes ``items / (share x light sweep Gets)`` light sweeps."""
from __future__ import annotations

import dataclasses
import itertools
import logging
from typing import TYPE_CHECKING, Any

from mad.attributes import AttrID, LinearForwardingTable, MulticastForwardingTable, PortInfo, PortState, SMState
from mad import forwarding as fw
from mad.header import Method
from smagent.transport.base import Request
from smagent.model.subnet import PerModel

if TYPE_CHECKING:
    from smagent.sm.duties import Duties

log = logging.getLogger("smagent.sm")
DEFAULT_SHARE = 0.01  # 1 % more SMPs than an idle daemon (issue 40's budget)

Item = tuple  # ("lft", switch, block) | ("mft", switch, block, position) | ("port", node, port)


@dataclasses.dataclass
class Drift:
    item: Item
    what: str  # for the log and the status
    value: Any  # what was read (bytes, masks or a PortInfo)


def items(known) -> list[Item]:
    """Everything the audit reads for ``known``, the kinds interleaved (round robin)."""
    lft = [("lft", g, b) for g, b in sorted(known.lft_blocks)]
    mft = [("mft", g, b, p) for g, b, p in sorted(known.mft)]
    ports = [("port", n.guid, p) for n, p in known.end_ports if p in n.ports]
    out: list[Item] = []
    for group in itertools.zip_longest(ports, lft, mft):
        out += [i for i in group if i is not None]
    return out


def count(known) -> int:
    """How many `items(known)` there are, without making them (the status asks at every
    publish, and right after a repair the list is not made yet)."""
    return len(known.lft_blocks) + len(known.mft) + sum(1 for n, p in known.end_ports if p in n.ports)


def request(item: Item, topo) -> Request | None:
    n = topo.nodes.get(item[1])
    if n is None:
        return None
    if item[0] == "lft":
        return Request.dr(Method.GET, AttrID.LINEAR_FORWARDING_TABLE, n.path, fw.lft_modifier(item[2]))
    if item[0] == "mft":
        return Request.dr(Method.GET, AttrID.MULTICAST_FORWARDING_TABLE, n.path, fw.mft_modifier(item[2], item[3]))
    if item[2] not in n.ports or (not n.is_switch and item[2] not in n.port_paths):
        return None
    return Request.dr(Method.GET, AttrID.PORT_INFO, n.path_to_port(item[2]), fw.portinfo_modifier(item[2]))


def compare(item: Item, reply, known) -> Drift | None:
    """The drift ``reply`` shows against ``known`` (None: as known, or no answer: the light
    sweeps and traps see what no longer answers)."""
    if not reply.ok:
        return None
    topo = known.topology
    name = topo.nodes[item[1]].description
    if item[0] == "lft":
        got = bytes(reply.value(LinearForwardingTable).ports)
        want = known.lft_blocks.get((item[1], item[2]))
        if want is None or got == want:
            return None
        lids = [item[2] * fw.LFT_BLOCK_SIZE + i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        return Drift(item, f"{name} LFT block {item[2]}: LID(s) {', '.join(map(str, lids[:4]))}"
                           f"{' ...' if len(lids) > 4 else ''} changed", got)
    if item[0] == "mft":
        masks = list(reply.value(MulticastForwardingTable).port_masks)
        want_m = known.mft.get((item[1], item[2], item[3]))
        if want_m is None or masks == list(want_m):
            return None
        return Drift(item, f"{name} MFT block {item[2]} position {item[3]} changed", masks)
    pi = reply.value(PortInfo)
    old = topo.nodes[item[1]].ports.get(item[2])
    if old is None or (pi.lid, pi.lmc, pi.port_state) == (old.lid, old.lmc, old.port_state):
        return None
    return Drift(item, f"{name} port {item[2]}: LID {old.lid} -> {pi.lid}, LMC {old.lmc} -> {pi.lmc}, "
                       f"state {old.port_state} -> {pi.port_state}", pi)


def patched(known, drifts: list[Drift]):
    """``known`` with what the audit read in place of what it held (a copy): the repair
    plans against it and writes back what differs. None when a port went down or lost
    its state (a link change: a full sweep finds it)."""
    fork = known.fork()  # a copy that leaves ``known`` as it is
    topo = fork.topology
    lft: dict = {}
    mft: dict = {}
    for d in drifts:
        if d.item[0] == "lft":
            lft[(d.item[1], d.item[2])] = d.value
        elif d.item[0] == "mft":
            mft[(d.item[1], d.item[2], d.item[3])] = d.value
        else:
            pi = d.value
            if pi.port_state < PortState.ACTIVE:
                return None
            topo.nodes[d.item[1]].ports[d.item[2]] = pi
    return fork.with_tables(lft, mft)


def written_back(known, drift: Drift) -> bool:
    """Whether the repair that left ``known`` wrote ``drift``'s item back: what it holds now
    is not what the audit read. Not so when the plan keeps it as found (an MFT entry of an
    MLID outside the configured groups, kept unless pruning) or no longer covers it."""
    if known is None:
        return False
    i = drift.item
    if i[0] == "lft":
        now = known.lft_blocks.get((i[1], i[2]))
    elif i[0] == "mft":
        now = known.mft.get((i[1], i[2], i[3]))
    else:
        n = known.topology.nodes.get(i[1])
        pi = n.ports.get(i[2]) if n is not None else None
        return pi is not None and (pi.lid, pi.lmc, pi.port_state) != (drift.value.lid, drift.value.lmc,
                                                                      drift.value.port_state)
    return now is not None and list(now) != list(drift.value)


class Audit:
    """Where the round robin is, the credits earned, and what was found."""

    def __init__(self, share: float = DEFAULT_SHARE):
        self.share = share
        self.credit = 0.0
        self.cursor = 0
        self.reads = self.drifts = self.passes = 0
        self.last: list[str] = []  # the last drifts found
        # built once per known state (a million blocks on a large fabric); `items` looked up
        # when called, as the module holds it
        self._items = PerModel(lambda known: items(known))
        self._count = PerModel(count)  # the status asks often

    def items(self, known) -> list[Item]:
        """`items(known)`, kept while the known state is the same object."""
        return self._items(known) if known is not None else []

    def earn(self, light_gets: int) -> int:
        """Credits for a light sweep of ``light_gets`` Gets; how many items to read now."""
        self.credit += self.share * light_gets
        n = int(self.credit)
        self.credit -= n
        return n

    def run(self, transport, known, count: int) -> list[Drift]:
        """Read the next ``count`` items of ``known`` (round robin); the drifts found."""
        todo = self.items(known)
        if not todo or count <= 0:
            return []
        count = min(count, len(todo))
        picked = []
        for _ in range(count):
            self.cursor %= len(todo)
            picked.append(todo[self.cursor])
            self.cursor += 1
            self.passes += self.cursor == len(todo)
        reqs = [(i, request(i, known.topology)) for i in picked]
        reqs = [(i, r) for i, r in reqs if r is not None]
        replies = transport.execute([r for _i, r in reqs])
        self.reads += len(reqs)
        found = [d for (i, _r), rep in zip(reqs, replies) if (d := compare(i, rep, known)) is not None]
        if found:
            self.drifts += len(found)
            self.last = [d.what for d in found]
            for d in found:
                log.warning("audit: drift: %s", d.what)
        return found

    def repaired(self, known, drifts: list[Drift]) -> int:
        """How many of ``drifts`` the repair that left ``known`` covered; the others logged."""
        out = [d for d in drifts if not written_back(known, d)]
        for d in out:
            log.warning("audit: %s: the plan keeps it as found (not written back)", d.what)
        return len(drifts) - len(out)

    def status(self, known) -> dict:
        return {"share": self.share, "reads": self.reads, "drifts": self.drifts, "passes": self.passes,
                "items": self._item_count(known), "last": self.last}

    def _item_count(self, known) -> int | None:
        """How many items ``known`` has: its list's length if built, else counted."""
        if known is None:
            return None
        built = self._items.held(known)
        return len(built) if built is not None else self._count(known)


def step(duties: Duties, count: int) -> None:
    """The master duties' audit after a light sweep: ``count`` Gets of what they programmed;
    drift is repaired at once (a patched known state, or a full sweep for a port change)."""
    s, known = duties.shared, duties.known
    if known is None or count <= 0 or s.sm.state != SMState.MASTER:
        return
    if not (drifts := duties.audit.run(s.t, known, count)):
        return
    s.counters.drifts_found += len(drifts)
    why = f"audit found drift: {drifts[0].what}{f' (+{len(drifts) - 1})' if len(drifts) > 1 else ''}"
    fixed = patched(known, drifts)
    if fixed is None:  # a port is down or not active: a link change, found by a full sweep
        duties.repair(why, None)
    else:
        duties.sweep(why, known=fixed)
    if duties.last_sweep and duties.last_sweep.get("ok"):
        s.counters.drifts_repaired += duties.audit.repaired(duties.known, drifts)
