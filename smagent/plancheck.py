"""The tables a plan would leave, checked before the first Set (issue 16 item 4).

A sweep (or `apply` of a desired state) has read what the switches hold and planned its
Sets. From those two, `check` builds two `smagent.verify.Snapshot`s, the tables as they
are and as the plan would leave them (LIDs, LMC, port states, SwitchInfo, LFT, RFT and
MFT), and runs `verify`'s own checks on them: no second checker. What the plan would
break is what the planned tables do worse than the current ones:

``unreachable``  (source, destination) pairs the current tables deliver and the planned
                 ones do not (any LID of the destination), or that would loop or be
                 misdelivered where they do not today; by cause, with examples
``loop``         the planned forwarding loops among those (the cycle of switches)

A fresh fabric (no LIDs yet) has nothing to lose, so only new loops and misdeliveries
count there. Credit loops (``cdg_cycle``) and multicast defects of the planned tables are
reported as notes, not refused: a routing engine makes credit loops knowingly (minhop on
a ring; `updn` avoids them), and the sweep computes the multicast trees itself.

The check is pure and in memory: O(switches x LIDs), like `verify.check`.
"""
from __future__ import annotations

import dataclasses
import time

from mad import forwarding as fw
from mad.attributes import PortState
from smagent import verify

FAILING = ("loop", "misdelivered")  # outcomes that are wrong even where nothing worked before


@dataclasses.dataclass
class PlanCheck:
    """``defects``: class -> {"count", "examples": [dict], ...} of what the plan breaks
    (empty: nothing); ``texts``: the examples as lines; ``report``: the whole
    `verify.Report` of the planned tables; ``seconds``: the time the check took."""
    defects: dict
    texts: dict
    report: verify.Report
    seconds: float

    def notes(self) -> list[str]:
        """What the planned tables have that is reported, not refused."""
        out = [f"planned tables: {t} (credit-loop deadlock risk)" for t in self.report.texts.get("cdg_cycle", [])[:1]]
        if "mcast" in self.report.defects:
            out += [f"planned tables: multicast: {t}" for t in self.report.texts.get("mcast", [])[:3]]
        return out

    def lines(self) -> list[str]:
        """The defects as lines: a count, then the examples."""
        out = []
        for cls, d in self.defects.items():
            texts = self.texts.get(cls, [])
            out.append(f"{cls}: {d['count']}" + (f" ({', '.join(f'{k} {v}' for k, v in d['by_cause'].items())})"
                                                 if d.get("by_cause") else ""))
            out += [f"{cls}: {t}" for t in texts]
        return out


def check(r, examples: int = verify.EXAMPLES) -> PlanCheck:
    """Check the tables a planned `smagent.sweep.SweepResult` would leave against those
    it read (see the module docstring)."""
    t0 = time.monotonic()
    cur = _snapshot(r, planned=False)
    new = _snapshot(r, planned=True)
    report = verify.check(new, examples)
    defects, texts = _broken(cur, new, report, examples)
    return PlanCheck(defects, texts, report, time.monotonic() - t0)


def _snapshot(r, *, planned: bool) -> verify.Snapshot:
    topo = _planned_topology(r) if planned else r.topology
    lfts = dict(r.lft_current)
    rft_blocks = dict(r.rft_current)
    units = dict(r.mft_current)
    if planned:
        lfts.update(((c.switch, c.block), bytes(c.new)) for c in r.lft_changes)
        rft_blocks.update(((c.switch, c.block), list(c.new)) for c in sorted(r.rft_changes, key=lambda c: c.phase))
        units.update(((c.switch, c.block, c.position), list(c.new)) for c in r.mft_changes)
    rfts = {}
    for n in topo.switches():
        si = n.switch_info
        if si is None or si.linear_fdb_cap or not si.random_fdb_cap:
            continue
        nb = fw.rft_block(si.random_fdb_cap - 1)[0] + 1
        if all((n.guid, b) in rft_blocks for b in range(nb)):
            rfts[n.guid] = verify.rft_entries([e for b in range(nb) for e in rft_blocks[(n.guid, b)]],
                                              si.random_fdb_cap)
    mfts = None
    if r.multicast is not None:
        mfts = verify.mft_groups(units, {n.guid: n.num_ports for n in topo.switches()})
    return verify.snapshot_of(topo, lfts, rfts, mfts, unreached=[dict(u) for u in topo.unreached])


def _planned_topology(r):
    """The topology with the PortInfo and SwitchInfo the plan's Sets would leave: new
    LIDs and LMC, INIT ports ACTIVE, SwitchInfo as planned (LinearFDBTop, DefaultPort)."""
    topo = r.topology
    nodes = {g: dataclasses.replace(n, ports=dict(n.ports)) for g, n in topo.nodes.items()}
    for c in r.port_changes:
        n = nodes[c.guid]
        pi = n.ports[c.port]
        fields = {}
        if c.lid is not None:
            fields.update(lid=c.lid, lmc=0 if n.is_switch else r.lid_plan.lmc)
        if c.arm:
            fields["port_state"] = PortState.ACTIVE
        fields.update({k: v for k, v in c.link.items() if hasattr(pi, k)})
        n.ports[c.port] = pi.LAYOUT.replace(pi, **fields)
    for c in r.switch_changes:
        nodes[c.switch].switch_info = c.new
    return dataclasses.replace(topo, nodes=nodes)


def _names(snap: verify.Snapshot):
    def name(who) -> str:
        if who[0] == "sw":
            return f"{snap.switches[who[1]].name} (port 0)"
        c = snap.ca_ports.get(who[1])
        return f"{c.name if c else hex(who[1][0])}[{who[1][1]}]"
    return name


def _broken(cur: verify.Snapshot, new: verify.Snapshot, report: verify.Report, examples: int):
    """The pairs the planned tables break (see the module docstring), and the planned
    loops among them, as defect classes in `verify.Report.defects`' shape."""
    own_c, own_n = verify.lid_owners(cur), verify.lid_owners(new)
    before: dict = {}  # (source, destination) -> "delivered" or the kind of failure
    for (src, dlid), o in verify.outcomes(cur).items():
        key = (src, own_c[dlid])
        if o == "delivered":
            before[key] = o
        else:
            before.setdefault(key, o[0])
    name = _names(new)
    defects: dict = {}
    texts: dict = {}
    by_cause: dict = {}
    loops: set = set()
    for (src, dlid), o in verify.outcomes(new).items():
        if o == "delivered":
            continue
        dest = own_n[dlid]
        was = before.get((src, dest))
        if was != "delivered" and (o[0] not in FAILING or was == o[0]):
            continue
        by_cause[o[0]] = by_cause.get(o[0], 0) + 1
        if o[0] == "loop":
            loops.add(dlid)
        d = defects.setdefault("unreachable", {"count": 0, "by_cause": by_cause, "examples": []})
        d["count"] += 1
        if len(d["examples"]) < examples:
            at = new.switches[o[1]].name
            d["examples"].append({"source": name(src), "lid": dlid, "dest": name(dest), "cause": o[0], "at": at,
                                  "before": was})
            texts.setdefault("unreachable", []).append(
                f"{name(src)} -> LID {dlid} ({name(dest)}): {verify.CAUSES.get(o[0], o[0])} at {at}"
                f" (today: {was or 'not routed'})")
    if loops:
        shown = [(e, t) for e, t in zip(report.defects.get("loop", {}).get("examples", []),
                                        report.texts.get("loop", [])) if e["lid"] in loops]
        defects["loop"] = {"count": len(loops), "examples": [e for e, _t in shown]}
        texts["loop"] = [t for _e, t in shown]
    if "unreachable" in defects:
        defects["unreachable"]["by_cause"] = dict(sorted(by_cause.items(), key=lambda kv: -kv[1]))
    return defects, texts
