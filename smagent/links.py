"""Link configuration: what an SM writes into every port besides LIDs and states, as
OpenSM's link manager, LID manager, QoS manager and P_Key manager do, diffed against
what the ports hold so only differences are written.

Per port (PortInfo, folded into the PortInfo Sets the sweep sends anyway):

* end ports (CA ports, switch port 0): GidPrefix (the subnet prefix) and SubnetTimeout;
* ports with a link: NeighborMTU = the smaller MTUCap of the two ends, capped by
  `max_mtu`; OperationalVLs = the smaller VLCap of the two ends, capped by `max_vls`
  (OpenSM: max_op_vls 5, i.e. VL0-14; a 0 from a non-compliant port counts as 1);
* switch ports with a link: HOQLife and VLStallCount, the "leaf" values (16, 7) on
  ports facing a CA or router, the others (18, 7) between switches (OpenSM's defaults);
* with QoS tables on: VLHighLimit (OpenSM's qos_high_limit, 0).

Per-port tables (their own Sets, written before any port goes ACTIVE):

* SLtoVLMappingTable: every CA port, every switch (input, output) pair whose output
  port has a link (every input port, as OpenSM: a port without a link now may get one). OpenSM's default map (SL i -> VL i, SL15 -> VL7)
  with each VL masked into the VLs the port runs, as OpenSM's QoS manager does; VL15
  (drop) is kept. Only where the port says IsSLMappingSupported. Of a switch output
  port's tables one is read (from a linked input): all are written when it differs
  (see `_switch_wants`).
* VLArbitrationTable: the low and high tables of every such port (switch output
  ports, CA ports) with VLCap above VL0, OpenSM's defaults truncated to the port's
  VLArbitrationLow/HighCap, VLs masked likewise.
* P_KeyTable: the default partition 0xFFFF (full member) at index 0 of every end
  port (CA ports, switch port 0), where OpenSM's P_Key manager puts it. Other entries
  are left as they are: partitions are not this module's to manage.

OpenSM writes the SL2VL and VLArb tables only with QoS on (`opensm -Q`); without it it
leaves what the port holds. smagent writes them by default (`qos=True`): on a port at
reset values (`smagent.sim.model`), SLs 1-15 land on VLs the port does not run.

Fields deliberately not written: RespTimeValue (read-only), LocalPhyErrors /
OverrunErrors thresholds (ibsim does not store them; a value a port cannot hold would
be rewritten by every sweep), M_Key fields (`smagent.mkeys`). SubnetTimeout rides
along: it is written in every PortInfo Set that goes out anyway, but a difference in
it alone does not trigger one, because ibsim (and so possibly other SMAs) ignore it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mad import codes
from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import (
    AttrID, NodeType, P_KeyTable, SLtoVLMappingTable, VLArbitrationTable, vlarb_block, vlarb_entries,
)
from mad.header import Method
from smagent.transport.base import Request, SmpTimeout
from smagent.errors import BadInput

DEFAULT_SUBNET_PREFIX = 0xFE80000000000000
CAP_SL_MAPPING = 1 << 6  # PortInfo.CapabilityMask: IsSLMappingSupported
# OpenSM's defaults (osm_base.h / osm_subnet.h)
OSM_MAX_OP_VLS = 5
OSM_SUBNET_TIMEOUT = 18
OSM_HOQ_LIFE, OSM_LEAF_HOQ_LIFE = 18, 16
OSM_VL_STALL, OSM_LEAF_VL_STALL = 7, 7
OSM_SL2VL = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7)
OSM_VLARB_HIGH = ((0, 4),) + tuple((vl, 0) for vl in range(1, 15))
OSM_VLARB_LOW = ((0, 0),) + tuple((vl, 4) for vl in range(1, 15))
OSM_VL_HIGH_LIMIT = 0

# the PortInfo fields this module owns; RIDE_ALONG ones never trigger a Set on their own
LINK_FIELDS = ("gid_prefix", "neighbor_mtu", "operational_vls", "hoq_life", "vl_stall_count",
               "vl_high_limit", "subnet_timeout")
RIDE_ALONG = frozenset({"subnet_timeout"})


class LinkConfigError(BadInput):
    """An option out of range; the message names it."""


@dataclasses.dataclass(frozen=True)
class LinkOptions:
    subnet_prefix: int = DEFAULT_SUBNET_PREFIX
    max_mtu: int = 4096  # bytes: 256, 512, 1024, 2048 or 4096
    max_vls: int = 15  # data VLs: 1, 2, 4, 8 or 15 (OpenSM's max_op_vls 5)
    subnet_timeout: int = OSM_SUBNET_TIMEOUT
    hoq_life: int = OSM_HOQ_LIFE
    leaf_hoq_life: int = OSM_LEAF_HOQ_LIFE
    vl_stall_count: int = OSM_VL_STALL
    leaf_vl_stall_count: int = OSM_LEAF_VL_STALL
    qos: bool = True  # program SL2VL and VLArb tables (and VLHighLimit)
    sl2vl: tuple = OSM_SL2VL
    vlarb_high: tuple = OSM_VLARB_HIGH
    vlarb_low: tuple = OSM_VLARB_LOW
    vl_high_limit: int = OSM_VL_HIGH_LIMIT
    pkeys: bool = True  # the default partition at index 0 of every end port

    def check(self) -> "LinkOptions":
        """Every problem at once, as LinkConfigError."""
        p = []
        if not 0 <= self.subnet_prefix <= 0xFFFFFFFFFFFFFFFF:
            p.append(f"subnet prefix {self.subnet_prefix:#x} is not a 64-bit value")
        if self.max_mtu not in codes.MTU_CODES:
            p.append(f"max MTU {self.max_mtu} is not one of {', '.join(map(str, codes.MTU_CODES))}")
        if self.max_vls not in codes.VL_CODES:
            p.append(f"max VLs {self.max_vls} is not one of {', '.join(map(str, codes.DATA_VLS.values()))}")
        for name in ("subnet_timeout", "hoq_life", "leaf_hoq_life"):
            if not 0 <= getattr(self, name) <= 31:
                p.append(f"{name} {getattr(self, name)} is not 0..31")
        for name in ("vl_stall_count", "leaf_vl_stall_count"):
            if not 0 <= getattr(self, name) <= 7:
                p.append(f"{name} {getattr(self, name)} is not 0..7")
        if not 0 <= self.vl_high_limit <= 255:
            p.append(f"vl_high_limit {self.vl_high_limit} is not 0..255")
        if len(self.sl2vl) != fw.SL2VL_SLS or not all(isinstance(v, int) and 0 <= v <= 15 for v in self.sl2vl):
            p.append(f"sl2vl needs 16 VLs 0..15, got {list(self.sl2vl)}")
        for name in ("vlarb_high", "vlarb_low"):
            t = getattr(self, name)
            if len(t) > 2 * fw.VLARB_BLOCK_SIZE or not all(
                    len(e) == 2 and 0 <= e[0] <= 14 and 0 <= e[1] <= 255 for e in t):
                p.append(f"{name} needs at most 64 (VL 0..14, weight 0..255) pairs")
        if p:
            raise LinkConfigError("; ".join(p))
        return self

    @property
    def mtu_code(self) -> int:
        return codes.MTU_CODES[self.max_mtu]

    @property
    def vls_code(self) -> int:
        return codes.VL_CODES[self.max_vls]


def parse_vlarb(text: str) -> tuple:
    """OpenSM's syntax "VL:WEIGHT,VL:WEIGHT,..." -> ((vl, weight), ...)."""
    out = []
    for item in filter(None, (s.strip() for s in str(text).split(","))):
        vl, sep, w = item.partition(":")
        if not sep:
            raise LinkConfigError(f"VLArb entry {item!r} is not VL:WEIGHT")
        try:
            out.append((int(vl, 0), int(w, 0)))
        except ValueError:
            raise LinkConfigError(f"VLArb entry {item!r} is not VL:WEIGHT") from None
    return tuple(out)


def parse_sl2vl(text: str) -> tuple:
    """OpenSM's syntax "0,1,2,...,15" (16 VLs) -> tuple."""
    try:
        return tuple(int(s, 0) for s in str(text).split(","))
    except ValueError:
        raise LinkConfigError(f"sl2vl {text!r} is not 16 comma-separated VLs") from None


OPTION_KEYS = ("subnet_prefix", "max_mtu", "max_vls", "subnet_timeout", "hoq_life", "leaf_hoq_life",
               "vl_stall_count", "leaf_vl_stall_count", "qos", "sl2vl", "vlarb_high", "vlarb_low", "vl_high_limit",
               "pkeys")


def options_from_mapping(doc, where: str = "links") -> LinkOptions:
    """LinkOptions from a desired-state mapping (numbers as ints or "0x.." strings;
    sl2vl and vlarb_* in OpenSM's text syntax or as lists). Every problem in one error."""
    if not isinstance(doc, dict):
        raise LinkConfigError(f"{where}: expected a mapping of {', '.join(OPTION_KEYS)}")
    kw: dict[str, Any] = {}
    problems: list[str] = []
    for k, v in doc.items():
        try:
            if k not in OPTION_KEYS:
                raise LinkConfigError(f"unknown key {k!r} (known: {', '.join(OPTION_KEYS)})")
            if k in ("qos", "pkeys"):
                if not isinstance(v, bool):
                    raise LinkConfigError(f"{k}: {v!r} is not true or false")
                kw[k] = v
            elif k == "sl2vl":
                kw[k] = parse_sl2vl(v) if isinstance(v, str) else tuple(int(x) for x in v)
            elif k in ("vlarb_high", "vlarb_low"):
                kw[k] = parse_vlarb(v) if isinstance(v, str) else tuple((int(a), int(b)) for a, b in v)
            else:
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    raise LinkConfigError(f"{k}: {v!r} is not a number")
                kw[k] = int(v, 0) if isinstance(v, str) else v
        except (LinkConfigError, ValueError, TypeError) as e:
            problems.append(f"{where}: {e}" if isinstance(e, LinkConfigError) else f"{where}.{k}: {v!r} is malformed")
    try:  # the values that parsed are range-checked too, so every problem shows at once
        opts = LinkOptions(**kw).check()
    except LinkConfigError as e:
        problems += [f"{where}: {x}" for x in str(e).split("; ")]
    if problems:
        raise LinkConfigError("; ".join(problems))
    return opts


# -- PortInfo --------------------------------------------------------------------------
def _vl_mask(op_vls: int) -> int:
    """OpenSM's mask for folding a VL into the VLs a port runs (op_vls is the code)."""
    return (1 << (op_vls - 1)) - 1 if op_vls else 0


def _peer(topo, node, port):
    other = topo.links.get((node.guid, port))
    if other is None:
        return None, None
    n = topo.nodes.get(other[0])
    return n, (n.ports.get(other[1]) if n is not None else None)


def port_fields(topo, node, port: int, opts: LinkOptions) -> dict:
    """The PortInfo link fields `port` of `node` should hold (only those that apply)."""
    pi = node.ports[port]
    want = {}
    if not node.is_switch or port == 0:
        want["gid_prefix"] = opts.subnet_prefix
        want["subnet_timeout"] = opts.subnet_timeout
    if node.is_switch and port == 0:
        return want  # base switch port 0 has no link
    peer_node, peer_pi = _peer(topo, node, port)
    if peer_pi is None:
        return want
    want["neighbor_mtu"] = max(1, min(pi.mtu_cap, peer_pi.mtu_cap, opts.mtu_code))
    want["operational_vls"] = max(1, min(pi.vl_cap, peer_pi.vl_cap, opts.vls_code))
    leaf = peer_node.node_type != NodeType.SWITCH
    if node.is_switch:
        want["hoq_life"] = opts.leaf_hoq_life if leaf else opts.hoq_life
        want["vl_stall_count"] = opts.leaf_vl_stall_count if leaf else opts.vl_stall_count
    elif node.node_type == NodeType.ROUTER:
        want["hoq_life"] = opts.leaf_hoq_life
    if opts.qos:
        want["vl_high_limit"] = opts.vl_high_limit
    return want


def port_diff(pi, want: dict) -> dict:
    """{field: (old, new)} of the fields that differ and would trigger a Set."""
    return {k: (getattr(pi, k), v) for k, v in want.items() if k not in RIDE_ALONG and getattr(pi, k) != v}


def describe_diff(diff: dict) -> list[str]:
    def fmt(k, v):
        return f"{v:#018x}" if k == "gid_prefix" else (f"{codes.MTUS.get(v, v)}" if k == "neighbor_mtu" else str(v))
    return [f"{k} {fmt(k, o)} -> {fmt(k, n)}" for k, (o, n) in diff.items()]


# -- per-port tables -------------------------------------------------------------------
@dataclasses.dataclass
class TableChange:
    """One Set of a per-port table: what the port holds (old) and what it gets (new)."""
    kind: str  # "sl2vl" | "vlarb" | "pkeys"
    guid: int
    name: str
    path: tuple[int, ...]
    modifier: int
    old: LinkTable | None  # None: not read
    new: LinkTable

    def describe(self) -> str:
        new, old = self.new, self.old  # both of the class ``kind`` names
        if isinstance(new, SLtoVLMappingTable):
            inp, outp = fw.sl2vl_from_modifier(self.modifier)
            where = f"in {inp} out {outp}" if self.modifier else "port"
            was = ",".join(map(str, old.sl_to_vl)) if isinstance(old, SLtoVLMappingTable) else "?"
            return f"SubnSet(SLtoVLMappingTable) {self.name} {where}: {was} -> {','.join(map(str, new.sl_to_vl))}"
        if isinstance(new, VLArbitrationTable):
            table, half, port = fw.vlarb_from_modifier(self.modifier)
            def fmt(b: LinkTable | None) -> str:
                return "?" if not isinstance(b, VLArbitrationTable) else (
                    ",".join(f"{vl}:{w}" for vl, w in vlarb_entries(b) if w or vl) or "(all 0:0)")
            return (f"SubnSet(VLArbitrationTable) {self.name} port {port} {table} {half * 32}-{half * 32 + 31}: "
                    f"{fmt(old)} -> {fmt(new)}")
        block, port = fw.pkey_from_modifier(self.modifier)
        was = f"{old.p_keys[0]:#06x}" if isinstance(old, P_KeyTable) else "?"
        return f"SubnSet(P_KeyTable) {self.name} port {port} block {block}: [0] {was} -> {new.p_keys[0]:#06x}"

    def request(self) -> Request:
        return Request(smpcodec.dr(Method.SET, _ATTR[self.kind], self.path, self.modifier, self.new))

    def to_json(self) -> dict[str, Any]:
        """The Set as one plan record (`smagent.sweep.SweepResult.plan_changes`): table
        SL2VL (in_port, out_port; 0/0: a CA port's own), VLArb (port, priority, entries
        first..last) or P_Key (port, block; whole blocks); old None: not read."""
        rec = {"node": self.name, "guid": f"0x{self.guid:016x}", "path": list(self.path)}
        old: Any = self.old  # the table of this Set's kind
        new: Any = self.new
        if self.kind == "sl2vl":
            inp, outp = fw.sl2vl_from_modifier(self.modifier)
            return {**rec, "table": "SL2VL", "in_port": inp, "out_port": outp,
                    "old": None if self.old is None else list(old.sl_to_vl), "new": list(new.sl_to_vl)}
        if self.kind == "vlarb":
            table, half, port = fw.vlarb_from_modifier(self.modifier)
            return {**rec, "table": "VLArb", "port": port, "priority": table, "entries": [half * 32, half * 32 + 31],
                    "old": None if self.old is None else [list(e) for e in vlarb_entries(old)],
                    "new": [list(e) for e in vlarb_entries(new)]}
        block, port = fw.pkey_from_modifier(self.modifier)
        return {**rec, "table": "P_Key", "port": port, "block": block,
                "old": None if self.old is None else list(old.p_keys), "new": list(new.p_keys)}


LinkTable = SLtoVLMappingTable | VLArbitrationTable | P_KeyTable
# the attribute class of each kind of table
LINK_TABLES: dict[str, type[LinkTable]] = {"sl2vl": SLtoVLMappingTable, "vlarb": VLArbitrationTable,
                                           "pkeys": P_KeyTable}
_ATTR = {"sl2vl": AttrID.SL_TO_VL_MAPPING_TABLE, "vlarb": AttrID.VL_ARBITRATION_TABLE,
         "pkeys": AttrID.P_KEY_TABLE}


def _sl2vl_table(opts, op_vls) -> tuple:
    mask = _vl_mask(op_vls)
    return tuple(v if v == codes.VL15 else v & mask for v in opts.sl2vl)


def _vlarb_parts(opts, pi, op_vls) -> dict:
    """part -> 32 (VL, weight) pairs, for the parts the port implements."""
    if pi.vl_cap <= 1:
        return {}  # one data VL: nothing to arbitrate (OpenSM skips it too)
    mask = _vl_mask(op_vls)
    out = {}
    for table, cap, src in (("low", pi.vl_arbitration_low_cap, opts.vlarb_low),
                            ("high", pi.vl_arbitration_high_cap, opts.vlarb_high)):
        src = list(src) + [(0, 0)] * (2 * fw.VLARB_BLOCK_SIZE - len(src))
        for half in range(2):
            n = min(cap - half * fw.VLARB_BLOCK_SIZE, fw.VLARB_BLOCK_SIZE)
            if n > 0:
                part = src[half * fw.VLARB_BLOCK_SIZE:half * fw.VLARB_BLOCK_SIZE + n]
                out[fw.vlarb_part(table, half)] = [(vl & mask, w) for vl, w in part]
    return out


@dataclasses.dataclass
class Want:
    """One table unit we want a port to hold: how to read it and what it should say."""
    kind: str
    guid: int
    name: str
    path: tuple
    modifier: int
    value: object  # sl2vl: tuple of 16; vlarb: list of pairs; pkeys: None (index 0 only)
    # a switch's SL2VL pairs of one output port that are written, unread, when this
    # representative pair differs: [(modifier), ...]
    siblings: tuple = ()

    def get(self) -> Request:
        return Request(smpcodec.dr(Method.GET, _ATTR[self.kind], self.path, self.modifier))

    def desired(self, current):
        """The attribute value to write given what the port holds."""
        if self.kind == "sl2vl":
            return SLtoVLMappingTable(sl_to_vl=list(self.value))
        if self.kind == "vlarb":
            return vlarb_block(self.value)
        keys = list(current.p_keys) if current is not None else [0] * fw.PKEY_BLOCK_SIZE
        keys[0] = fw.PKEY_DEFAULT
        return P_KeyTable(p_keys=keys)


def _linked(topo, node, port) -> bool:
    return (node.guid, port) in topo.links


def table_wants(topo, opts: LinkOptions, op_vls: dict) -> list[Want]:
    """Every table unit the fabric should hold. `op_vls`: (guid, port) -> the
    OperationalVLs code the port will run (the planned value)."""
    out = []
    for n in topo.nodes.values():
        if n.is_switch:
            out += _switch_wants(topo, n, opts, op_vls)
            continue
        for p in sorted(n.port_paths):
            pi = n.ports.get(p)
            if pi is None or not _linked(topo, n, p):
                continue
            path, vls = n.port_paths[p], op_vls.get((n.guid, p), pi.operational_vls)
            if opts.qos:
                out += [Want("vlarb", n.guid, n.description, path, fw.vlarb_modifier(part, 0), e)
                        for part, e in _vlarb_parts(opts, pi, vls).items()]
                if pi.capability_mask & CAP_SL_MAPPING:
                    out.append(Want("sl2vl", n.guid, n.description, path, 0, _sl2vl_table(opts, vls)))
            if opts.pkeys and n.node_info.partition_cap:
                out.append(Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(0), None))
    return out


def _switch_wants(topo, n, opts, op_vls) -> list[Want]:
    out: list[Want] = []
    p0 = n.ports.get(0)
    if p0 is None:
        return out
    if opts.pkeys and n.node_info.partition_cap:
        out.append(Want("pkeys", n.guid, n.description, n.path, fw.pkey_modifier(0, 0), None))
    if not opts.qos:
        return out
    linked = [p for p in range(1, n.num_ports + 1) if p in n.ports and _linked(topo, n, p)]
    for outp in linked:
        pi, vls = n.ports[outp], op_vls.get((n.guid, outp), n.ports[outp].operational_vls)
        out += [Want("vlarb", n.guid, n.description, n.path, fw.vlarb_modifier(part, outp), e)
                for part, e in _vlarb_parts(opts, pi, vls).items()]
        if p0.capability_mask & CAP_SL_MAPPING:
            # one output port has a table per input port: (ports+1) x ports tables a switch,
            # 72k on a 648-host fat tree. They are written together (by OpenSM, by us), so
            # one is read as the representative (from the first other linked input, the
            # path data takes; else input 0): when it holds the right table the others are
            # taken to, else all are written.
            table = _sl2vl_table(opts, vls)
            rep = ([p for p in linked if p != outp] or [0])[0]
            rest = tuple(fw.sl2vl_modifier(i, outp) for i in range(n.num_ports + 1) if i != rep)
            out.append(Want("sl2vl", n.guid, n.description, n.path, fw.sl2vl_modifier(rep, outp), table, rest))
    return out


def _same(kind, cur, new) -> bool:
    if kind == "pkeys":
        return cur.p_keys[0] == new.p_keys[0]
    return cur == new


def read_and_diff(transport, wants: list[Want], failed: set | None = None) -> tuple[list[TableChange], list[str]]:
    """Get every wanted unit (one batch) and return the Sets needed, and problems. A
    switch output port's unread SL2VL pairs are written when its representative differs.
    ``failed`` collects the GUIDs of nodes a Get got no answer from (worth asking again)."""
    changes, problems = [], []
    groups: dict = {}  # (switch, output port) -> [want with the siblings, the representative differs]
    for w, rep in zip(wants, transport.execute([w.get() for w in wants])):
        group = groups.setdefault((w.guid, w.modifier & 0xFF), [None, False]) if w.kind == "sl2vl" else None
        if group is not None and w.siblings:
            group[0] = w
        if not rep.ok:  # never write a table we could not read (nor one the port lacks)
            problems.append(f"{w.name}: {rep.request.describe()} failed ({rep.error}); not written")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(w.guid)
            continue
        cur = rep.value(LINK_TABLES[w.kind])
        new = w.desired(cur)
        if not _same(w.kind, cur, new):
            changes.append(TableChange(w.kind, w.guid, w.name, w.path, w.modifier, cur, new))
            if group is not None:
                group[1] = True
    for w, differs in groups.values():
        if w is not None and differs:
            new = w.desired(None)
            changes += [TableChange("sl2vl", w.guid, w.name, w.path, m, None, new) for m in w.siblings]
    return changes, problems


def write(transport, changes: list[TableChange], failed: set | None = None) -> list[str]:
    """Send the Sets (one batch) and check each GetResp holds what was written.
    ``failed`` collects the GUIDs of nodes a Set got no answer from."""
    problems = []
    for c, rep in zip(changes, transport.execute([c.request() for c in changes])):
        if not rep.ok:
            problems.append(f"{c.name}: {c.describe()}: failed: {rep.error}")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(c.guid)
        elif not _same(c.kind, rep.value(LINK_TABLES[c.kind]), c.new):
            problems.append(f"{c.name}: {c.describe()}: reads back differently")
    return problems
