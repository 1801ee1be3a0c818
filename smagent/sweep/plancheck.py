"""The tables a plan would leave, checked before the first Set (issue 16 item 4).

A sweep (or `apply` of a desired state) has read what the switches hold and planned its
Sets. From those two, `check` builds two `smagent.verify.Snapshot`s, the tables as they
are and as the plan would leave them (LIDs, LMC, port states, SwitchInfo, LFTs and RFTs),
and runs `verify`'s own checks on them: no second checker. What the plan would
break is what the planned tables do worse than the current ones:

``unreachable``  (source, destination) pairs the current tables deliver and the planned
                 ones do not (any LID of the destination), or that would loop or be
                 misdelivered where they do not today; by cause, with examples
``loop``         the planned forwarding loops among those (the cycle of switches)

A fresh fabric (no LIDs yet) has nothing to lose, so only new loops and misdeliveries
count there. Two more classes are absolute: refused whatever today's tables hold (on a
fresh fabric they hold nothing to compare with):

``black_hole``         planned entries that send a LID into a port with no usable link
                       (no such port, no link, not ACTIVE: `verify.black_hole_entries`);
                       255 ("no route") and port 0 are not holes
``own_lid_not_port0``  a switch's own LID whose planned LFT entry is not port 0 (what
                       `verify` reports on live tables): ibsim and switches that look the
                       DLID up in the LFT send the switch's LID-routed SMPs elsewhere
``cdg_cycle``          a credit loop of the planned tables: a cycle in the channel
                       dependency graph whose channels share a VL (the SL of each path
                       from the routing engine, SL n on VL n; `verify.cdg`), so that
                       `sweep` refuses what `verify` would report. minhop on a ring, a
                       torus or a mesh makes them: use dfsssp or updn there, or
                       --allow-defects to write them anyway.

MFTs are not checked here: the sweep builds every multicast tree itself from member
lists (a desired state names members, not MFT entries), and flooding each group from
each member would more than double the check's time on a large fabric (the IPoIB group
of 648 hosts: 648 floods); `verify` checks them on the live tables.

The check is pure and in memory: O(switches x LIDs), like `verify.check` (648 hosts,
54 switches: about half a second of CPU, see the README).

Manual edits (`lft set`, `lft load`, `mft set`, `rft set`: issue 39 item 3) go through
`check_edit`: the same classes, on the tables `verify.collect` read just before (the
caller's I/O: `smagent.api.Session`) and those tables with the edit's Sets applied. The
fabric's tables are read whole for that (as `verify` reads them: every switch's LFT up to
LinearFDBTop, the MFTs for `mft set`), so even a one-entry edit costs a `verify`'s reads
and check: on the 648-host tree 5,300 SMPs and 0.23 s of CPU against 7 SMPs without it
(`bench/plan_check.py`, the simulator; on hardware the reads dominate, as for `verify`). Only what the edit adds is refused: a black hole, an own LID off port 0 or a
credit loop that the tables already had is `verify`'s to report, not the edit's. For
`mft set`, the groups it changes are flooded before and after (`mcast`: a member missed
or reached twice, a tree cycle, a branch into a port without an ACTIVE link; on a fresh
fabric, where no port is ACTIVE yet, only a branch into a port with no cable; so too
for `black_hole`: an entry into a cabled port that is not ACTIVE yet is not one there).
"""
from __future__ import annotations

from typing import Any

import dataclasses
import time

from mad import forwarding as fw
from mad.attributes import PortState
from smagent import verify
from smagent.model.subnet import LftBlocks, Subnet

FAILING = ("loop", "misdelivered")  # outcomes that are wrong even where nothing worked before
ABSOLUTE = ("black_hole", "own_lid_not_port0", "cdg_cycle")  # refused whatever today's tables hold


@dataclasses.dataclass
class PlanCheck:
    """``defects``: class -> {"count", "examples": [dict], ...} of what the plan breaks
    (empty: nothing); ``texts``: the examples as lines; ``report``: the whole
    `verify.Report` of the planned tables; ``seconds``: the time the check took."""
    defects: dict
    texts: dict
    report: verify.Report
    seconds: float
    worst: dict | None = None  # the planned tables' most overloaded link (`verify.balance`'s ``worst``)

    def notes(self) -> list[str]:
        """What the planned tables have that is reported, not refused: nothing today (a
        credit loop is refused, `ABSOLUTE`)."""
        return []

    def lines(self) -> list[str]:
        """The defects as lines: a count, then the examples."""
        out = []
        for cls, d in self.defects.items():
            if cls == "unreachable":
                causes = ", ".join(f"{k} {v}" for k, v in d["by_cause"].items())
                out.append(f"{cls}: {d['count']} (source, LID) pairs would not be delivered ({causes})")
            elif cls == "black_hole":
                out.append(f"{cls}: {d['count']} table entr{'ies' if d['count'] != 1 else 'y'} would send a LID "
                           f"into a port without a usable link")
            elif cls == "cdg_cycle":
                out.append(f"{cls}: the planned routes have a credit loop (a channel dependency cycle on one VL): "
                           f"deadlock risk; route with dfsssp or updn")
            elif cls == "mcast":
                out.append(f"{cls}: {d['count']} multicast problem{'s' if d['count'] != 1 else ''} the change adds")
            elif cls == "own_lid_not_port0":
                out.append(f"{cls}: {d['count']} switch LID{'s' if d['count'] != 1 else ''} would not point at port 0")
            else:
                out.append(f"{cls}: {d['count']} LID{'s' if d['count'] != 1 else ''} would {cls}")
            out += [f"{cls}: {t}" for t in self.texts.get(cls, [])]
        return out


def check(r, examples: int = verify.EXAMPLES) -> PlanCheck:
    """Check the tables a planned `smagent.sweep.SweepResult` would leave against those
    it read (see the module docstring)."""
    t0 = time.monotonic()
    cur = snapshot(r, planned=False)
    new = snapshot(r, planned=True)
    report = verify.check(new, examples, keep_outcomes=True)
    defects, texts = _broken(cur, new, report, examples)
    _absolute(new, report, examples, defects, texts)
    from smagent.verify import balance
    worst = balance.compute(new, hottest=0)["worst"]
    return PlanCheck(defects, texts, report, time.monotonic() - t0, worst)


def check_edit(cur: verify.Snapshot, plan, rft_tables: dict | None = None,
               examples: int = verify.EXAMPLES) -> PlanCheck:
    """Check a table command's `smagent.fdb.plan.Plan` (LinearFDBTop raises, LFT blocks,
    RFT blocks, MFT units) against ``cur``, the fabric's tables as `verify.collect` read
    them (with ``mcast`` for MFT edits). ``rft_tables``: {GUID: the switch's whole packed
    RFT} of the switches whose RFT the plan writes (the snapshot keeps valid entries only)."""
    t0 = time.monotonic()
    cur = dataclasses.replace(cur, port_info={})  # routes only, as `_snapshot`
    new = planned_snapshot(cur, plan, rft_tables or {})
    routes_cur, routes_new = (dataclasses.replace(s, mcast_read=False) for s in (cur, new))
    report = verify.check(routes_new, examples, keep_outcomes=True)
    defects, texts = _broken(routes_cur, routes_new, report, examples)
    _new_absolute(routes_cur, routes_new, report, examples, defects, texts)
    mlids = {m for c in plan.mft for m, _old, _new in c.changed_mlids()}
    if mlids and cur.mcast_read:
        before = verify.group_defects(cur, mlids)[0]
        added = [(e, t) for e, t in zip(*verify.group_defects(new, mlids)) if e not in before]
        if not _has_lids(cur):  # a fresh fabric has nothing to lose: only a branch into no cable counts
            added = [(e, t) for e, t in added if e.get("state") == "not_linked"]
        if added:
            defects["mcast"] = {"count": len(added), "examples": [e for e, _t in added[:examples]]}
            texts["mcast"] = [t for _e, t in added[:examples]]
    return PlanCheck(defects, texts, report, time.monotonic() - t0)


def _has_lids(snap: verify.Snapshot) -> bool:
    return any(s.lid for s in snap.switches.values()) or any(c.lid for c in snap.ca_ports.values())


def _new_absolute(cur: verify.Snapshot, new: verify.Snapshot, report: verify.Report, examples: int,
                  defects: dict, texts: dict) -> None:
    """The ABSOLUTE classes the edit adds to what ``cur`` already has."""
    had = {(h["switch"], h["lid"], h["port"]) for h in verify.black_hole_entries(cur)}
    holes = [h for h in verify.black_hole_entries(new) if (h["switch"], h["lid"], h["port"]) not in had]
    if not _has_lids(cur):  # a fresh fabric: its links come ACTIVE with the sweep; no cable stays a hole
        holes = [h for h in holes if h["cause"] != "port_not_active"]
    if holes:
        defects["black_hole"] = {"count": len(holes), "examples": holes[:examples]}
        texts["black_hole"] = [f"{h['switch']} LID {h['lid']} -> port {h['port']}: {verify.CAUSES[h['cause']]}"
                               for h in holes[:examples]]
    own = []
    for g, s in new.switches.items():
        c = cur.switches[g]
        if s.cap and s.read and (s.lft, s.top) != (c.lft, c.top):
            own += [(s.name, lid, e) for lid in s.lid_range() for e in [verify.own_lid_entry(s, lid)]
                    if e != 0 and verify.own_lid_entry(c, lid) == 0]
    if own:
        defects["own_lid_not_port0"] = {"count": len(own), "examples": [
            {"switch": n, "lid": lid, "port": e} for n, lid, e in own[:examples]]}
        texts["own_lid_not_port0"] = [f"{n} LID {lid} (its own): "
                                      f"{'above LinearFDBTop' if e is None else f'its LFT entry would be port {e}'}, "
                                      f"not port 0 (LID-routed SMPs for it go astray)" for n, lid, e in own[:examples]]
    if "cdg_cycle" in report.defects and "cdg_cycle" not in verify.check(cur, examples).defects:
        defects["cdg_cycle"], texts["cdg_cycle"] = report.defects["cdg_cycle"], report.texts["cdg_cycle"]


def planned_snapshot(cur: verify.Snapshot, plan, rft_tables: dict) -> verify.Snapshot:
    """``cur`` with the plan's Sets applied to its switches (blocks above the old
    LinearFDBTop that the plan does not write hold 255, as `verify.collect` assumes)."""
    switches = dict(cur.switches)
    tops = {c.switch: c.new for c in plan.tops}
    edited = set(tops) | {c.switch for c in plan.lft + plan.rft + plan.mft}
    for g in edited & set(switches):
        s = switches[g]
        top = tops[g].linear_fdb_top if g in tops else s.top
        lft = bytearray(s.lft)
        if s.cap:
            lft += bytes([fw.LFT_NO_PORT]) * max(0, (top // fw.LFT_BLOCK_SIZE + 1) * fw.LFT_BLOCK_SIZE - len(lft))
        for c in plan.lft:
            if c.switch == g:
                lft[c.block * fw.LFT_BLOCK_SIZE:(c.block + 1) * fw.LFT_BLOCK_SIZE] = c.new
        mft = dict(s.mft)
        for c in plan.mft:
            if c.switch == g:
                for mlid, _old, ports in c.changed_mlids():
                    keep = {p for p in mft.get(mlid, ()) if p // 16 != c.position}
                    mft[mlid] = frozenset(keep | {p for p in ports if p <= s.num_ports})
        rft_ = s.rft
        if g in rft_tables:
            packed = list(rft_tables[g])
            for c in sorted((c for c in plan.rft if c.switch == g), key=lambda c: c.phase):
                packed[c.block * fw.RFT_BLOCK_SIZE:(c.block + 1) * fw.RFT_BLOCK_SIZE] = c.new
            rft_ = verify.rft_entries(packed, len(packed))
        switches[g] = dataclasses.replace(s, lft=bytes(lft), top=top, mft=mft, rft=rft_)
    return dataclasses.replace(cur, switches=switches)


def _absolute(new: verify.Snapshot, report: verify.Report, examples: int, defects: dict, texts: dict) -> None:
    """The ABSOLUTE classes of the planned tables, into ``defects`` and ``texts``."""
    holes = verify.black_hole_entries(new)
    if holes:
        defects["black_hole"] = {"count": len(holes), "examples": holes[:examples]}
        texts["black_hole"] = [f"{h['switch']} LID {h['lid']} -> port {h['port']}: {verify.CAUSES[h['cause']]}"
                               for h in holes[:examples]]
    for cls in ("own_lid_not_port0", "cdg_cycle"):
        if cls in report.defects:
            defects[cls] = report.defects[cls]
            texts[cls] = report.texts[cls]


def snapshot(r, *, planned: bool) -> verify.Snapshot:
    """``r``'s tables as a verify Snapshot: as read, or as its plan would leave them."""
    topo = planned_topology(r) if planned else r.topology
    lfts = planned_lfts(r) if planned else r.lft_current
    rft_blocks = dict(r.rft_current)
    if planned:
        rft_blocks.update(((c.switch, c.block), list(c.new)) for c in sorted(r.rft_changes, key=lambda c: c.phase))
    rfts = {}
    for n in topo.switches():
        si = n.switch_info
        if si is None or si.linear_fdb_cap or not si.random_fdb_cap:
            continue
        nb = fw.rft_block(si.random_fdb_cap - 1)[0] + 1
        if all((n.guid, b) in rft_blocks for b in range(nb)):
            rfts[n.guid] = verify.rft_entries([e for b in range(nb) for e in rft_blocks[(n.guid, b)]],
                                              si.random_fdb_cap)
    snap = verify.Snapshot.of(Subnet.build(topo, lfts), rfts, mcast=False,
                              unreached=[dict(u) for u in topo.unreached])
    # routes only: the link checks (MTU, VLs, SL2VL, partitions) refuse nothing here, and
    # cost a quarter of the check on a large fabric; `verify` runs them on live tables
    snap.port_info = {}
    if planned:  # the SL each path will use: credit loops count per VL (SL n on VL n)
        snap.path_sl = r.path_sls
    return snap


def planned_lfts(r) -> LftBlocks:
    """The LFT blocks as ``r``'s plan would leave them: {(switch, block): bytes}."""
    return LftBlocks.of(r.lft_current).updated(put=(((c.switch, c.block), bytes(c.new)) for c in r.lft_changes))


def planned_topology(r):
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
        if fields:  # link fields left out: the check is of routes (see `_snapshot`)
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


def _before(cur: verify.PlaceOutcomes):
    """before(place, destination): "delivered" if the current tables deliver any of its
    LIDs from there, else the kind of the first failure (None: it has no LID today).
    Asked only where the planned tables fail, so it costs nothing on a healthy plan."""
    lids: dict = {}
    for dlid in sorted(cur.owner):
        lids.setdefault(cur.owner[dlid], []).append(dlid)

    def before(place, dest):
        first = None
        for dlid in lids.get(dest, ()):
            o = cur.outcome(dlid, place)
            if o == "delivered":
                return o
            first = first or o[0]
        return first
    return before


def _broken(cur: verify.Snapshot, new: verify.Snapshot, report: verify.Report, examples: int):
    """The pairs the planned tables break (see the module docstring), and the planned
    loops among them, as defect classes in `verify.Report.defects`' shape. Compared
    place by place (every source entering a switch there shares the route)."""
    pc, pn = verify.place_outcomes(cur), report.outcomes
    assert pn is not None  # check(..., keep_outcomes=True)
    before = _before(pc)
    was_source = {place: set(srcs) for place, srcs in pc.sources.items()}
    name = _names(new)
    unreachable: dict[str, Any] = {"count": 0, "by_cause": {}, "examples": []}
    texts: dict = {"unreachable": []}
    loops: set = set()
    for dlid, at in pn.at.items():
        dest = pn.owner[dlid]
        for place, o in at.items():
            if o == "delivered":
                continue
            was = before(place, dest)
            fails = o[0] in FAILING and was != o[0]  # wrong even where nothing worked before
            if was != "delivered" and not fails:
                continue
            srcs = [s for s in pn.sources[place] if s != dest and (fails or s in was_source.get(place, ()))]
            if not srcs:
                continue
            if o[0] == "loop":
                loops.add(dlid)
            unreachable["count"] += len(srcs)
            unreachable["by_cause"][o[0]] = unreachable["by_cause"].get(o[0], 0) + len(srcs)
            at_name = new.switches[o[1]].name
            for src in srcs[:examples - len(unreachable["examples"])]:
                unreachable["examples"].append({"source": name(src), "lid": dlid, "dest": name(dest), "cause": o[0],
                                                "at": at_name, "before": was})
                texts["unreachable"].append(f"{name(src)} -> LID {dlid} ({name(dest)}): "
                                            f"{verify.CAUSES.get(o[0], o[0])} at {at_name} (today: {was or 'not routed'})")
    defects = {}
    if unreachable["count"]:
        unreachable["by_cause"] = dict(sorted(unreachable["by_cause"].items(), key=lambda kv: -kv[1]))
        defects["unreachable"] = unreachable
    if loops:
        shown = [(e, t) for e, t in zip(report.defects.get("loop", {}).get("examples", []),
                                        report.texts.get("loop", [])) if e["lid"] in loops]
        defects["loop"] = {"count": len(loops), "examples": [e for e, _t in shown]}
        texts["loop"] = [t for _e, t in shown]
    return defects, texts
