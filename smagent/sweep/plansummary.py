"""A large plan as text by kind and switch (issue 28): a fresh 11,664-host fabric plans
about 400,000 Sets, 50 MB of per-Set lines; this prints a few lines per switch instead.
The per-Set lines stay one option away (``--detail``; ``--plan-file`` for JSON lines)."""
from __future__ import annotations

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

    def add(guid: int, what: str, entries: int = 0) -> None:
        n = per.setdefault(guid, {}).setdefault(what, [0, 0])
        n[0] += 1
        n[1] += entries
    for s in r.switch_changes:
        add(s.switch, "SwitchInfo")
    for b in r.lft_changes:
        add(b.switch, "LFT", len(b.changed_lids()))
    for f in r.rft_changes:
        add(f.switch, "RFT")
    for m in r.mft_changes:
        add(m.switch, "MFT")
    ca_links: dict[str, int] = {}
    for lc in r.link_changes:
        node = nodes.get(lc.guid)
        if node is not None and node.is_switch:
            add(lc.guid, KINDS[lc.kind])
        else:
            ca_links[KINDS[lc.kind]] = ca_links.get(KINDS[lc.kind], 0) + 1
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
