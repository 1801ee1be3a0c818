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

Which ports get SL2VL and VLArb tables (`LinkOptions.qos`). OpenSM writes them only with
QoS on (`opensm -Q`), on every port and every switch (input, output) pair: on a 648-host
fat tree that is 8 times the SMPs of the rest of a bring-up. Without -Q it leaves what
the port holds, and on a port at reset values (`smagent.sim.model`: identity SL2VL, zero
VLArb) SLs 1-15 land on VLs the port does not run. So there are three modes:

* ``True`` ("always", `--qos`): OpenSM's QoS tables everywhere, as `opensm -Q`;
* ``False`` ("never", `--no-qos`): tables left alone, as `opensm -o`;
* ``"auto"`` (the default): read a probe per CA port and per switch (per group of its
  output ports running the same VLs; `qos_units` says why one port speaks for its
  switch, `QosUnit.probe` why its SL2VL table speaks for its VLArb tables) and, where
  the probe is unusable (an SL, SL15 included, maps to VL15 or a VL at or above the VLs
  the port will run: `codes.unmapped_sls`, the rule `verify` applies; on a port without
  an SL2VL table, VL0 has no weight in its VLArb tables: `codes.starved_vls`), plan for
  those ports exactly what "always" plans. Usable tables
  are left as they are, as `opensm -o` does. VLHighLimit is left too (its reset value,
  0, is OpenSM's default). Tables of one's own (`sl2vl`/`vlarb_*` not OpenSM's) make
  "auto" "always": a usable table would otherwise stay in their place.

ibsim pre-sets SL i -> VL i (SL15 -> VL7) on links running VL0-7, so SLs 8-14 are
unusable there and "auto" repairs every port, as -Q does; on a fabric an SM already
configured, "auto" costs its probes only: one Get a CA port and a switch.

Every table Set goes through the one apply path (`smagent.fdb.apply`): what it
overwrites (the value read to diff) is backed up and the Sets are journalled.

Fields deliberately not written: RespTimeValue (read-only), LocalPhyErrors /
OverrunErrors thresholds (ibsim does not store them; a value a port cannot hold would
be rewritten by every sweep), M_Key fields (`smagent.mkeys`). SubnetTimeout rides
along: it is written in every PortInfo Set that goes out anyway, but a difference in
it alone does not trigger one, because ibsim (and so possibly other SMAs) ignore it.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any

from mad import codes
from mad import forwarding as fw
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
QOS_AUTO = "auto"  # LinkOptions.qos: repair unusable SL2VL/VLArb tables, leave usable ones
QOS_MODES = {True: "always", False: "never", QOS_AUTO: QOS_AUTO}

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
    # SL2VL and VLArb tables: True programs OpenSM's QoS tables everywhere (and VLHighLimit;
    # opensm -Q), False never touches them (opensm without -Q), "auto" repairs only ports
    # whose tables are unusable (see `qos_units`)
    qos: object = QOS_AUTO
    sl2vl: tuple = OSM_SL2VL
    vlarb_high: tuple = OSM_VLARB_HIGH
    vlarb_low: tuple = OSM_VLARB_LOW
    vl_high_limit: int = OSM_VL_HIGH_LIMIT
    pkeys: bool = True  # the default partition at index 0 of every end port

    def check(self) -> "LinkOptions":
        """Every problem at once, as LinkConfigError."""
        p = []
        if not any(self.qos is k for k in (True, False)) and self.qos != QOS_AUTO:
            p.append(f"qos {self.qos!r} is not true, false or {QOS_AUTO!r}")
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
    def qos_mode(self) -> str:
        """"always", "never" or "auto". Tables of one's own (sl2vl or vlarb_* other than
        OpenSM's) are always written: "auto" would leave a usable table in their place."""
        own = (self.sl2vl, self.vlarb_high, self.vlarb_low) != (OSM_SL2VL, OSM_VLARB_HIGH, OSM_VLARB_LOW)
        mode = QOS_MODES[self.qos if isinstance(self.qos, bool) else QOS_AUTO]
        return "always" if mode == QOS_AUTO and own else mode

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
    kw, problems = {}, []
    for k, v in doc.items():
        try:
            if k not in OPTION_KEYS:
                raise LinkConfigError(f"unknown key {k!r} (known: {', '.join(OPTION_KEYS)})")
            if k in ("qos", "pkeys"):
                if not isinstance(v, bool) and not (k == "qos" and v == QOS_AUTO):
                    raise LinkConfigError(f"{k}: {v!r} is not true or false"
                                          + (f" (or {QOS_AUTO!r})" if k == "qos" else ""))
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
    if opts.qos_mode == "always":  # "auto" leaves it: its reset value, 0, is OpenSM's default
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
TABLES = ("sl2vl", "vlarb", "pkeys")  # the kinds of TableChange (journal and backup "table" values)


@dataclasses.dataclass
class TableChange:
    """One Set of a per-port table: what the port holds (old) and what it gets (new).
    ``port``: the CA port the path leads to (0 for a switch: its modifier names ports).
    ``same_as``: for a switch SL2VL pair written unread, the modifier of the pair read in
    its place (its representative); ``old`` is then None. ``also``: on that
    representative, the modifiers of those pairs (the journal and the backup record them
    with it, as one unit: one record each would be 72k on a 648-host fat tree)."""
    kind: str  # "sl2vl" | "vlarb" | "pkeys"
    guid: int
    name: str
    path: tuple
    modifier: int
    old: Any  # a LinkTable of ``kind``, None: not read
    new: Any  # a LinkTable of ``kind``
    port: int = 0
    same_as: int | None = None
    also: tuple = ()

    # the names the apply journal and the backups use for every unit they record
    @property
    def switch(self) -> int:
        return self.guid

    @property
    def block(self) -> int:
        return self.modifier

    @property
    def unit(self) -> tuple:
        """(node GUID, port, modifier): which table this is, among all of a fabric's."""
        return self.guid, self.port, self.modifier

    def journal_record(self) -> dict:
        """This change as an apply-journal unit (`smagent.fdb.journal`); the pairs written
        with it (``also``) are in the same record."""
        d = {"table": self.kind, "switch": f"0x{self.guid:016x}", "name": self.name,
             "path": None if self.path is None else list(self.path), "block": self.modifier, "port": self.port,
             "old": None if self.old is None else table_json(self.kind, self.old),
             "new": table_json(self.kind, self.new)}
        if self.also:
            d["also"] = list(self.also)
        return d

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

    def describe(self) -> str:
        if self.kind == "sl2vl":
            inp, outp = fw.sl2vl_from_modifier(self.modifier)
            where = f"in {inp} out {outp}" if self.modifier else "port"
            old = "?" if self.old is None else ",".join(map(str, self.old.sl_to_vl))
            return f"SubnSet(SLtoVLMappingTable) {self.name} {where}: {old} -> {','.join(map(str, self.new.sl_to_vl))}"
        if self.kind == "vlarb":
            table, half, port = fw.vlarb_from_modifier(self.modifier)
            def fmt(b):
                return "?" if b is None else (",".join(f"{vl}:{w}" for vl, w in vlarb_entries(b) if w or vl)
                                              or "(all 0:0)")
            return (f"SubnSet(VLArbitrationTable) {self.name} port {port or self.port} {table} "
                    f"{half * 32}-{half * 32 + 31}: {fmt(self.old)} -> {fmt(self.new)}")
        block, port = fw.pkey_from_modifier(self.modifier)
        old = "?" if self.old is None else f"{self.old.p_keys[0]:#06x}"
        return (f"SubnSet(P_KeyTable) {self.name} port {port or self.port} block {block}: [0] {old} -> "
                f"{self.new.p_keys[0]:#06x}")

    def get(self) -> Request:
        return Request.dr(Method.GET, LINK_TABLES[self.kind].ATTR_ID, self.path, self.modifier)

    def request(self, data: bytes | None = None) -> Request:
        """The Set; ``data``: ``self.new`` already encoded (many changes share one table)."""
        return Request.dr(Method.SET, LINK_TABLES[self.kind].ATTR_ID, self.path, self.modifier,
                          self.new if data is None else data)


LinkTable = SLtoVLMappingTable | VLArbitrationTable | P_KeyTable
# the attribute class of each kind of table
LINK_TABLES: dict[str, type[LinkTable]] = {"sl2vl": SLtoVLMappingTable, "vlarb": VLArbitrationTable,
                                           "pkeys": P_KeyTable}


# VL0, weight0, VL1, ...: one C call per part (a backup of a 648-host fat tree holds thousands)
_VLARB_FIELDS = operator.attrgetter(*(f"{k}_{i}" for i in range(fw.VLARB_BLOCK_SIZE) for k in ("vl", "weight")))


def table_json(kind: str, value) -> list:
    """A table value as JSON: sl2vl 16 VLs, vlarb its 32 entries flat (VL0, weight0, VL1,
    weight1, ...: one list, not 32, per part), pkeys 32 keys."""
    if kind == "sl2vl":
        return list(value.sl_to_vl)
    if kind == "vlarb":
        return list(_VLARB_FIELDS(value))
    return list(value.p_keys)


def table_from_json(kind: str, data):
    """`table_json`'s inverse; ValueError naming what is wrong."""
    if kind == "sl2vl":
        if not (isinstance(data, list) and len(data) == fw.SL2VL_SLS
                and all(isinstance(v, int) and 0 <= v <= 15 for v in data)):
            raise ValueError("sl2vl: 16 VLs 0..15 expected")
        return SLtoVLMappingTable(sl_to_vl=list(data))
    if kind == "vlarb":
        if not (isinstance(data, list) and len(data) == 2 * fw.VLARB_BLOCK_SIZE
                and all(isinstance(x, int) and 0 <= x <= (15 if i % 2 == 0 else 255) for i, x in enumerate(data))):
            raise ValueError("vlarb: 32 (VL 0..15, weight 0..255) entries, flat, expected")
        return vlarb_block(zip(data[::2], data[1::2]))
    if kind == "pkeys":
        if not (isinstance(data, list) and len(data) == fw.PKEY_BLOCK_SIZE
                and all(isinstance(v, int) and 0 <= v <= 0xFFFF for v in data)):
            raise ValueError("pkeys: 32 P_Keys of 16 bits expected")
        return P_KeyTable(p_keys=list(data))
    raise ValueError(f"unknown link table {kind!r}")


def check_modifier(kind: str, modifier: int) -> None:
    """ValueError unless `modifier` addresses a `kind` table (the codec's inverse checks)."""
    {"sl2vl": fw.sl2vl_from_modifier, "vlarb": fw.vlarb_from_modifier, "pkeys": fw.pkey_from_modifier}[kind](modifier)


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
    port: int = 0  # the CA port the path leads to (0: a switch)

    def get(self) -> Request:
        return Request.dr(Method.GET, LINK_TABLES[self.kind].ATTR_ID, self.path, self.modifier)

    def desired(self, current):
        """The attribute value to write given what the port holds."""
        if self.kind == "sl2vl":
            return SLtoVLMappingTable(sl_to_vl=list(self.value))
        if self.kind == "vlarb":
            return vlarb_block(self.value)
        keys = list(current.p_keys) if current is not None else [0] * fw.PKEY_BLOCK_SIZE
        keys[0] = fw.PKEY_DEFAULT
        return P_KeyTable(p_keys=keys)

    def change(self, old, new, **kw) -> TableChange:
        return TableChange(self.kind, self.guid, self.name, self.path, kw.pop("modifier", self.modifier), old, new,
                           port=self.port, **kw)


def _linked(topo, node, port) -> bool:
    return (node.guid, port) in topo.links


@dataclasses.dataclass
class QosUnit:
    """Ports whose SL2VL and VLArb tables "auto" judges together: one CA port, or the
    linked output ports of one switch that run the same VLs (see `qos_units`). ``ports``:
    each port's wants, as "always" would read them. Only the `probe` is read first; the
    rest only when the probe shows unusable tables."""
    ports: list  # [[Want, ...], ...]
    data_vls: int  # data VLs the ports will run (OperationalVLs as planned)
    where: str  # the first port, for notes

    @property
    def probe(self) -> list[Want]:
        """The first port's SL2VL table; its VLArb tables only where it has no SL2VL table.
        Why SL2VL alone tells: a port at reset maps SL15 to VL15 (identity), which
        `codes.unmapped_sls` refuses, so a table that carries every SL was written by an
        SM, and SMs write VLArb with SL2VL (OpenSM's QoS manager writes both or neither).
        Reading VLArb too would cost 2 more Gets a probe (+12 % SMPs on a 648-host fat tree)."""
        first = self.ports[0]
        return [w for w in first if w.kind == "sl2vl"] or first

    def rest(self) -> list[Want]:
        """Every want but the probe's: read when the probe shows unusable tables."""
        probe = {id(w) for w in self.probe}
        return [w for ws in self.ports for w in ws if id(w) not in probe]


def _ca_qos_wants(n, p, pi, path, vls, opts) -> list[Want]:
    out = [Want("vlarb", n.guid, n.description, path, fw.vlarb_modifier(part, 0), e, port=p)
           for part, e in _vlarb_parts(opts, pi, vls).items()]
    if pi.capability_mask & CAP_SL_MAPPING:
        out.append(Want("sl2vl", n.guid, n.description, path, 0, _sl2vl_table(opts, vls), port=p))
    return out


def _switch_out_wants(n, outp, linked, vls, opts) -> list[Want]:
    """The tables of one switch output port: VLArb parts, and the SL2VL pair read as the
    representative of all (input, `outp`) pairs."""
    out = [Want("vlarb", n.guid, n.description, n.path, fw.vlarb_modifier(part, outp), e)
           for part, e in _vlarb_parts(opts, n.ports[outp], vls).items()]
    if n.ports[0].capability_mask & CAP_SL_MAPPING:
        # one output port has a table per input port: (ports+1) x ports tables a switch,
        # 72k on a 648-host fat tree. They are written together (by OpenSM, by us), so
        # one is read as the representative (from the first other linked input, the
        # path data takes; else input 0): when it holds the right table the others are
        # taken to, else all are written.
        rep = ([p for p in linked if p != outp] or [0])[0]
        rest = tuple(fw.sl2vl_modifier(i, outp) for i in range(n.num_ports + 1) if i != rep)
        out.append(Want("sl2vl", n.guid, n.description, n.path, fw.sl2vl_modifier(rep, outp),
                        _sl2vl_table(opts, vls), rest))
    return out


def _ca_ports(topo, n, op_vls):
    """(port, PortInfo, path, planned OperationalVLs) of a CA's linked ports."""
    for p in sorted(n.port_paths):
        pi = n.ports.get(p)
        if pi is not None and _linked(topo, n, p):
            yield p, pi, n.port_paths[p], op_vls.get((n.guid, p), pi.operational_vls)


def _switch_out_ports(topo, n, op_vls):
    """(output port, planned OperationalVLs) of a switch's linked ports, and all of them."""
    linked = [p for p in range(1, n.num_ports + 1) if p in n.ports and _linked(topo, n, p)]
    return [(p, op_vls.get((n.guid, p), n.ports[p].operational_vls)) for p in linked], linked


def table_wants(topo, opts: LinkOptions, op_vls: dict) -> list[Want]:
    """Every table unit the fabric should hold, read and diffed whatever the port holds:
    P_Keys, and with qos "always" the SL2VL and VLArb tables ("auto" reads those through
    `qos_units`). `op_vls`: (guid, port) -> the OperationalVLs code the port will run."""
    always = opts.qos_mode == "always"
    out = []
    for n in topo.nodes.values():
        if n.is_switch:
            if n.ports.get(0) is None:
                continue
            if opts.pkeys and n.node_info.partition_cap:
                out.append(Want("pkeys", n.guid, n.description, n.path, fw.pkey_modifier(0, 0), None))
            if always:
                outs, linked = _switch_out_ports(topo, n, op_vls)
                out += [w for p, vls in outs for w in _switch_out_wants(n, p, linked, vls, opts)]
            continue
        for p, pi, path, vls in _ca_ports(topo, n, op_vls):
            if always:
                out += _ca_qos_wants(n, p, pi, path, vls, opts)
            if opts.pkeys and n.node_info.partition_cap:
                out.append(Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(0), None, port=p))
    return out


def qos_units(topo, opts: LinkOptions, op_vls: dict) -> list[QosUnit]:
    """What qos "auto" reads: one probe per CA port and per switch, not per output port.

    Why one switch port stands for all of them: a switch's SL2VL and VLArb tables are
    reset together (a switch or SMA reset resets every port; a link going down resets
    none) and an SM programs them together (OpenSM's QoS manager walks every port), so
    the ports of one switch hold the tables of the same writer. What differs between
    ports is the VLs they run, and a table fine for 8 VLs may not be for 4: the ports
    are grouped by their planned OperationalVLs, one probe per group, and a port whose
    OperationalVLs this sweep changes is judged on its own (its table was chosen for
    other VLs). CA ports each have their own tables: one probe each."""
    units = []
    for n in topo.nodes.values():
        if not n.is_switch:
            units += [QosUnit([_ca_qos_wants(n, p, pi, path, vls, opts)], codes.DATA_VLS.get(vls, 1),
                              f"{n.description} port {p}") for p, pi, path, vls in _ca_ports(topo, n, op_vls)]
            continue
        if n.ports.get(0) is None:
            continue
        outs, linked = _switch_out_ports(topo, n, op_vls)
        groups: dict = {}
        for p, vls in outs:
            changes = vls != n.ports[p].operational_vls
            groups.setdefault((vls, p if changes else None), []).append(p)
        for (vls, _alone), ports in groups.items():
            units.append(QosUnit([_switch_out_wants(n, p, linked, vls, opts) for p in ports],
                                 codes.DATA_VLS.get(vls, 1), f"{n.description} port {ports[0]}"))
    return [u for u in units if u.ports[0]]


def _unusable(unit: QosUnit, read: list) -> str | None:
    """Why the probe's tables (``read``: [(Want, value)]) cannot carry data on every SL
    (`codes.unmapped_sls`, `codes.starved_vls`), or None when they can."""
    sl2vl = next((v.sl_to_vl for w, v in read if w.kind == "sl2vl"), None)
    if sl2vl is not None:
        bad = codes.unmapped_sls(sl2vl, unit.data_vls)
        if bad:
            return (", ".join(f"SL {sl} -> VL{vl}" for sl, vl in bad[:3]) + (" ..." if len(bad) > 3 else "")
                    + f" (runs {unit.data_vls} data VL{'s' if unit.data_vls != 1 else ''})")
    arb: dict[str, list[tuple[int, int]]] = {"low": [], "high": []}
    for w, v in read:
        if w.kind == "vlarb":
            arb[fw.vlarb_from_modifier(w.modifier)[0]] += vlarb_entries(v)[:len(w.value)]  # the implemented ones
    if not (arb["low"] or arb["high"]):
        return None  # VLArb not read (the SL2VL probe speaks for it), or one data VL
    used = set(sl2vl) if sl2vl is not None else {0}  # without a table every SL rides VL0
    starved = codes.starved_vls(used, arb["low"], arb["high"])
    return f"VLArbitration gives VL{', VL'.join(map(str, starved))} no weight" if starved else None


def _same(kind, cur, new) -> bool:
    if kind == "pkeys":
        return cur.p_keys[0] == new.p_keys[0]
    return cur == new


def _read(transport, wants: list[Want], failed: set[int] | None = None) -> tuple[list[tuple[Want, Any]], list[str]]:
    """[(want, value)] of the units read, and problems: a unit that could not be read is
    never written (nor judged): the port may lack the table. ``failed`` collects the GUIDs
    of nodes a Get got no answer from (worth asking again)."""
    got: list[tuple[Want, Any]] = []
    problems: list[str] = []
    for w, rep in zip(wants, transport.execute([w.get() for w in wants])):
        if rep.ok:
            got.append((w, rep.value(LINK_TABLES[w.kind])))
        else:
            problems.append(f"{w.name}: {rep.request.describe()} failed ({rep.error}); not written")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(w.guid)
    return got, problems


def _diff(read: list) -> list[TableChange]:
    """The Sets that bring [(want, value read)] to what is wanted. A switch output port's
    unread SL2VL pairs are written when its representative differs."""
    changes = []
    for w, cur in read:
        new = w.desired(cur)
        if _same(w.kind, cur, new):
            continue
        changes.append(w.change(cur, new, also=w.siblings))
        if w.siblings:
            changes += [w.change(None, new, modifier=m, same_as=w.modifier) for m in w.siblings]
    return changes


def read_and_diff(transport, wants: list[Want], failed: set[int] | None = None
                  ) -> tuple[list[TableChange], list[str]]:
    """Get every wanted unit (one batch) and return the Sets needed, and problems."""
    read, problems = _read(transport, wants, failed)
    return _diff(read), problems


def read_and_repair(transport, units: list[QosUnit], failed: set[int] | None = None
                    ) -> tuple[list[TableChange], list[str], list[str]]:
    """qos "auto": read each unit's probe (one batch); where its tables are unusable, read
    the unit's other tables (one batch) and plan for all of them what "always" plans.
    Returns (changes, problems, notes)."""
    flat = [(i, w) for i, u in enumerate(units) for w in u.probe]
    probes, problems = _read(transport, [w for _i, w in flat], failed)
    unit_of = {id(w): i for i, w in flat}
    judged: list[list] = [[] for _u in units]  # per unit: [(want, value)] of its probe
    for w, v in probes:
        judged[unit_of[id(w)]].append((w, v))
    # a unit whose probe could not be read whole is not judged (the problem names it)
    bad = [(i, why) for i, u in enumerate(units) if len(judged[i]) == len(u.probe)
           for why in [_unusable(u, judged[i])] if why]
    rest, more = _read(transport, [w for i, _why in bad for w in units[i].rest()], failed)
    changes = _diff([x for i, _why in bad for x in judged[i]] + rest)
    notes = []
    if bad:
        ports = sum(len(units[i].ports) for i, _why in bad)
        notes.append(f"QoS tables (qos auto): {ports} port{'s' if ports != 1 else ''} held SL2VL/VLArb tables that "
                     f"cannot carry every SL, e.g. {units[bad[0][0]].where}: {bad[0][1]}; they get the tables "
                     f"--qos writes (--no-qos leaves them)")
    return changes, problems + more, notes


def plan_tables(transport, topo, opts: LinkOptions, op_vls: dict, only=None, failed: set[int] | None = None
                ) -> tuple[list, list, list]:
    """Read the per-port tables the options cover and plan the Sets: (changes, problems,
    notes). ``only``: node GUIDs to look at (None: all); ``failed`` collects the GUIDs of
    nodes a Get got no answer from."""
    wants = [w for w in table_wants(topo, opts, op_vls) if only is None or w.guid in only]
    changes, problems = read_and_diff(transport, wants, failed)
    notes: list[str] = []
    if opts.qos_mode == QOS_AUTO:
        units = [u for u in qos_units(topo, opts, op_vls) if only is None or u.ports[0][0].guid in only]
        more, p2, notes = read_and_repair(transport, units, failed)
        changes, problems = changes + more, problems + p2
    return changes, problems, notes


def write(transport, changes: list[TableChange], written: list | None = None,
          failed: set[int] | None = None) -> list[str]:
    """Send the Sets (one batch) and check each GetResp holds what was written; the
    changes confirmed are appended to ``written``; ``failed`` collects the GUIDs of
    nodes a Set got no answer from."""
    problems = []
    encoded: dict[int, bytes] = {}  # id(new) -> its bytes: a switch's SL2VL pairs share one table
    reqs = []
    for c in changes:
        data = encoded.get(id(c.new))
        if data is None:
            data = encoded[id(c.new)] = c.new.encode()
        reqs.append(c.request(data))
    for c, rep in zip(changes, transport.execute(reqs)):
        if not rep.ok:
            problems.append(f"{c.name}: {c.describe()}: failed: {rep.error}")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(c.guid)
        elif not _same(c.kind, rep.value(LINK_TABLES[c.kind]), c.new):
            problems.append(f"{c.name}: {c.describe()}: reads back differently")
        elif written is not None:
            written.append(c)
    return problems


def confirmed_units(written: list[TableChange]) -> list[TableChange]:
    """The journal units among the changes ``written`` confirmed: every change that is
    not a representative's unread pair, a representative only when its pairs were
    confirmed too."""
    done = {c.unit for c in written}
    return [c for c in written if c.same_as is None and all((c.guid, c.port, m) in done for m in c.also)]
