"""A large plan as text by kind and switch (issue 28): a fresh 11,664-host fabric plans
about 400,000 Sets, 50 MB of per-Set lines; this prints a few lines per switch instead.
The per-Set lines stay one option away (``--detail``; ``--plan-file`` for JSON lines)."""
from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Iterator

# plans of more Sets than this print summarised unless the detail is asked for
SUMMARY_OVER = 2000
KINDS = {"sl2vl": "SL2VL", "vlarb": "VLArb", "pkeys": "P_Key", "guids": "GUIDInfo"}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def summary_lines(r) -> Iterator[str]:
    """A `SweepResult`'s plan by kind and switch: PortInfo Sets counted over CA and switch
    ports with the fields they change, then one line per switch with its Sets by table,
    then the CA ports' link tables."""
    yield (f"# plan: {r.sets_planned} Sets, by kind and switch (each Set: --detail; as JSON lines: "
           f"--plan-file FILE)")
    nodes = r.topology.nodes
    fields: set[str] = set()
    ca = sw = arm = 0
    master, lmc = r.lid_plan.master_lid, r.lid_plan.lmc
    for c in r.port_changes:
        node = nodes.get(c.guid)
        if node is not None and node.is_switch:
            sw += 1
        else:
            ca += 1
        arm += c.arm
        fields.update(d["field"] for d in c.to_json(master, lmc))
    if r.port_changes:
        yield (f"SubnSet(PortInfo): {_count(ca, 'CA port')}, {_count(sw, 'switch port')} "
               f"({', '.join(sorted(fields))}); {arm} to ACTIVE")
    per: dict[int, dict[str, list[int]]] = {}  # switch GUID -> what -> [Sets, entries]
    # counted per (switch, kind) in C: 2.3 million SL2VL Sets on 11,664 hosts; the order of
    # first appearance kept (switches, then their kinds), as each Set was added in turn
    by_switch = attrgetter("switch")
    tallies = [("SwitchInfo", Counter(map(by_switch, r.switch_changes)), None),
               ("LFT", Counter(map(by_switch, r.lft_changes)), r.lft_changes),
               ("RFT", Counter(map(by_switch, r.rft_changes)), None),
               ("MFT", Counter(map(by_switch, r.mft_changes)), None)]
    for what, counts, blocks in tallies:
        for guid, sets in counts.items():
            per.setdefault(guid, {})[what] = [sets, 0]
        for b in blocks or ():
            per[b.switch][what][1] += b.changed_count()
    ca_links: dict[str, int] = {}
    for (guid, kind), sets in Counter(map(attrgetter("guid", "kind"), r.link_changes)).items():
        node = nodes.get(guid)
        if node is not None and node.is_switch:
            per.setdefault(guid, {}).setdefault(KINDS[kind], [0, 0])[0] += sets
        else:
            ca_links[KINDS[kind]] = ca_links.get(KINDS[kind], 0) + sets
    for guid, kinds in per.items():
        yield f"{nodes[guid].description if guid in nodes else hex(guid)}: " + ", ".join(
            _kind(what, sets, entries) for what, (sets, entries) in kinds.items())
    if ca_links:
        yield "CA ports: " + ", ".join(f"{k} {n}" for k, n in ca_links.items())


def _kind(what: str, sets: int, entries: int) -> str:
    if what == "LFT":
        return f"LFT {_count(sets, 'block')} ({entries} {'entry' if entries == 1 else 'entries'})"
    if what in ("RFT", "MFT"):
        return f"{what} {_count(sets, 'block')}"
    if what == "SwitchInfo":
        return what
    return f"{what} {sets}"
