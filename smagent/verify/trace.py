"""`smagent trace SRC DST`: the hop-by-hop route of one (source, DLID), read from the
switches' LFTs by directed route, without the SA (what ``ibtracert SRC DST`` prints).

Discovery gives the cabling, the LIDs and each switch's DR path; then, hop by hop, the
one LFT block holding the DLID is read from the switch the packet is at (one Get a
switch), and the packet follows the entry over the discovered link: `model.walk`'s walk
and rule (a switch owning the DLID takes it at port 0; a DLID above LinearFDBTop, an entry
of 255 or a port the switch lacks drops it; the exit port must be linked; a CA port takes
only its own LIDs; a route that revisits a switch is a loop), the entries read here. A
switch without an LFT (an RFT switch) is not followed: the trace says so.

`Trace.lines` is ibtracert's text (``-n``: its simple format); `Trace.as_json` the same
as fields. The source is a port: a CA named by node (GUID, description, path) is traced
from its first port that holds a LID, as discovery saw it; a switch from port 0.
"""
from __future__ import annotations

import dataclasses

from mad import forwarding as fw
from smagent.discovery import targets
from smagent.fdb import lft as linear
from smagent.fdb.switch import TableFailure
from smagent.model import walk

MAX_HOPS = walk.MAX_HOPS


@dataclasses.dataclass(frozen=True)
class End:
    """A port a route starts, passes or ends at."""
    node_guid: int
    port_guid: int
    port: int
    switch: bool
    description: str
    lid: int
    lmc: int

    def lids(self) -> str:
        return f"{self.lid}-{self.lid + (1 << self.lmc) - 1}"

    def kind(self) -> str:
        return "switch" if self.switch else "ca"

    def as_json(self) -> dict:
        return {"node_guid": f"{self.node_guid:#018x}", "port_guid": f"{self.port_guid:#018x}", "port": self.port,
                "node_type": self.kind(), "description": self.description, "lid": self.lid, "lmc": self.lmc}


@dataclasses.dataclass
class Trace:
    """``hops``: (exit port, the port entered); ``dest``: where it was delivered (None: it
    was not, ``error`` says why); ``smps``: SMPs sent, discovery included."""
    source: End
    dlid: int
    hops: list[tuple[int, End]]
    dest: End | None
    error: str | None
    smps: int = 0

    @property
    def delivered(self) -> bool:
        return self.dest is not None

    def lines(self, simple: bool = False) -> list[str]:
        s = self.source
        if simple:
            out = [f"From {{{s.node_guid:#018x}}}[{s.port}]"]
            out += [f"[{o}] -> {{{e.port_guid:#018x}}}[{e.port}]" for o, e in self.hops]
            if self.dest is not None:
                out.append(f"To {{{self.dest.node_guid:#018x}}}[{self.dest.port}]")
            return out
        out = [f'From {s.kind()} {{{s.node_guid:#018x}}} portnum {s.port} lid {s.lids()} "{s.description}"']
        out += [f'[{o}] -> {e.kind()} port {{{e.port_guid:#018x}}}[{e.port}] lid {e.lids()} "{e.description}"'
                for o, e in self.hops]
        d = self.dest
        if d is not None:
            out.append(f'To {d.kind()} {{{d.node_guid:#018x}}} portnum {d.port} lid {d.lids()} "{d.description}"')
        return out

    def as_json(self) -> dict:
        return {"source": self.source.as_json(), "dlid": self.dlid, "delivered": self.delivered,
                "hops": [{"out_port": o, **e.as_json()} for o, e in self.hops],
                "destination": self.dest.as_json() if self.dest else None, "error": self.error, "smps": self.smps}


def _end(node, port: int) -> End:
    """The End for a node's port (a switch: its LID and LMC are port 0's)."""
    pi = node.ports.get(0 if node.is_switch else port)
    guid = node.port_guids.get(0 if node.is_switch else port, node.guid)
    return End(node.guid, guid, port, node.is_switch, node.description, pi.lid if pi else 0, pi.lmc if pi else 0)


def _source(text: str, topo) -> tuple:
    node, port = targets.find_node(text, topo)
    if node.is_switch:
        return node, 0
    if port is None:
        ports = [p for p in node.lid_ports() if node.lid(p)]
        if not ports:
            raise targets.NodeNotFound(f"{node.description!r} has no port with a LID: run a sweep first", text,
                                       "node")
        port = ports[0]
    return node, port


def _dlid(text: str, topo) -> int:
    """A destination as a DLID: a LID as given (any of a port's 2^LMC), else the base LID
    of the node's (first) port."""
    kind, key = targets.classify(text)
    if kind == "lid":
        assert isinstance(key, int)
        fw.check_unicast_lid(key)
        targets.find_node(text, topo)  # a LID nobody holds is refused before the walk
        return key
    node, port = _source(text, topo)
    return node.lid(port)


def trace(transport, src: str, dst: str, topology=None) -> Trace:
    """Follow the route from ``src`` to ``dst`` (CLI targets) through the LFTs (see the
    module docstring). ``topology``: a discovery to use (else a fresh one)."""
    from smagent import discovery
    sent0 = transport.stats.sent
    topo = topology if topology is not None else discovery.discover(transport)
    node, port = _source(src, topo)
    dlid = _dlid(dst, topo)
    t = Trace(_end(node, port), dlid, [], None, None)
    t.error = _walk(transport, topo, node, port, dlid, t)
    t.smps = transport.stats.sent - sent0
    return t


def _walk(transport, topo, node, port: int, dlid: int, t: Trace) -> str | None:
    """Fill ``t.hops`` and ``t.dest`` by `model.walk`, each switch's LFT entry read as the
    packet gets there; returns why the packet was not delivered (None: it was)."""
    nodes = topo.nodes

    def owns(guid: int, port: int) -> bool:
        end = _end(nodes[guid], port)
        base = end.lid & ~((1 << end.lmc) - 1)
        return bool(end.lid) and base <= dlid < base + (1 << end.lmc)

    w = walk.walk((node.guid, port), dlid, is_switch=lambda g: nodes[g].is_switch, owns=owns,
                  exit_of=lambda g, d: _exit(transport, nodes[g], d), link_of=topo.links.get, max_hops=MAX_HOPS)
    t.hops = [(out, _end(nodes[peer[0]], peer[1])) for (_, out), peer in w.hops]
    at, at_port = nodes[w.at[0]], w.at[1]
    if w.delivered:
        here = _end(at, at_port)
        t.dest = dataclasses.replace(here, port=0) if here.switch else here  # a switch takes it at port 0
        return None
    if w.stop == walk.MISDELIVERED:
        return f"LID {dlid} reached {at.description!r} port {at_port}, which does not own it (misdelivered)"
    if w.stop == walk.LOOP:
        return f"loop: the route to LID {dlid} comes back to {at.description!r}"
    if w.stop == walk.UNLINKED:
        return f"{at.description!r} sends LID {dlid} out of port {at_port}, which has no link"
    if w.stop == walk.TOO_LONG:
        return f"more than {MAX_HOPS} hops"
    return str(w.detail)  # `_exit`'s words


def _exit(transport, node, dlid: int) -> int | tuple[str, str]:
    """The port switch ``node``'s LFT sends ``dlid`` out of (one block read), or (why none,
    in words)."""
    si, name = node.switch_info, repr(node.description)
    if si is None or not si.linear_fdb_cap:
        return "no_lft", f"{name} has no linear forwarding table (LinearFDBCap 0): not traced"
    why = walk.lft_bounds(dlid, si.linear_fdb_top, si.linear_fdb_cap)
    if why:
        return why, f"{name} drops LID {dlid}: above its LinearFDBTop {si.linear_fdb_top}"
    block, i = fw.lft_block(dlid)
    try:
        entry = linear.read_lft(transport, targets.Target(path=node.path), [block])[block][i]
    except TableFailure as e:
        return "unread", f"{name}: its LFT block {block} could not be read ({e})"
    out = walk.lft_entry(entry, node.num_ports)
    if out == walk.NO_ROUTE:
        return out, f"{name} drops LID {dlid}: LFT entry 255 (no route)"
    if isinstance(out, str):
        what = "port 0 (itself), but the LID is not its own" if entry == 0 else f"port {entry}, which it lacks"
        return out, f"{name} sends LID {dlid} to {what}"
    return out
