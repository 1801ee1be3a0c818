"""What a failure would do, offline (`smagent whatif`, issue 40 item 3): the tables a sweep
of the healthy fabric leaves under the active engine, against those it would leave once the
named switches, hosts or cables are gone, both read by `verify`'s own checks. No SMP is sent:
the fabric comes from a snapshot (replayed) or the simulator, and both sweeps are plans.

``lost``: host pairs (CA port to CA port, both ends still cabled) the healthy tables deliver
and the tables after the failure do not; ``with_failed``: pairs an end of which failed or lost
its cable (lost whatever the SM does); ``rerouted``: pairs still delivered whose path changes;
the hottest link and its routes before and after (`verify.balance`); the credit loops of the
tables after (`verify.cdg`, per VL with the engine's SLs).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from smagent import discovery
from smagent.model import walk
from smagent.verify import balance, check
from smagent.verify.model import Snapshot


@dataclasses.dataclass(frozen=True)
class Failure:
    """What fails: a node (``port`` None) or one cable, named by the end ``port`` of ``node``."""
    guid: int
    name: str
    port: int | None = None

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}[{self.port}]"


def without(topo: discovery.Topology, failures: Iterable[Failure]) -> discovery.Topology:
    """``topo`` as it would be discovered after ``failures``: nodes gone with their cables,
    cables gone (both ends' links)."""
    nodes, links = dict(topo.nodes), dict(topo.links)
    for f in failures:
        ends = [(g, p) for (g, p) in links if g == f.guid and (f.port is None or p == f.port)]
        for end in ends:
            far = links.pop(end, None)
            if far is not None:
                links.pop(far, None)
        if f.port is None:
            nodes.pop(f.guid, None)
    return dataclasses.replace(topo, nodes=nodes, links=links)


@dataclasses.dataclass
class WhatIf:
    failures: list[Failure]
    pairs: int
    lost: int
    with_failed: int
    rerouted: int
    hottest_before: dict
    hottest_after: dict
    credit_loops: int
    examples: list[str]
    engine: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"failures": [str(f) for f in self.failures], "engine": self.engine, "pairs": self.pairs, "lost": self.lost,
                "lost_with_failed": self.with_failed, "rerouted": self.rerouted,
                "hottest_before": self.hottest_before, "hottest_after": self.hottest_after,
                "credit_loops": self.credit_loops, "examples": self.examples}

    def lines(self) -> list[str]:
        hb, ha = self.hottest_before, self.hottest_after
        return [f"if {', '.join(map(str, self.failures))} failed, routed by {self.engine}:",
                f"  host pairs       {self.pairs:,}",
                f"  lost             {self.lost:,}" + (f" (besides {self.with_failed:,} with an end on what failed)"
                                                      if self.with_failed else ""),
                f"  rerouted         {self.rerouted:,}",
                f"  hottest link     before {hb.get('link') or '-'} ({hb.get('routes', 0):,} routes), "
                f"after {ha.get('link') or '-'} ({ha.get('routes', 0):,} routes)",
                f"  credit loops     {self.credit_loops}", *[f"  e.g. {e}" for e in self.examples]]


class _Routes:
    """The LFT walks (`model.walk`) on one snapshot, one per (switch a host's cable enters,
    DLID): the hosts behind a switch share the walk from there on."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        # the DLIDs each switch and CA port takes
        self.takes = {**{key: c.lid_range() for key, c in snap.ca_ports.items()},
                      **{g: s.lid_range() for g, s in snap.switches.items()}}
        self.walks: dict[tuple[int, int], tuple[str, list[tuple[int, int]]]] = {}

    def walk(self, src: tuple[int, int], dlid: int) -> tuple[str, list[tuple[int, int]]]:
        """Where a packet from CA port ``src`` to ``dlid`` goes: the outcome ("delivered",
        "dropped", "loop") and the (switch, exit port) hops."""
        peer = self.snap.links.get(src)
        if peer is None:
            return "dropped", []
        if peer[0] not in self.snap.switches:  # a host cabled to a host
            return self._walk(src, dlid)
        key = (peer[0], dlid)
        hit = self.walks.get(key)
        if hit is None:
            hit = self.walks[key] = self._walk(peer, dlid)
        return hit

    def _walk(self, start: tuple[int, int], dlid: int) -> tuple[str, list[tuple[int, int]]]:
        sws, takes, none = self.snap.switches, self.takes, range(0)

        def owns(guid: int, port: int) -> bool:
            return dlid in takes.get(guid, none) or dlid in takes.get((guid, port), none)

        def exit_of(guid: int, dlid: int) -> int | str:
            sw = sws[guid]
            return walk.lft_exit(sw.lft, dlid, sw.num_ports, sw.top, sw.cap)

        w = walk.walk(start, dlid, is_switch=sws.__contains__, owns=owns, exit_of=exit_of, link_of=self.snap.links.get)
        outcome = "delivered" if w.delivered else "loop" if w.stop in (walk.LOOP, walk.TOO_LONG) else "dropped"
        return outcome, [out for out, _ in w.hops if out[0] in sws]


def compare(before: Snapshot, after: Snapshot, failures: list[Failure], examples: int = 5) -> WhatIf:
    gone = {f.guid for f in failures if f.port is None}
    cas = [k for k, c in sorted(before.ca_ports.items()) if c.lid and k in before.links]
    pairs = lost = with_failed = rerouted = 0
    shown: list[str] = []
    walks_before, walks_after = _Routes(before), _Routes(after)
    for src in cas:
        for dst in cas:
            if src == dst:
                continue
            pairs += 1
            dlid = before.ca_ports[dst].lid
            was, old = walks_before.walk(src, dlid)
            if was != "delivered":
                continue
            if src[0] in gone or dst[0] in gone or src not in after.links or dst not in after.links:
                with_failed += 1
                continue
            now, new = walks_after.walk(src, after.ca_ports[dst].lid if dst in after.ca_ports else dlid)
            if now != "delivered":
                lost += 1
                if len(shown) < examples:
                    shown.append(f"{before.ca_ports[src].name}[{src[1]}] -> {before.ca_ports[dst].name}[{dst[1]}]: "
                                  f"{now}")
            elif new != old:
                rerouted += 1
    report = check(after)
    return WhatIf(failures, pairs, lost, with_failed, rerouted, _hottest(before), _hottest(after),
                  report.defects.get("cdg_cycle", {}).get("count", 0), shown)


def _hottest(snap: Snapshot) -> dict:
    figures = balance.compute(snap, hottest=1)
    top = figures["hottest"][0] if figures["hottest"] else {}
    return {"link": top.get("link"), "routes": top.get("routes", 0), "ideal": figures.get("ideal", 0.0)}


__all__ = ["Failure", "WhatIf", "without", "compare"]
