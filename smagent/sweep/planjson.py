"""The compact plan records (issue 28): a plan's size follows the Sets, not the entries.

`SweepResult.plan_records` gives, unless asked for ``detail``, one record per Set or
group of equal Sets instead of one per changed entry or field:

``PortInfoSet``  one per port: ``fields`` {name: [old, new]}
``LFTBlock``     one per LFT block (`smagent.fdb.lft.lft_block_json`, packed ports)
``MFTBlock``     one per MFT (block, position) (`smagent.fdb.mft.mft_block_json`,
                 the 32 PortMask words)
``SL2VLGroup``   a node's SL2VL Sets with the same old and new table: ``in_ports`` x
                 ``out_ports`` (ranges "1-18,20"; every pair of the two); with
                 ``all_inputs`` true the pairs are written by one Set per output port
                 for all its input ports (OptimizedSLtoVLMappingProgramming)
``VLArbGroup``   a node's VLArb Sets with the same priority, entries, old and new: ``ports``
``P_KeyGroup``   a node's P_Key Sets with the same block, old and new: ``ports``
                 (both: ``old`` and ``new`` without their trailing zero entries)

`expand` turns any record back into the per-entry records of ``detail`` (the README's
"The JSON of a plan"), so a script can still find every changed entry.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from mad import codes
from smagent.fdb import lft as linear, mft as multicast

LINK_GROUPS = {"SL2VL": "SL2VLGroup", "VLArb": "VLArbGroup", "P_Key": "P_KeyGroup"}
_PORT_FIELD = {"VLArb": "port", "P_Key": "port"}  # the field a group's ``ports`` stand for


def ranges(nums: Iterable[int]) -> str:
    """Sorted distinct numbers as "1-4,7" ("" for none)."""
    runs: list[list[int]] = []
    for n in sorted(set(nums)):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def unranges(text: str) -> list[int]:
    """`ranges` undone."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def port_record(per_field: list[dict]) -> dict | None:
    """A port's PortInfo field records (`PortChange.to_json`) as one ``PortInfoSet``."""
    if not per_field:
        return None
    first = per_field[0]
    return {"node": first["node"], "guid": first["guid"], "port": first["port"], "table": "PortInfoSet",
            "fields": {d["field"]: [d["old"], d["new"]] for d in per_field}}


def link_groups(records: Iterable[dict]) -> Iterator[dict]:
    """Per-Set link table records (`TableChange.to_json`) as groups, in first-seen order."""
    groups: dict[str, dict] = {}
    for rec in records:
        table = rec["table"]
        if table == "SL2VL":
            key_fields = {k: v for k, v in rec.items() if k not in ("in_port", "out_port")}
        else:
            key_fields = {k: v for k, v in rec.items() if k != _PORT_FIELD[table]}
        if table != "SL2VL":  # trailing zero entries (unused VLArb pairs, P_Keys) left out
            key_fields.update(old=_trim(key_fields["old"]), new=_trim(key_fields["new"]))
        key = json.dumps(key_fields, sort_keys=True)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {**key_fields, "table": LINK_GROUPS[table], "_members": []}
        g["_members"].append((rec["in_port"], rec["out_port"]) if table == "SL2VL" else rec[_PORT_FIELD[table]])
    for g in groups.values():
        members = g.pop("_members")
        yield from _emit(g, members)


def _emit(g: dict, members: list) -> Iterator[dict]:
    """One group's records: ``ports`` ranges; SL2VL pairs by output port, then output
    ports with the same input ports together (``in_ports`` x ``out_ports``)."""
    if g["table"] != "SL2VLGroup":
        yield {**g, "ports": ranges(members)}
        return
    ins: dict[int, set[int]] = {}
    for i, o in members:
        ins.setdefault(o, set()).add(i)
    by_ins: dict[str, list[int]] = {}
    for o, i_set in ins.items():
        by_ins.setdefault(ranges(i_set), []).append(o)
    for in_text, outs in by_ins.items():
        yield {**g, "in_ports": in_text, "out_ports": ranges(outs)}


def link_change_groups(changes: Iterable) -> Iterator[dict]:
    """`smagent.fdb.porttables.TableChange`s as the records of `link_groups`, grouped on
    the Sets themselves (their encoded tables): one `to_json` per distinct Set per port,
    not per Set (2 million SL2VL pairs on an 11,664-host fabric). GUIDInfo blocks (alias
    GUIDs, a few ports' own) are records of their own, not grouped."""
    from mad import forwarding as fw
    split = {"sl2vl": lambda m: (0, fw.sl2vl_from_modifier(m)),
             "vlarb": lambda m: (m & ~0xFF, fw.vlarb_from_modifier(m)[2]),
             "pkeys": lambda m: (m & ~0xFF, fw.pkey_from_modifier(m)[1])}
    groups: dict[tuple, list] = {}
    encoded: dict[int, bytes] = {}  # id(table) -> bytes: many changes share their ``new``

    def enc(t) -> bytes | None:
        if t is None:
            return None
        b = encoded.get(id(t))
        if b is None:
            b = encoded[id(t)] = t.LAYOUT.encode(t)
        return b
    parts: dict[tuple[str, int], tuple] = {}  # (kind, modifier) -> (rest, member): a few thousand distinct
    prev: Any = None
    entry: list = []
    rest: int = 0
    # an all-inputs Set counts as the pairs it writes (`TableChange.pairs`)
    alone: list = []
    for c in (p for lc in changes for p in (lc.pairs() if lc.all_inputs else (lc,))):
        kind = c.kind
        if kind == "guids":
            alone.append(c)
            continue
        part = parts.get((kind, c.modifier))
        if part is None:
            part = parts[kind, c.modifier] = split[kind](c.modifier)
        # a switch's unread SL2VL pairs follow their representative with the very same
        # node, path and tables: the previous change's group, without building its key
        if not (prev is not None and c.new is prev.new and c.old is prev.old and c.path is prev.path
                and c.guid == prev.guid and c.port == prev.port and kind == prev.kind and part[0] == rest
                and c.all_inputs == prev.all_inputs):
            key = (kind, c.guid, tuple(c.path), c.port if kind != "sl2vl" else 0, part[0],
                   None if c.old is None else enc(c.old), enc(c.new), c.all_inputs)
            entry = groups.get(key)  # type: ignore[assignment]
            if entry is None:
                entry = groups[key] = [c, []]
            prev, rest = c, part[0]
        entry[1].append(part[1])
    for first, members in groups.values():
        rec = first.to_json()
        table = rec["table"]
        drop = ("in_port", "out_port") if table == "SL2VL" else (_PORT_FIELD[table],)
        g = {k: v for k, v in rec.items() if k not in drop}
        if table != "SL2VL":
            g.update(old=_trim(g["old"]), new=_trim(g["new"]))
        yield from _emit({**g, "table": LINK_GROUPS[table]}, members)
    yield from (c.to_json() for c in alone)


def compact(records: Iterable[dict]) -> Iterator[dict]:
    """Detailed records (``plan_records(detail=True)`` without LFT entries) compacted:
    PortInfo fields by port, link tables by group; the rest as they are."""
    port: list[dict] = []
    links: list[dict] = []
    for rec in records:
        if rec["table"] == "PortInfo":
            if port and (port[0]["guid"], port[0]["port"]) != (rec["guid"], rec["port"]):
                yield port_record(port)  # type: ignore[misc]
                port = []
            port.append(rec)
        elif rec["table"] in LINK_GROUPS:
            links.append(rec)
        else:
            yield rec
    if port:
        yield port_record(port)  # type: ignore[misc]
    yield from link_groups(links)


_EMPTY: tuple[Any, ...] = (None, [], 0xFF)  # nothing held: not read, no ports, LFT "no port"


def plan_action(record: dict[str, Any]) -> str:
    """What a plan record does to its entry, as Terraform names it: "create" (the entry
    held nothing: an LFT entry of 255, an MFT group without ports, a table not read),
    "delete" (it will hold nothing), else "update"."""
    if "new" not in record:  # a compact record of several fields (PortInfoSet): the port is there
        return "update"
    old, new = record.get("old"), record.get("new")
    if record.get("table") in ("LFT", "MFT") and new in _EMPTY:
        return "delete"
    if old is None or (record.get("table") in ("LFT", "MFT") and old in _EMPTY):
        return "create"
    return "update"


def value_names(field: str, old: int, new: int) -> dict[str, str]:
    """A coded field's values by name too (`codes.value_name`): MTU bytes, VL counts, states."""
    name = codes.value_name(field, new)
    return {} if name is None else {"old_name": codes.value_name(field, old) or str(old), "new_name": name}


def decorate(rec: dict) -> dict:
    """A record as the plan prints it: with its `plan_action`, and a coded PortInfo
    field's values by name (`value_names`)."""
    extra = value_names(rec["field"], rec["old"], rec["new"]) if rec.get("table") == "PortInfo" \
        and isinstance(rec.get("new"), int) and isinstance(rec.get("old"), int) else {}
    return {**rec, **extra, "action": plan_action(rec)}


def expand(rec: dict) -> list[dict]:
    """A compact record as the per-entry records it stands for (a detailed one as itself),
    each as the plan prints it (`decorate`)."""
    rec = {k: v for k, v in rec.items() if k != "action"}
    return [decorate(r) for r in _entries(rec)]


def _entries(rec: dict) -> list[dict]:
    table = rec["table"]
    base = {k: v for k, v in rec.items() if k not in ("table", "fields", "ports", "in_ports", "out_ports")}
    if table == "LFTBlock":
        return linear.lft_block_entries(rec)
    if table == "MFTBlock":
        return multicast.mft_block_entries(rec)
    if table == "PortInfoSet":
        return [{"node": rec["node"], "guid": rec["guid"], "port": rec["port"], "table": "PortInfo", "field": f,
                 "old": old, "new": new} for f, (old, new) in rec["fields"].items()]
    if table == "SL2VLGroup":
        return [{**base, "table": "SL2VL", "in_port": i, "out_port": o}
                for o in unranges(rec["out_ports"]) for i in unranges(rec["in_ports"])]
    if table in ("VLArbGroup", "P_KeyGroup"):
        plain = table[:-len("Group")]
        zero, size = ([0, 0], 32) if plain == "VLArb" else (0, 32)
        base.update(old=_pad(rec["old"], zero, size), new=_pad(rec["new"], zero, size))
        return [{**base, "table": plain, _PORT_FIELD[plain]: p} for p in unranges(rec["ports"])]
    return [rec]


def _trim(entries: list | None) -> list | None:
    """A table's entries without the trailing zero ones (0, or [0, 0] VLArb pairs)."""
    if entries is None:
        return None
    n = len(entries)
    while n and not any(entries[n - 1] if isinstance(entries[n - 1], list) else [entries[n - 1]]):
        n -= 1
    return entries[:n]


def _pad(entries: list | None, zero: Any, size: int) -> list | None:
    """`_trim` undone: ``size`` entries."""
    return None if entries is None else list(entries) + [list(zero) if isinstance(zero, list) else zero
                                                         for _ in range(size - len(entries))]


def canonical(records: Iterable[dict[str, Any]]) -> list[str]:
    """Records as sorted JSON texts: the same multiset of records gives the same list."""
    return sorted(json.dumps(r, sort_keys=True) for r in records)
