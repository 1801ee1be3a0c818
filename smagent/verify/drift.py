"""`smagent diff BASELINE` / `Session.diff`: what changed behind our back, table by table.

The state of a fabric is what a snapshot reads (`smagent.verify.recording.reads`), flattened into
entries with an identity each, in the shape of the plan's records (`SweepResult.
plan_changes`): PortInfo (node, port, field), SwitchInfo (switch, field), LFT (switch,
LID: the port), MFT (switch, MLID: the ports), SL2VL (node, port, in, out), VLArb (node,
port, priority, entries), P_Key (node, port, block), NodeDescription (node). A CA's tables
are keyed by the port their path enters (the plan's records say port 0 there, and give
the path). Fields that move by themselves (violation counters, LocalPortNum: the port a
Get came in by) and keys (M_Key) are left out; SMInfo and RFTs are not compared.

A baseline is a snapshot (`smagent snapshot`; replayed here: `transport.replay`) or the
JSON of a plan (`plan --json`): then each of its records says what the desired state
wants (``new``), and an entry differs when the fabric holds something else.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable

from mad import forwarding as fw
from mad.attributes import (LinearForwardingTable, MulticastForwardingTable, NodeDescription, P_KeyTable, PortInfo,
                            SLtoVLMappingTable, SwitchInfo, VLArbitrationTable, vlarb_entries)
from smagent import discovery
from smagent.verify import recording as snapshot
from smagent.errors import BadInput
from smagent.sweep import planjson
from smagent.transport.base import Transport

# fields that change without anyone writing them, and secrets
SKIPPED_FIELDS = {"m_key", "local_port_num", "m_key_violations", "p_key_violations", "q_key_violations"}
TABLE_ORDER = ("NodeDescription", "PortInfo", "SwitchInfo", "LFT", "MFT", "SL2VL", "VLArb", "P_Key")
_DEFAULTS: dict[str, Any] = {"LFT": fw.LFT_NO_PORT, "MFT": []}

# a plan record's fields that are not its entry's name (the values, how to reach it, what the Set does)
_NOT_NAMING = ("old", "new", "old_name", "new_name", "action", "path", "block")
Entries = dict[tuple, tuple[dict[str, Any], Any]]  # identity -> (the record's naming fields, value)


@dataclasses.dataclass
class Diff:
    """Every difference between a baseline and the fabric, as records: the naming fields
    of a plan record, then ``baseline`` and ``now``."""
    baseline: str
    records: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        """No difference."""
        return not self.records

    def by_table(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r["table"]] = out.get(r["table"], 0) + 1
        return out

    def lines(self) -> list[str]:
        return [line(r) for r in self.records]

    def as_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "differences": len(self.records), "by_table": self.by_table(),
                "records": self.records}

    def __repr__(self) -> str:
        return f"<Diff against {self.baseline}: {len(self.records)} differences {self.by_table()}>"


def line(r: dict[str, Any]) -> str:
    """One difference as text: table, where, baseline -> now."""
    who = r.get("switch") or r.get("node")
    where = " ".join(f"{k} {r[k]}" for k in ("port", "in_port", "out_port", "priority", "block", "lid", "mlid",
                                            "field") if k in r)
    return f"{r['table']} {who}{' ' + where if where else ''}: {r['baseline']} -> {r['now']}"


# -- the state of a fabric -------------------------------------------------------------------
def _places(topo: discovery.Topology) -> dict[tuple[int, ...], tuple[discovery.DNode, int | None]]:
    out: dict[tuple[int, ...], tuple[discovery.DNode, int | None]] = {}
    for n in topo.nodes.values():
        if n.is_switch:
            out[n.path] = (n, None)
        else:
            out.update({path: (n, p) for p, path in n.port_paths.items()})
    return out


def _entries(n: discovery.DNode, caport: int | None, value: Any, modifier: int) -> Iterable[tuple]:
    """(identity, naming fields, value) of one Get's answer."""
    g = f"0x{n.guid:016x}"
    who = {"switch": n.description, "guid": g} if n.is_switch else {"node": n.description, "guid": g}
    if isinstance(value, NodeDescription):
        yield ("NodeDescription", g), {"table": "NodeDescription", **who}, n.description
    elif isinstance(value, PortInfo):
        port = modifier & 0xFF if n.is_switch else caport
        for k, v in value.to_dict().items():
            if k not in SKIPPED_FIELDS:
                yield ("PortInfo", g, port, k), {"table": "PortInfo", **who, "port": port, "field": k}, int(v)
    elif isinstance(value, SwitchInfo):
        for k, v in value.to_dict().items():
            yield ("SwitchInfo", g, k), {"table": "SwitchInfo", **who, "field": k}, int(v)
    elif isinstance(value, LinearForwardingTable):
        base = modifier * fw.LFT_BLOCK_SIZE
        for i, p in enumerate(value.ports):
            if p != _DEFAULTS["LFT"]:
                yield ("LFT", g, base + i), {"table": "LFT", **who, "lid": base + i}, p
    elif isinstance(value, MulticastForwardingTable):
        block, position = fw.mft_from_modifier(modifier)
        for i, mask in enumerate(value.port_masks):
            mlid = fw.MULTICAST_LID_MIN + block * fw.MFT_BLOCK_SIZE + i
            ports = [position * 16 + b for b in range(16) if mask >> b & 1]
            if ports:
                yield ("MFT", g, mlid), {"table": "MFT", **who, "mlid": f"0x{mlid:04x}"}, ports
    else:
        yield from _link_entries(n, caport, value, modifier, who)


def _link_entries(n, caport, value, modifier, who) -> Iterable[tuple]:
    g = who["guid"]
    if isinstance(value, SLtoVLMappingTable):
        inp, outp = fw.sl2vl_from_modifier(modifier)
        yield (("SL2VL", g, caport, inp, outp), {"table": "SL2VL", **who, "port": caport, "in_port": inp,
                                                 "out_port": outp}, list(value.sl_to_vl))
    elif isinstance(value, VLArbitrationTable):
        table, half, port = fw.vlarb_from_modifier(modifier)
        port = caport if caport is not None else port
        yield (("VLArb", g, port, table, half * 32), {"table": "VLArb", **who, "port": port, "priority": table,
                                                      "entries": [half * 32, half * 32 + 31]},
               [list(e) for e in vlarb_entries(value)])
    elif isinstance(value, P_KeyTable):
        block, port = fw.pkey_from_modifier(modifier)
        port = caport if caport is not None else port
        yield ("P_Key", g, port, block), {"table": "P_Key", **who, "port": port, "block": block}, list(value.p_keys)


def fabric_state(transport: Transport, *, mft_blocks: int = snapshot.MFT_BLOCKS_DEFAULT
                 ) -> tuple[discovery.Topology, Entries]:
    """Discover, read what a snapshot reads, and flatten it into entries."""
    topo = discovery.discover(transport)
    places = _places(topo)
    reqs = snapshot.reads(topo, mft_blocks=mft_blocks)
    out: Entries = {}
    for req, rep in zip(reqs, transport.execute(reqs)):
        at = places.get(req.path or ())
        if not rep.ok or at is None:
            continue  # a table the port lacks, a node gone: no entries (a node gone shows as its description)
        for ident, meta, value in _entries(at[0], at[1], rep.value(), req.smp.attribute_modifier):
            out[ident] = (meta, value)
    return topo, out


# -- comparing -------------------------------------------------------------------------------
def _order(rec: dict[str, Any]) -> tuple:
    return (TABLE_ORDER.index(rec["table"]) if rec["table"] in TABLE_ORDER else len(TABLE_ORDER), rec["guid"])


def compare(baseline: str, base: Entries, now: Entries) -> Diff:
    """Every entry whose value differs (an entry only one side holds: the other side's
    default, LFT 255 (no port), MFT no ports, else None)."""
    out = []
    for ident in sorted(set(base) | set(now), key=repr):
        meta = (base.get(ident) or now[ident])[0]
        default = _DEFAULTS.get(ident[0])
        b = base[ident][1] if ident in base else default
        n = now[ident][1] if ident in now else default
        if b != n:
            out.append({**meta, "baseline": b, "now": n})
    out.sort(key=_order)
    return Diff(baseline, out)


def plan_entries(doc: Any, topo: discovery.Topology, source: str) -> Entries:
    """The records of a `plan --json` document as entries: what the desired state wants."""
    records = doc.get("plan") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise BadInput(f"{source}: not a snapshot nor the JSON of `smagent plan --json` (no \"plan\" list)")
    port_of = {tuple(path): p for n in topo.cas() for p, path in n.port_paths.items()}
    out: Entries = {}
    try:  # the compact records (one per LFT block, port, group of tables) as per-entry ones
        records = [e for r in records for e in planjson.expand(r)]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{source}: not the records of a plan ({e!r})") from None
    for i, r in enumerate(records, 1):
        if isinstance(r, dict) and r.get("table") == "GUIDInfo":
            continue  # alias GUIDs: what hosts asked the running SM's SA, not a desired state a snapshot reads
        try:
            out[_plan_identity(r, port_of)] = ({k: v for k, v in r.items() if k not in _NOT_NAMING
                                                or (k == "block" and r["table"] == "P_Key")}, r["new"])
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput(f"{source}: plan record {i}: not a plan record ({e!r})") from None
    return out


def _plan_identity(r: dict[str, Any], port_of: dict) -> tuple:
    t, g = r["table"], r["guid"]
    caport = port_of.get(tuple(r["path"])) if "path" in r and r.get("port", 0) == 0 else None
    if t == "PortInfo":
        return (t, g, r["port"], r["field"])
    if t == "SwitchInfo":
        return (t, g, r["field"])
    if t == "LFT":
        return (t, g, int(r["lid"]))
    if t == "MFT":
        return (t, g, int(r["mlid"], 16))
    if t == "SL2VL":
        return (t, g, caport, r["in_port"], r["out_port"])
    if t == "VLArb":
        return (t, g, caport if caport is not None else r["port"], r["priority"], r["entries"][0])
    if t == "P_Key":
        return (t, g, caport if caport is not None else r["port"], r["block"])
    raise ValueError(f"table {t!r}")


def compare_plan(baseline: str, wanted: Entries, now: Entries) -> Diff:
    """Each planned entry the fabric does not hold (MFT ports compared as sets)."""
    out = []
    for ident, (meta, want) in wanted.items():
        default = _DEFAULTS.get(ident[0])
        have = now[ident][1] if ident in now else default
        if ident[0] == "MFT":
            want, have = sorted(want), sorted(have or [])
        if want != have:
            out.append({**meta, "baseline": want, "now": have})
    out.sort(key=_order)
    return Diff(baseline, out)


def read_baseline(path: str | os.PathLike) -> Any:
    """A `plan --json` document (a dict), or None: the file is not JSON, so a capture (a
    snapshot, checked whole when its replay opens)."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadInput(f"{p}: {e.strerror or e}") from None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None  # binary: a capture
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise BadInput(f"{p}: not valid JSON: {e}") from None


def diff(transport: Transport, baseline: str | os.PathLike, *, mft_blocks: int = snapshot.MFT_BLOCKS_DEFAULT) -> Diff:
    """The fabric behind ``transport`` against ``baseline`` (a snapshot or a plan's JSON).
    The baseline is read whole first: a bad file is refused before the first SMP."""
    from smagent.transport.replay import ReplayTransport
    name = os.fspath(baseline)
    doc = read_baseline(name)
    if doc is not None:
        topo, now = fabric_state(transport, mft_blocks=mft_blocks)
        return compare_plan(name, plan_entries(doc, topo, name), now)
    with ReplayTransport(name) as base_t:  # checked whole when it opens
        _topo, base = fabric_state(base_t, mft_blocks=mft_blocks)
    _topo, now = fabric_state(transport, mft_blocks=mft_blocks)
    return compare(name, base, now)


__all__ = ["Diff", "diff", "fabric_state", "compare", "compare_plan", "plan_entries", "line"]
