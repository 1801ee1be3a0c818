"""Drain a switch, a host or a cable before it is taken out (`smagent drain`, issue 40 item 1):
route every pair around it with the active engine, write the new tables in the order that
breaks no pair in flight (`fdb.apply`, `planning.update_order`), then read back the tables
of every switch cabled into it and prove that no LFT or MFT entry sends traffic into it
(`prove`: no other switch has an exit into it, so none other can).

The plan routes over the fabric without what is drained (the daemon's repairs plan the
same way: against a known topology, no discovery), while the drained part is still cabled
and carries what it carried until the new entries are in. A drain that would cut off hosts
other than those on the drained part (the pairs `verify.whatif` finds lost) is refused
before any Set (SafetyRefusal, the hosts named).
"""
from __future__ import annotations

import dataclasses

from smagent import discovery
from smagent.errors import BadInput, SafetyRefusal
from smagent.transport.base import Transport
from smagent.verify import whatif
from smagent.verify.collect import collect_switches
from smagent.verify.model import Snapshot

Failure = whatif.Failure  # what is drained: a node, or a cable by one of its ends


@dataclasses.dataclass
class DrainResult:
    drained: list[Failure]
    sets: int  # the Sets the reroute sent (0 on a dry run)
    rerouted: int
    entries_left: list[str]  # LFT/MFT entries that still lead into what is drained (empty: safe)
    dry_run: bool = False
    kept: bool = False  # recorded in the state directory: sweeps and the SM keep it drained until undrain

    @property
    def safe(self) -> bool:
        return not self.entries_left and not self.dry_run

    def as_json(self) -> dict:
        return {"drained": [str(d) for d in self.drained], "sets": self.sets, "rerouted": self.rerouted,
                "entries_left": self.entries_left, "safe_to_remove": self.safe, "dry_run": self.dry_run,
                "kept": self.kept}

    def lines(self) -> list[str]:
        what = ", ".join(map(str, self.drained))
        if self.dry_run:
            return [f"would drain {what}: {self.rerouted:,} host pairs rerouted; nothing sent (--dry-run)"]
        head = [f"drained {what}: {self.sets} Sets, {self.rerouted:,} host pairs rerouted"]
        if self.entries_left:
            return head + [f"NOT safe to remove: {len(self.entries_left)} entries still lead into it:",
                           *[f"  {e}" for e in self.entries_left[:20]]]
        return head + [f"no LFT or MFT entry of any switch leads into {what}: safe to remove",
                       "(kept drained, by sweeps and the running SM, across restarts, until `smagent undrain`)"
                       if self.kept else
                       "(no state directory: a later sweep routes over it again)"]


def target(text: str, topology: discovery.Topology, what: str = "drain") -> Failure:
    """``NODE`` or ``NODE[PORT]`` (a cable by one of its ends) -> a `Failure`; BadInput when
    the node is not found or has no cable on that port."""
    from smagent.discovery import targets
    name, port = text, None
    if text.endswith("]") and "[" in text:
        name, _, rest = text[:-1].rpartition("[")
        if not rest.isdigit():
            raise BadInput(f"{what} {text!r}: expected NODE or NODE[PORT] with a port number")
        port = int(rest)
    node, _p = targets.find_node(name, topology)
    if port is not None and (node.guid, port) not in topology.links:
        raise BadInput(f"{what} {text!r}: {node.description or hex(node.guid)} has no cable on port {port}")
    return Failure(node.guid, node.description or f"{node.guid:#018x}", port)


def refuse_own_port(topology: discovery.Topology, drained: list[Failure]) -> None:
    """SafetyRefusal when a drain would take out the SM's own port: its node, the cable on
    it or the switch at its other end (the SM would route a fabric it cannot reach)."""
    local = topology.local
    far = topology.links.get(local)
    for d in drained:
        if d.port is None and (d.guid == local[0] or (far is not None and d.guid == far[0])):
            raise SafetyRefusal(f"draining {d} would take out this SM's own port or the switch it reaches the "
                                "fabric through; run the SM elsewhere first; nothing was sent")
        if d.port is not None and (d.guid, d.port) in (local, far):
            raise SafetyRefusal(f"draining {d} would take out the cable of this SM's own port; nothing was sent")


def refuse_cutting_off(w: whatif.WhatIf) -> None:
    """SafetyRefusal when draining would cut off pairs whose ends are not on what is drained."""
    if w.lost:
        raise SafetyRefusal(f"draining {', '.join(map(str, w.failures))} would cut off {w.lost:,} host pairs "
                            f"whose ends are elsewhere, e.g. {'; '.join(w.examples)}; nothing was sent")


def _into(links: dict, switches, drained: list[Failure]) -> set[tuple[int, int]]:
    """The (switch, port) exits that lead into what is drained: ports cabled to a drained
    node, and both ends of a drained cable (``links`` both ways, ``switches`` their GUIDs)."""
    nodes = {d.guid for d in drained if d.port is None}
    cables = {(d.guid, d.port) for d in drained if d.port is not None}
    cables |= {links[c] for c in list(cables) if c in links}
    return {end for end, far in links.items()
            if end[0] in switches and (far[0] in nodes or end in cables)}


def prove(transport: Transport, topology: discovery.Topology, drained: list[Failure]) -> list[str]:
    """After the Sets: `entries_into` on what the switches hold now, read back from the
    fabric. Only a switch with an exit into what is drained (`_into`, on ``topology`` as
    discovered before the drain, the drained part still in it) can send traffic into it, so
    only those are read (`verify.collect.collect_switches`): their SwitchInfo, LFT and the MFT
    positions of those exits, not the whole fabric."""
    gone = {d.guid for d in drained if d.port is None}
    ports: dict[int, set[int]] = {}
    for g, p in _into(topology.links, {n.guid for n in topology.switches()}, drained):
        if g not in gone:
            ports.setdefault(g, set()).add(p)
    return entries_into(collect_switches(transport, topology, ports), drained)


def entries_into(snap: Snapshot, drained: list[Failure]) -> list[str]:
    """Every LFT entry (for a LID not on what is drained) and MFT entry of ``snap``'s switches
    that sends traffic into what is drained, and every switch with an exit into it whose
    tables were not read (`SwitchState.read`, `mft_read`)."""
    exits = _into(snap.links, snap.switches, drained)
    gone = {d.guid for d in drained if d.port is None}
    own = {lid for g in gone if g in snap.switches for lid in snap.switches[g].lid_range()}
    own |= {lid for k, c in snap.ca_ports.items() if k[0] in gone for lid in c.lid_range()}
    out = []
    for g, sw in sorted(snap.switches.items()):
        if g in gone:
            continue
        ports = {p for (s, p) in exits if s == g}
        if not ports:
            continue
        unread = [t for t, ok in (("LFT", sw.read), ("MFT", sw.mft_read or not snap.mcast_read)) if not ok]
        if unread:  # what was not read proves nothing: never "safe" on a silence
            out.append(f"{sw.name} {' and '.join(unread)} not read back: it may still lead into it")
        out += [f"{sw.name} LFT LID {lid} -> port {port}" for lid, port in enumerate(sw.lft)
                if port in ports and lid not in own]
        out += [f"{sw.name} MFT MLID {mlid:#x} includes port {p}" for mlid, members in sorted(sw.mft.items())
                for p in sorted(members & ports)]
    return out


__all__ = ["Failure", "DrainResult", "target", "refuse_own_port", "refuse_cutting_off", "prove", "entries_into"]
