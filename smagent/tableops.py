"""Forwarding tables as text and as plans: the formats infiniband-diags uses (ibroute,
dump_lfts / dump_fts, which OpenSM's file routing engine loads), their parser, and the
plan/validate/apply steps of `lft`/`mft` commands, backup/restore and the file engine.

Text output follows infiniband-diags byte for byte (trailing spaces included), so what
parses ibroute's output parses ours. One deliberate difference: ibroute 44 never reads
the block holding LID LinearFDBTop when the top is a multiple of 64, so it drops that
LID; we read blocks 0..top//64 and show it (DESIGN.md, Known pitfalls).
"""
from __future__ import annotations

import dataclasses
import re

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import (
    AttrID, NodeType, SMState, SwitchInfo,
)
from mad.header import Method
from smagent import tables
from smagent.errors import BadInput, FabricFailure
from smagent.targets import Target
from smagent.transport.base import Request

NODE_TYPE_NAMES = {NodeType.CA: "Channel Adapter", NodeType.SWITCH: "Switch", NodeType.ROUTER: "Router"}


# ===================================================================================
# pure helpers: names, formats
# ===================================================================================
def portid_str(target: Target) -> str:
    """How ibroute names the switch it was given (libibmad's portid2str)."""
    if target.path is not None:
        return "DR path slid 65535; dlid 65535; " + ",".join(map(str, target.path))
    return f"Lid {target.lid}"


def dump_portid_str(path: tuple[int, ...]) -> str:
    """How dump_lfts/dump_fts name a discovered switch (its directed route)."""
    return "DR path slid 0; dlid 0; " + ",".join(map(str, path))


def format_lft(where: str, guid: int, desc: str, top: int, table, num_ports: int, *,
               dump_all: bool = False, dest=None) -> list[str]:
    """ibroute's unicast dump of LIDs 0..top. ``table[lid]`` is the port for each LID; an
    entry is valid when its port is at most ``num_ports`` (as ibroute decides). ``dest``
    (a `DestResolver`) adds the destination column; None gives ibroute's ``-n`` form."""
    out = [f"Unicast lids [0x0-0x{top:x}] of switch {where} guid 0x{guid:016x} ({desc}):",
           "  Lid  Out   Destination",
           "       Port     Info "]
    n = 0
    for lid in range(top + 1):
        port = table[lid]
        valid = port <= num_ports
        if not valid and not dump_all:
            continue
        info = dest(lid, valid) if dest is not None else ""
        out.append(f"0x{lid:04x} {port:03d} {info}")
        n += 1
    out.append(f"{n} {'' if dump_all else 'valid '}lids dumped ")
    return out


@dataclasses.dataclass(frozen=True)
class PortRef:
    """What a LID leads to, for the destination column of a dump."""
    node_type: int
    port_guid: int
    description: str
    base_lid: int
    lmc: int


def lid_index(topo) -> dict[int, PortRef]:
    """Every LID of a discovered topology (all 2^LMC of each port) -> the port it names."""
    index: dict[int, PortRef] = {}
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.lid:
                continue
            ref = PortRef(n.node_type, n.port_guids.get(p, n.node_info.port_guid), n.description, pi.lid, pi.lmc)
            for lid in range(pi.lid, min(pi.lid + (1 << pi.lmc), fw.UNICAST_LID_MAX + 1)):
                index.setdefault(lid, ref)
    return index


class DestResolver:
    """dump_fts's destination column (``dump_lid``), including its LMC path numbering: the
    base LID of a port with LMC > 0 names the port, the LIDs after it are "path #k out of
    n". One resolver per switch (the numbering state starts afresh, as in dump_fts)."""

    def __init__(self, index: dict[int, PortRef]):
        self.index = index
        self.last_port_lid = 0
        self.base_port_lid = 0
        self.port_guid = 0

    def __call__(self, lid: int, valid: bool) -> str:
        if lid <= self.last_port_lid:
            if not valid:
                return f": (path #{lid - self.base_port_lid} - illegal port)"
            n = self.last_port_lid - self.base_port_lid + 1
            if not self.port_guid:
                return f": (path #{lid - self.base_port_lid + 1} out of {n})"
            return f": (path #{lid - self.base_port_lid + 1} out of {n}: portguid 0x{self.port_guid:016x})"
        if not valid:
            return ": (illegal port)"
        self.port_guid = 0
        ref = self.index.get(lid)
        if ref is None:
            return ": (node info not available fabric scan)"
        self.port_guid = ref.port_guid
        if ref.lmc > 0:
            self.base_port_lid = ref.base_lid
            self.last_port_lid = ref.base_lid + (1 << ref.lmc) - 1
        kind = NODE_TYPE_NAMES.get(ref.node_type, f"?({ref.node_type})")
        return f": ({kind} portguid 0x{ref.port_guid:016x}: '{ref.description}')"


def mft_range(cap: int, top: int) -> tuple[int, int]:
    """The MLIDs ibroute -M shows: 0xC000 .. 0xC000+cap-1, cut at MulticastFDBTop if set."""
    end = fw.MULTICAST_LID_MIN + cap - 1
    if top and top < end and top >= fw.MULTICAST_LID_MIN - 1:
        end = top
    return fw.MULTICAST_LID_MIN, min(end, fw.MULTICAST_LID_MAX)


def mft_blocks_to_read(cap: int, top: int) -> list[int]:
    start, end = mft_range(cap, top)
    if end < start:
        return []
    return list(range(0, (end - fw.MULTICAST_LID_MIN) // fw.MFT_BLOCK_SIZE + 1))


def format_mft(where: str, guid: int, desc: str, first: int, last: int, masks, positions: int) -> list[str]:
    """ibroute -M -n: every MLID in first..last with any port set, PortMask positions 0..
    in order, 4 hex digits each. ``masks[(block, position)]`` is a block's 32 entries."""
    out = [f"Multicast mlids [0x{first:x}-0x{last:x}] of switch {where} guid 0x{guid:016x} ({desc}):",
           " MLid       Port Mask"]
    n = 0
    for mlid in range(first, last + 1):
        block, i = fw.mft_block(mlid)
        row = [masks.get((block, p), [0] * fw.MFT_BLOCK_SIZE)[i] for p in range(positions)]
        if not any(row):
            continue
        out.append(f"0x{mlid:04x}      " + "".join(f"{m:04x}" for m in row))
        n += 1
    out.append(f"{n} valid mlids dumped ")
    return out


def mft_ports(masks, mlid: int, positions: int) -> list[int]:
    block, i = fw.mft_block(mlid)
    ports = []
    for p in range(positions):
        m = masks.get((block, p), [0] * fw.MFT_BLOCK_SIZE)[i]
        ports += [p * fw.MFT_PORTS_PER_POSITION + b for b in range(fw.MFT_PORTS_PER_POSITION) if m >> b & 1]
    return ports


def port_masks(ports, positions: int) -> list[int]:
    """A set of ports as one 16-bit PortMask per position."""
    masks = [0] * positions
    for port in ports:
        pos, bit = fw.mft_position(port)
        masks[pos] |= 1 << bit
    return masks


# ===================================================================================
# the dump format: parse, validate, plan
# ===================================================================================
class DumpError(BadInput):
    """A dump file that cannot be loaded; ``problems`` lists every one found."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems), problems)


@dataclasses.dataclass
class LftSection:
    """One switch's table in a dump: its header line and its LID lines."""
    guid: int
    line: int
    top: int | None  # from "[0x0-0xTOP]", if the header has it
    description: str = ""
    entries: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)  # lid -> (port, line)

    def max_routed_lid(self) -> int:
        """The highest LID given a real port (not 255), 0 if none."""
        return max((lid for lid, (port, _l) in self.entries.items() if port != fw.LFT_NO_PORT), default=0)


_RANGE_RE = re.compile(r"\[0x([0-9a-fA-F]+)-0x([0-9a-fA-F]+)\]")
_GUID_RE = re.compile(r"([0-9a-fA-F]+)(?=\s|$)")
_DESC_RE = re.compile(r"\((.*)\):\s*$")
_ENTRY_RE = re.compile(r"0x([0-9a-fA-F]+)\s+(\d+)(?=\s|$)")
# the other lines ibroute / dump_lfts print, which carry no table data
_IGNORED_RE = re.compile(r"(Lid\s+Out\s+Destination|Port\s+Info|\d+ (valid )?lids dumped|\*\*\*)")


def parse_lft_dump(text: str, source: str = "<dump>") -> list[LftSection]:
    """Parse ibroute/dump_lfts unicast output (the format OpenSM's ``-U`` file loads).

    As OpenSM reads it: leading blanks skipped, ``#`` starts a comment line, a line
    beginning "Unicast lids" opens a switch (its GUID after " guid 0x"), a line beginning
    "0x" is "LID PORT [anything]" with the LID in hex and the port in decimal. Unlike
    OpenSM (which skips what it cannot use) every problem is an error, with its line."""
    problems: list[str] = []
    sections: list[LftSection] = []
    by_guid: dict[int, LftSection] = {}
    cur: LftSection | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{source}:{n}"
        if not line or line.startswith("#"):
            continue
        if line.startswith("Multicast mlids"):
            problems.append(f"{where}: a multicast table (ibroute -M); lft load takes unicast tables")
            cur = None
            continue
        if line.startswith("Unicast lids"):
            cur = None
            at = line.find(" guid 0x")
            m = _GUID_RE.match(line[at + 8:]) if at >= 0 else None
            if m is None:
                problems.append(f"{where}: cannot parse the switch GUID (expected '... guid 0x<hex> ...')")
                continue
            guid = int(m.group(1), 16)
            if guid > 0xFFFFFFFFFFFFFFFF:
                problems.append(f"{where}: switch GUID 0x{m.group(1)} is longer than 64 bits")
                continue
            if guid in by_guid:
                problems.append(f"{where}: switch GUID 0x{guid:016x} appears again (first at line {by_guid[guid].line})")
                continue
            r = _RANGE_RE.search(line)
            d = _DESC_RE.search(line)
            cur = LftSection(guid, n, int(r.group(2), 16) if r else None, d.group(1) if d else "")
            by_guid[guid] = cur
            sections.append(cur)
            continue
        if line.startswith("0x"):
            m = _ENTRY_RE.match(line)
            if m is None:
                problems.append(f"{where}: cannot parse 'LID PORT' (LID in hex, port in decimal): {line!r}")
                continue
            lid, port = int(m.group(1), 16), int(m.group(2))
            bad = False
            if cur is None:
                problems.append(f"{where}: LID line outside a switch section (no valid 'Unicast lids ... "
                                f"guid 0x...' header before it)")
                bad = True
            if lid == 0 and port == fw.LFT_NO_PORT:
                pass  # what `--all` / `ibroute -a` print for the reserved LID 0: harmless
            elif not 1 <= lid <= fw.UNICAST_LID_MAX:
                problems.append(f"{where}: LID 0x{lid:x} is not a unicast LID (1..0xbfff)")
                bad = True
            if port > fw.LFT_NO_PORT:
                problems.append(f"{where}: port {port} is not a port (0..254, or 255 for none)")
                bad = True
            if bad:
                continue
            prev = cur.entries.get(lid)
            if prev is not None and prev[0] != port:
                problems.append(f"{where}: LID 0x{lid:04x} -> port {port}, but line {prev[1]} says port {prev[0]}")
                continue
            cur.entries[lid] = (port, n)
            continue
        if _IGNORED_RE.match(line):
            continue
        problems.append(f"{where}: not a line of an ibroute/dump_lfts unicast dump: {line!r}")
    if not sections and not problems:
        problems.append(f"{source}: no 'Unicast lids ... guid 0x...' section: not a unicast table dump")
    if problems:
        raise DumpError(problems)
    return sections


@dataclasses.dataclass
class SwitchFacts:
    """What a plan needs to know about a switch (from discovery or from Gets)."""
    guid: int
    name: str
    num_ports: int
    switch_info: object
    path: tuple[int, ...] | None = None
    target: Target | None = None

    @property
    def lft_cap(self) -> int:
        return self.switch_info.linear_fdb_cap

    @property
    def lft_top(self) -> int:
        return min(self.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX)

    @property
    def max_lid(self) -> int:
        """The highest LID this switch's LFT can hold."""
        return min(self.lft_cap - 1, fw.UNICAST_LID_MAX)

    def where(self) -> Target:
        return self.target if self.target is not None else Target(path=self.path)


def facts_from_topology(topo) -> dict[int, SwitchFacts]:
    return {n.guid: SwitchFacts(n.guid, n.description, n.num_ports, n.switch_info, path=n.path)
            for n in topo.switches() if n.switch_info is not None}


def check_lft_entry(f: SwitchFacts, lid: int, port: int) -> list[str]:
    """Problems with setting LID -> port on switch ``f`` (empty: fine)."""
    out = []
    if f.lft_cap == 0:
        out.append(f"{f.name} has no LinearForwardingTable (LinearFDBCap 0)")
    elif lid != 0 and not 1 <= lid <= f.max_lid:
        out.append(f"LID 0x{lid:x} ({lid}) is beyond {f.name}'s LinearFDBCap {f.lft_cap} "
                   f"(LIDs 1..0x{f.max_lid:x})")
    if port != fw.LFT_NO_PORT and not 0 <= port <= f.num_ports:
        out.append(f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}, or 255 for none")
    return out


def validate_sections(sections: list[LftSection], facts: dict[int, SwitchFacts], source="<dump>",
                      other_nodes: dict[int, str] | None = None) -> list[str]:
    """Every problem loading these sections into this fabric would have."""
    problems = []
    for s in sections:
        f = facts.get(s.guid)
        if f is None:
            what = (f"is {other_nodes[s.guid]!r}, not a switch" if other_nodes and s.guid in other_nodes
                    else "is not a switch in this fabric")
            problems.append(f"{source}:{s.line}: switch GUID 0x{s.guid:016x}{f' ({s.description})' if s.description else ''} {what}")
            continue
        for lid, (port, line) in sorted(s.entries.items()):
            problems += [f"{source}:{line}: {p}" for p in check_lft_entry(f, lid, port)]
    return problems


def section_span(s: LftSection, f: SwitchFacts) -> int:
    """The highest LID a load compares for this switch: the dump's range, its LIDs, and the
    switch's current LinearFDBTop (everything up to it is replaced), within the cap."""
    span = max([f.lft_top, s.top or 0, *s.entries])
    return min(span, f.max_lid)


def load_blocks_to_read(sections: list[LftSection], facts: dict[int, SwitchFacts]) -> list[tuple[int, tuple, int]]:
    wanted = []
    for s in sections:
        f = facts[s.guid]
        for b in range(section_span(s, f) // fw.LFT_BLOCK_SIZE + 1):
            wanted.append((f.guid, f.path, b))
    return wanted


@dataclasses.dataclass
class TopChange:
    """Raise a switch's LinearFDBTop (and/or MulticastFDBTop) with a SwitchInfo Set."""
    facts: SwitchFacts
    new: object  # SwitchInfo to write

    def describe(self) -> list[str]:
        old = self.facts.switch_info
        out = []
        for k in ("linear_fdb_top", "multicast_fdb_top"):
            if getattr(old, k) != getattr(self.new, k):
                fmt = (lambda v: f"0x{v:04x}") if k == "multicast_fdb_top" else str
                out.append(f"{self.facts.name} SwitchInfo: {k} {fmt(getattr(old, k))} -> {fmt(getattr(self.new, k))}")
        return out


def raise_top(f: SwitchFacts, *, lft_top: int | None = None, mft_top: int | None = None) -> TopChange | None:
    """A SwitchInfo Set echoing what the switch holds, with a top raised (never lowered);
    PortStateChange 0 (writing 1 would clear it: not ours to touch). None: nothing to raise."""
    si = f.switch_info
    changes = {}
    if lft_top is not None and lft_top > si.linear_fdb_top:
        changes["linear_fdb_top"] = lft_top
    if mft_top is not None and si.multicast_fdb_top and mft_top > si.multicast_fdb_top:
        changes["multicast_fdb_top"] = mft_top
    if not changes:
        return None
    return TopChange(f, SwitchInfo.replace(si, port_state_change=0, **changes))


def plan_load(sections: list[LftSection], facts: dict[int, SwitchFacts], current: dict[tuple[int, int], bytes]):
    """Desired tables (each section is the switch's whole table, as OpenSM's file engine
    takes it: LIDs not listed forward nowhere) vs what the switches hold now.
    Returns ([BlockChange], [TopChange])."""
    changes, tops = [], []
    for s in sections:
        f = facts[s.guid]
        span = section_span(s, f)
        nblocks = span // fw.LFT_BLOCK_SIZE + 1
        desired = bytearray([fw.LFT_NO_PORT]) * (nblocks * fw.LFT_BLOCK_SIZE)
        for lid, (port, _line) in s.entries.items():
            desired[lid] = port
        for b in range(nblocks):
            old = current[(f.guid, b)]
            B = fw.LFT_BLOCK_SIZE
            new = bytes(desired[b * B:(b + 1) * B])
            # LIDs above the span (the tail of the last block) keep what the switch has
            lo_keep = span + 1 - b * B
            if 0 < lo_keep < B:
                new = new[:lo_keep] + old[lo_keep:]
            if new != old:
                changes.append(tables.BlockChange(f.guid, f.name, f.path, b, old, new))
        t = raise_top(f, lft_top=s.max_routed_lid())
        if t is not None:
            tops.append(t)
    return changes, tops


def lft_plan_lines(changes, tops) -> list[str]:
    out = [line for t in tops for line in t.describe()]
    for c in tables.interleave(changes):
        for lid, old, new in c.changed_lids():
            out.append(f"{c.name} LFT block {c.block}: lid {lid}: {'?' if old is None else old} -> {new}")
    return out


def lft_changes_json(changes, tops) -> list[dict]:
    out = [{"switch": t.facts.name, "guid": f"0x{t.facts.guid:016x}", "table": "SwitchInfo",
            "field": k, "old": getattr(t.facts.switch_info, k), "new": getattr(t.new, k)}
           for t in tops for k in ("linear_fdb_top", "multicast_fdb_top")
           if getattr(t.facts.switch_info, k) != getattr(t.new, k)]
    for c in tables.interleave(changes):
        for lid, old, new in c.changed_lids():
            out.append({"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "LFT", "block": c.block,
                        "lid": lid, "old": old, "new": new})
    return out


class MftChange(tables.MftChange):
    """One (block, position) of a switch's MFT that `mft set` writes, shown as ibroute
    shows PortMasks."""

    def lines(self) -> list[str]:
        out = []
        for i, (o, n) in enumerate(zip(self.old, self.new)):
            if o != n:
                out.append(f"{self.name} MFT block {self.block} position {self.position}: "
                           f"mlid 0x{fw.mft_mlid(self.block, i):04x}: 0x{o:04x} -> 0x{n:04x}")
        return out


def plan_mft_set(f: SwitchFacts, mlid: int, ports, current: dict[tuple[int, int], list[int]]) -> list[MftChange]:
    """Replace MLID's port set; only positions whose mask changes are written (a position
    already zero and left without member ports is not)."""
    positions = fw.mft_positions_for(f.num_ports)
    block, i = fw.mft_block(mlid)
    want = port_masks(ports, positions)
    out = []
    for p in range(positions):
        old = list(current[(block, p)])
        if old[i] == want[p]:
            continue
        new = list(old)
        new[i] = want[p]
        out.append(MftChange(f.guid, f.name, f.where(), block, p, old, new))
    return out


def check_mft_entry(f: SwitchFacts, mlid: int, ports) -> list[str]:
    out = []
    cap = f.switch_info.multicast_fdb_cap
    if cap == 0:
        out.append(f"{f.name} has no MulticastForwardingTable (MulticastFDBCap 0)")
    elif mlid > fw.MULTICAST_LID_MIN + cap - 1:
        out.append(f"MLID 0x{mlid:04x} is beyond {f.name}'s MulticastFDBCap {cap} "
                   f"(MLIDs 0xc000..0x{fw.MULTICAST_LID_MIN + cap - 1:04x})")
    for port in ports:
        if not 0 <= port <= f.num_ports:
            out.append(f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}")
    return out


# ===================================================================================
# fabric I/O
# ===================================================================================
class _Problem(FabricFailure):
    """A fabric failure found by this module (exit 3)."""


class _Bad(BadInput):
    """Bad input found by this module (exit 2)."""


@dataclasses.dataclass
class SwitchRead:
    facts: SwitchFacts
    node_info: object
    port0: object | None  # PortInfo of port 0, if it answered
    local_info: object | None  # NodeInfo of the local node, if asked and answered


def read_switch(transport, target: Target, *, for_set: bool = False) -> SwitchRead:
    """NodeInfo, NodeDescription, SwitchInfo of TARGET in one batch (plus, for a Set, port
    0's PortInfo and the local node's NodeInfo for the master-SM check)."""
    reqs = [target.request(Method.GET, AttrID.NODE_INFO), target.request(Method.GET, AttrID.NODE_DESCRIPTION),
            target.request(Method.GET, AttrID.SWITCH_INFO)]
    if for_set:
        reqs += [target.request(Method.GET, AttrID.PORT_INFO, fw.portinfo_modifier(0)),
                 Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,)))]
    replies = transport.execute(reqs)
    ni_r = replies[0]
    if not ni_r.ok:
        raise _Problem(f"{target.describe()}: NodeInfo: {ni_r.error}")
    ni = ni_r.value()
    if ni.node_type != NodeType.SWITCH:
        kind = NODE_TYPE_NAMES.get(ni.node_type, f"node type {ni.node_type}")
        raise _Bad(f"{target.describe()} is not a switch (it is a {kind}, GUID 0x{ni.node_guid:016x})")
    for r, what in ((replies[1], "NodeDescription"), (replies[2], "SwitchInfo")):
        if not r.ok:
            raise _Problem(f"{target.describe()}: {what}: {r.error}")
    desc = replies[1].value().node_string
    facts = SwitchFacts(ni.node_guid, desc, ni.num_ports, replies[2].value(), path=target.path, target=target)
    port0 = local = None
    if for_set:
        port0 = replies[3].value() if replies[3].ok else None
        local = replies[4].value() if replies[4].ok else None
    return SwitchRead(facts, ni, port0, local)


def read_lft(transport, target: Target, blocks) -> dict[int, bytes]:
    got, errors = tables.read_lft_blocks(transport, [(0, target, b) for b in blocks])
    if errors:
        raise _Problem(errors[0])
    return {b: got[(0, b)] for b in blocks}


def read_mft(transport, target: Target, blocks, positions: int) -> dict[tuple[int, int], list[int]]:
    got, errors = tables.read_mft_units(transport, [(0, target, b, p) for b in blocks for p in range(positions)])
    if errors:
        raise _Problem(errors[0])
    return {(b, p): masks for (_sw, b, p), masks in got.items()}


def master_sm_warning(transport, sr: SwitchRead) -> str | None:
    """If the switch's MasterSMLID names a port whose SMInfo says MASTER (and that is not
    our own port), a warning: that SM will overwrite our change on its next re-route.
    Best effort: any failure means no warning."""
    try:
        pi = sr.port0
        if pi is None or not pi.master_sm_lid:
            return None
        local = sr.local_info
        if local is not None:
            lp = 0 if local.node_type == NodeType.SWITCH else local.local_port_num
            (r,) = transport.execute([Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), fw.portinfo_modifier(lp)))])
            if r.ok and r.value().lid == pi.master_sm_lid:
                return None  # the master SM LID is ours (set by our own sweep)
        saved = transport.retries
        transport.retries = 0  # a port with no SM may never answer: don't wait for retries
        try:
            (r,) = transport.execute([Request(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO), dlid=pi.master_sm_lid)])
        finally:
            transport.retries = saved
        if not r.ok:
            return None
        sm = r.value()
        if sm.sm_state == SMState.MASTER:
            return (f"warning: a subnet manager is MASTER (LID {pi.master_sm_lid}, GUID 0x{sm.guid:016x}, "
                    f"priority {sm.priority}); it will overwrite this change on its next re-route")
    except Exception:  # noqa: BLE001 - a warning must never break the command
        return None
    return None


def apply_tops(transport, tops: list[TopChange]) -> list[str]:
    reqs = [t.facts.where().request(Method.SET, AttrID.SWITCH_INFO, 0, t.new) for t in tops]
    problems = []
    for t, r in zip(tops, transport.execute(reqs)):
        if not r.ok:
            problems.append(f"{t.facts.name}: SwitchInfo Set failed: {r.error}")
            continue
        back = r.value()
        for k in ("linear_fdb_top", "multicast_fdb_top"):
            if getattr(back, k) != getattr(t.new, k):
                problems.append(f"{t.facts.name}: SwitchInfo {k} reads back {getattr(back, k)}, "
                                f"expected {getattr(t.new, k)}")
    return problems


