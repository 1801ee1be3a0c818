"""Forwarding tables as text: the formats infiniband-diags prints (ibroute, dump_lfts /
dump_fts, which OpenSM's file routing engine loads) and the parser of the unicast dump.

Output follows infiniband-diags byte for byte (trailing spaces included), so what parses
ibroute's output parses ours. One deliberate difference: ibroute 44 never reads the
block holding LID LinearFDBTop when the top is a multiple of 64, so it drops that LID; we
read blocks 0..top//64 and show it (docs/PITFALLS.md).
"""
from __future__ import annotations

import dataclasses
import re

from mad import forwarding as fw
from mad.attributes import NodeType
from smagent.errors import BadInput

NODE_TYPE_NAMES: dict[int, str] = {NodeType.CA: "Channel Adapter", NodeType.SWITCH: "Switch", NodeType.ROUTER: "Router"}


def portid_str(target) -> str:
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


# ===================================================================================
# the dump format: parse, validate, plan
# ===================================================================================
class DumpError(BadInput):
    """A dump file that cannot be loaded; ``problems`` lists every one found."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems), problems)


@dataclasses.dataclass
class LftSection:
    """One switch's table in a dump: its header line, its LID lines and its trailer."""
    guid: int
    line: int
    top: int | None  # from "[0x0-0xTOP]" (or OpenSM's "[0-TOP]"), if the header has it
    description: str = ""
    entries: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)  # lid -> (port, line)
    lid_lines: int = 0  # LID lines seen, for the trailer's count
    trailer: int | None = None  # the line of "N [valid ]lids dumped"

    def max_routed_lid(self) -> int:
        """The highest LID given a real port (not 255), 0 if none."""
        return max((lid for lid, (port, _l) in self.entries.items() if port != fw.LFT_NO_PORT), default=0)


_RANGE_RE = re.compile(r"\[(?:0x)?([0-9a-fA-F]+)-(0x)?([0-9a-fA-F]+)\]")
_GUID_RE = re.compile(r"([0-9a-fA-F]+)(?=\s|$)")
_DESC_RE = re.compile(r"\((.*)\):\s*$")
_ENTRY_RE = re.compile(r"0x([0-9a-fA-F]+)\s+(\d+)(?=\s|$)")
_TRAILER_RE = re.compile(r"(\d+) (valid )?lids dumped\s*$")
# the other lines ibroute / dump_lfts print, which carry no table data
_IGNORED_RE = re.compile(r"(Lid\s+Out\s+Destination|Port\s+Info|\*\*\*)")


def parse_lft_dump(text: str, source: str = "<dump>") -> list[LftSection]:
    """Parse ibroute/dump_lfts unicast output (the format OpenSM's ``-U`` file loads).

    As OpenSM reads it: leading blanks skipped, ``#`` starts a comment line, a line
    beginning "Unicast lids" opens a switch (its GUID after " guid 0x"), a line beginning
    "0x" is "LID PORT [anything]" with the LID in hex and the port in decimal. Unlike
    OpenSM (which skips what it cannot use) every problem is an error, with its line.

    Every section must end with its trailer, and the trailer's count must match: a file
    cut at a line break would otherwise load as a table whose missing LIDs forward
    nowhere. "N valid lids dumped" (ibroute, dump_lfts) counts the LID lines; "N lids
    dumped" counts them too (``-a``), or, in OpenSM's own dump, is the top of the range."""
    p = _DumpParser(source)
    for n, raw in enumerate(text.splitlines(), 1):
        p.line(n, raw.strip())
    p.close_section()
    if not p.sections and not p.problems:
        p.problems.append(f"{source}: no 'Unicast lids ... guid 0x...' section: not a unicast table dump")
    if p.problems:
        raise DumpError(p.problems)
    return p.sections


class _DumpParser:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[str] = []
        self.sections: list[LftSection] = []
        self.by_guid: dict[int, LftSection] = {}
        self.cur: LftSection | None = None

    def line(self, n: int, line: str) -> None:
        where = f"{self.source}:{n}"
        if not line or line.startswith("#"):
            return
        if line.startswith("Multicast mlids"):
            self.close_section()
            self.problems.append(f"{where}: a multicast table (ibroute -M); lft load takes unicast tables")
        elif line.startswith("Unicast lids"):
            self.close_section()
            self.header(n, where, line)
        elif line.startswith("0x"):
            self.entry(n, where, line)
        elif (t := _TRAILER_RE.match(line)) is not None:
            self.trailer(n, where, int(t.group(1)), bool(t.group(2)))
        elif not _IGNORED_RE.match(line):
            self.problems.append(f"{where}: not a line of an ibroute/dump_lfts unicast dump: {line!r}")

    def close_section(self) -> None:
        s, self.cur = self.cur, None
        if s is not None and s.trailer is None:
            self.problems.append(f"{self.source}:{s.line}: the section of switch 0x{s.guid:016x} has no "
                                 f"'N valid lids dumped' line after its LIDs: the file is cut short or edited")

    def header(self, n: int, where: str, line: str) -> None:
        at = line.find(" guid 0x")
        m = _GUID_RE.match(line[at + 8:]) if at >= 0 else None
        if m is None:
            self.problems.append(f"{where}: cannot parse the switch GUID (expected '... guid 0x<hex> ...')")
            return
        guid = int(m.group(1), 16)
        if guid > 0xFFFFFFFFFFFFFFFF:
            self.problems.append(f"{where}: switch GUID 0x{m.group(1)} is longer than 64 bits")
            return
        if guid in self.by_guid:
            self.problems.append(f"{where}: switch GUID 0x{guid:016x} appears again "
                                 f"(first at line {self.by_guid[guid].line})")
            return
        r = _RANGE_RE.search(line)
        d = _DESC_RE.search(line)
        self.cur = LftSection(guid, n, int(r.group(3), 16 if r.group(2) else 10) if r else None,
                              d.group(1) if d else "")
        self.by_guid[guid] = self.cur
        self.sections.append(self.cur)

    def entry(self, n: int, where: str, line: str) -> None:
        cur = self.cur
        if cur is not None:
            cur.lid_lines += 1
            if cur.trailer is not None:
                self.problems.append(f"{where}: LID line after the section's 'lids dumped' line "
                                     f"(line {cur.trailer})")
                return
        m = _ENTRY_RE.match(line)
        if m is None:
            self.problems.append(f"{where}: cannot parse 'LID PORT' (LID in hex, port in decimal): {line!r}")
            return
        lid, port = int(m.group(1), 16), int(m.group(2))
        problems = []
        if cur is None:
            problems.append(f"{where}: LID line outside a switch section (no valid 'Unicast lids ... "
                            f"guid 0x...' header before it)")
        if lid == 0 and port == fw.LFT_NO_PORT:
            pass  # what `--all` / `ibroute -a` print for the reserved LID 0: harmless
        elif not 1 <= lid <= fw.UNICAST_LID_MAX:
            problems.append(f"{where}: LID 0x{lid:x} is not a unicast LID (1..0xbfff)")
        if port > fw.LFT_NO_PORT:
            problems.append(f"{where}: port {port} is not a port (0..254, or 255 for none)")
        self.problems += problems
        if problems or cur is None:
            return
        prev = cur.entries.get(lid)
        if prev is not None and prev[0] != port:
            self.problems.append(f"{where}: LID 0x{lid:04x} -> port {port}, but line {prev[1]} says port {prev[0]}")
            return
        cur.entries[lid] = (port, n)

    def trailer(self, n: int, where: str, count: int, valid: bool) -> None:
        cur = self.cur
        if cur is None:
            return  # after a header that did not parse: that problem is reported already
        if cur.trailer is not None:
            self.problems.append(f"{where}: a second 'lids dumped' line for switch 0x{cur.guid:016x} "
                                 f"(first at line {cur.trailer})")
            return
        cur.trailer = n
        if count != cur.lid_lines and (valid or count != cur.top):
            self.problems.append(f"{where}: says {count} {'valid ' if valid else ''}lids dumped, but the section "
                                 f"of switch 0x{cur.guid:016x} (line {cur.line}) has {cur.lid_lines} LID lines: "
                                 f"the file is cut short or edited")


def format_lft_dump(topo, tables: dict[int, bytes], *, dump_all: bool = False) -> list[str]:
    """dump_lfts of every switch of ``topo`` whose table is in ``tables`` (guid -> LIDs
    0..LinearFDBTop, as `fdb.lft.read_all` reads them: a switch without an LFT is not
    there), switches in discovery order, destinations resolved on ``topo``."""
    index = lid_index(topo)
    lines = []
    for n in dump_order(topo):
        if n.guid in tables:
            top = min(n.switch_info.linear_fdb_top, len(tables[n.guid]) - 1)  # what was read
            lines += format_lft(dump_portid_str(n.path), n.guid, n.description, top, tables[n.guid], n.num_ports,
                                dump_all=dump_all, dest=DestResolver(index))
    return lines


def dump_order(topo) -> list:
    """The switches a dump lists (SwitchInfo read), nearest first, as dump_lfts walks them."""
    return sorted((n for n in topo.switches() if n.switch_info is not None), key=lambda n: (len(n.path), n.path))
