"""The I/O of link configuration: every table unit the options cover (`table_wants`,
`qos.qos_units`), read in batches (`porttables.BATCH`), diffed into `TableChange`s
(`plan_tables`); the Sets themselves go through `smagent.fdb.apply` (`fdb.porttables.write`)."""
from __future__ import annotations

from typing import Any

from smagent.fdb.porttables import BATCH, LINK_TABLES, TableChange, Want, same_table
from smagent.linkconf import pkeys
from smagent.config.linkoptions import QOS_AUTO, LinkOptions
from smagent.linkconf.qos import (QosUnit, _ca_ports, _ca_qos_wants, _switch_out_ports, _switch_out_wants, _sw0_wants,
                               _unusable, nodes_of, qos_units)
from smagent.linkconf.portinfo import enhanced_port0
from smagent.transport.base import SmpTimeout


def table_wants(topo, opts: LinkOptions, op_vls: dict, only=None) -> list[Want]:
    """Every table unit the fabric should hold, read and diffed whatever the port holds:
    P_Keys, and with qos "always" the SL2VL and VLArb tables ("auto" reads those through
    `qos_units`). `op_vls`: (guid, port) -> the OperationalVLs code the port will run;
    ``only``: the node GUIDs to plan for (None: all)."""
    always = opts.qos_mode == "always"
    out = []
    for n in nodes_of(topo, only):
        if n.is_switch:
            if n.ports.get(0) is None:
                continue
            if opts.pkeys and n.node_info.partition_cap:
                out += pkeys.switch_wants(topo, n, opts)
            if always:
                outs, linked = _switch_out_ports(topo, n, op_vls)
                out += [w for p, vls in outs for w in _switch_out_wants(n, p, linked, vls, opts)]
                if enhanced_port0(n):
                    out += _sw0_wants(n, linked, opts)
            continue
        for p, pi, path, vls in _ca_ports(topo, n, op_vls):
            if always:
                out += _ca_qos_wants(n, p, pi, path, vls, opts)
            if opts.pkeys and n.node_info.partition_cap:
                out += pkeys.ca_port_wants(topo, n, p, path, opts)
    return out


def _read(transport, wants: list[Want], failed: set[int] | None = None, seen: dict | None = None
          ) -> tuple[list[tuple[Want, Any]], list[str]]:
    """[(want, value)] of the units read, and problems: a unit that could not be read is
    never written (nor judged): the port may lack the table. ``failed`` collects the GUIDs
    of nodes a Get got no answer from (worth asking again); ``seen`` every value read, by
    (kind, node GUID, CA port or 0, AttributeModifier) (the SA's table records)."""
    got: list[tuple[Want, Any]] = []
    problems: list[str] = []
    # (kind, bytes read) -> their table, decoded once (as ``seen`` holds it): most ports hold
    # the same few tables, found by their bytes instead of decoded and interned again
    same: dict[tuple[str, bytes], Any] = {}
    for i in range(0, len(wants), BATCH):  # a batch's requests and answers alive at a time
        batch = wants[i:i + BATCH]
        _judge(batch, transport.execute([w.get() for w in batch]), same, got, problems, failed, seen)
    return got, problems


def _judge(wants, replies, same, got, problems, failed, seen) -> None:
    """`_read`'s values and problems of one batch's answers."""
    for w, rep in zip(wants, replies):
        if rep.ok:
            raw = (w.kind, rep.data)
            value = same.get(raw)
            if value is None:
                value = rep.value(LINK_TABLES[w.kind])
            if seen is not None:  # stored as ``seen`` interns it, and that object kept
                key = (w.kind, w.guid, w.port, w.modifier)
                seen[key] = value
                value = seen[key]
            same[raw] = value
            got.append((w, value))
        else:
            problems.append(f"{w.name}: {rep.request.describe()} failed ({rep.error}); not written")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(w.guid)


def _diff(read: list) -> list[TableChange]:
    """The Sets that bring [(want, value read)] to what is wanted. A switch output port's
    unread SL2VL pairs are written when its representative differs: each by its own Set,
    or all with the representative's where the switch takes all input ports at once."""
    changes = []
    for w, cur in read:
        new = w.desired(cur)
        if same_table(w.kind, cur, new):
            continue
        if w.all_inputs:  # one Set covers the siblings (OptimizedSLtoVLMappingProgramming)
            changes.append(w.change(cur, new, also=w.siblings, all_inputs=True))
            continue
        changes.append(w.change(cur, new, also=w.siblings))
        if w.siblings:  # built directly: 2 million on 11,664 hosts
            kind, guid, name, path, port, rep = w.kind, w.guid, w.name, w.path, w.port, w.modifier
            changes += [TableChange(kind, guid, name, path, m, None, new, port, rep) for m in w.siblings]
    return changes


def read_and_diff(transport, wants: list[Want], failed: set[int] | None = None, seen: dict | None = None
                  ) -> tuple[list[TableChange], list[str]]:
    """Get every wanted unit (in batches of `BATCH`) and return the Sets needed, and problems."""
    read, problems = _read(transport, wants, failed, seen)
    pkeys.settle(read)
    return _diff(read), problems


def read_and_repair(transport, units: list[QosUnit], failed: set[int] | None = None, seen: dict | None = None
                    ) -> tuple[list[TableChange], list[str], list[str]]:
    """qos "auto": read each unit's probe (a pass in batches); where its tables are unusable,
    read the unit's other tables (another) and plan for all of them what "always" plans.
    Returns (changes, problems, notes)."""
    flat = [(i, w) for i, u in enumerate(units) for w in u.probe]
    probes, problems = _read(transport, [w for _i, w in flat], failed, seen)
    unit_of = {id(w): i for i, w in flat}
    judged: list[list] = [[] for _u in units]  # per unit: [(want, value)] of its probe
    for w, v in probes:
        judged[unit_of[id(w)]].append((w, v))
    # a unit whose probe could not be read whole is not judged (the problem names it)
    bad = [(i, why) for i, u in enumerate(units) if len(judged[i]) == len(u.probe)
           for why in [_unusable(u, judged[i])] if why]
    rest, more = _read(transport, [w for i, _why in bad for w in units[i].rest()], failed, seen)
    changes = _diff([x for i, _why in bad for x in judged[i]] + rest)
    notes = []
    if bad:
        ports = sum(len(units[i].ports) for i, _why in bad)
        notes.append(f"QoS tables (qos auto): {ports} port{'s' if ports != 1 else ''} held SL2VL/VLArb tables that "
                     f"cannot carry every SL, e.g. {units[bad[0][0]].where}: {bad[0][1]}; they get the tables "
                     f"--qos writes (--no-qos leaves them)")
    return changes, problems + more, notes


def plan_tables(transport, topo, opts: LinkOptions, op_vls: dict, only=None, failed: set[int] | None = None,
                seen: dict | None = None) -> tuple[list, list, list]:
    """Read the per-port tables the options cover and plan the Sets: (changes, problems,
    notes). ``only``: node GUIDs to look at (None: all); ``failed`` collects the GUIDs of
    nodes a Get got no answer from; ``seen`` every table read (see `_read`)."""
    wants = table_wants(topo, opts, op_vls, only)  # a repair's few nodes: not the whole fabric planned
    changes, problems = read_and_diff(transport, wants, failed, seen)
    notes: list[str] = pkeys.notes(topo, opts)
    if opts.qos_mode == QOS_AUTO:
        units = qos_units(topo, opts, op_vls, only)
        more, p2, qos_notes = read_and_repair(transport, units, failed, seen)
        changes, problems, notes = changes + more, problems + p2, notes + qos_notes
    return changes, problems, notes
