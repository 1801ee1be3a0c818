"""The per-port tables of link configuration (SL2VL, VLArb, P_Key, and the GUIDInfo
blocks that carry alias GUIDs) as table units:
`Want` (what a port should hold, and how to read it), `TableChange` (one Set: what the
port held and gets; the apply journal and backups record these), their JSON, and the
raw Sets with their read-back check (`write`; `smagent.fdb.apply` adds the backup and
journal around them). What to want is planned in `smagent.linkconf`."""
from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Any

from mad import forwarding as fw
from mad.attributes import GUIDInfo, P_KeyTable, SLtoVLMappingTable, VLArbitrationTable, vlarb_block, vlarb_entries
from mad.header import InvalidField, Method, Status
from mad.smp import status_of
from smagent.transport.base import Request, SmpStatusError, SmpTimeout


TABLES = ("sl2vl", "vlarb", "pkeys", "guids")  # the kinds of TableChange (journal and backup "table" values)
# kinds a port may decline to take: a Set it refuses as unsupported is no problem (`write`'s
# ``refused``): ibsim, and ports without alias GUID support, answer the GUIDInfo Get only
OPTIONAL = frozenset({"guids"})
_UNSUPPORTED = frozenset({InvalidField.METHOD_NOT_SUPPORTED, InvalidField.METHOD_ATTRIBUTE_NOT_SUPPORTED})


@dataclasses.dataclass(slots=True)
class TableChange:
    """One Set of a per-port table: what the port holds (old) and what it gets (new).
    ``port``: the CA port the path leads to (0 for a switch: its modifier names ports).
    ``same_as``: for a switch SL2VL pair written unread, the modifier of the pair read in
    its place (its representative); ``old`` is then None. ``also``: on that
    representative, the modifiers of those pairs (the journal and the backup record them
    with it, as one unit: one record each would be 72k on a 648-host fat tree).
    ``all_inputs``: on a switch that advertises OptimizedSLtoVLMappingProgramming, the
    representative is written with one Set for every input port of its output port
    (`mad.forwarding.sl2vl_all_inputs_modifier`), which covers ``also``: no Set of its own
    for each of them (17 Sets become 1 on a 16-port switch)."""
    kind: str  # "sl2vl" | "vlarb" | "pkeys" | "guids"
    guid: int
    name: str
    path: tuple
    modifier: int
    old: Any  # a LinkTable of ``kind``, None: not read
    new: Any  # a LinkTable of ``kind``
    port: int = 0
    same_as: int | None = None
    also: tuple = ()
    all_inputs: bool = False

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
        if self.all_inputs:
            d["all_inputs"] = True
        return d

    def pairs(self) -> list[TableChange]:
        """This change as the SL2VL pairs it writes, one change each: itself, and for an
        all-inputs Set the pairs it covers (unread: ``old`` None), as the plan lists them."""
        if not self.all_inputs:
            return [self]
        return [self] + [dataclasses.replace(self, modifier=m, old=None, also=(), same_as=self.modifier)
                         for m in self.also]

    def to_json(self) -> dict[str, Any]:
        """The Set as one plan record (`smagent.sweep.SweepResult.plan_changes`): table
        SL2VL (in_port, out_port; 0/0: a CA port's own), VLArb (port, priority, entries
        first..last) or P_Key (port, block; whole blocks); old None: not read."""
        rec = {"node": self.name, "guid": f"0x{self.guid:016x}", "path": list(self.path)}
        old: Any = self.old  # the table of this Set's kind
        new: Any = self.new
        if self.kind == "sl2vl":
            inp, outp = fw.sl2vl_from_modifier(self.modifier)
            out: dict[str, Any] = {**rec, "table": "SL2VL", "in_port": inp, "out_port": outp,
                                   "old": None if self.old is None else list(old.sl_to_vl),
                                   "new": list(new.sl_to_vl)}
            if self.all_inputs:  # sent as one Set for every input port of out_port
                out["all_inputs"] = True
            return out
        if self.kind == "vlarb":
            table, half, port = fw.vlarb_from_modifier(self.modifier)
            return {**rec, "table": "VLArb", "port": port, "priority": table, "entries": [half * 32, half * 32 + 31],
                    "old": None if self.old is None else [list(e) for e in vlarb_entries(old)],
                    "new": [list(e) for e in vlarb_entries(new)]}
        if self.kind == "guids":
            return {**rec, "table": "GUIDInfo", "port": self.port, "block": self.modifier,
                    "old": None if self.old is None else table_json("guids", old), "new": table_json("guids", new)}
        block, port = fw.pkey_from_modifier(self.modifier)
        return {**rec, "table": "P_Key", "port": port, "block": block,
                "old": None if self.old is None else list(old.p_keys), "new": list(new.p_keys)}

    def describe(self) -> str:
        if self.kind == "sl2vl":
            inp, outp = fw.sl2vl_from_modifier(self.modifier)
            where = f"in {inp} out {outp}" if self.modifier else "port"
            if self.all_inputs:
                where = f"in all out {outp}"
            old = "?" if self.old is None else ",".join(map(str, self.old.sl_to_vl))
            return f"SubnSet(SLtoVLMappingTable) {self.name} {where}: {old} -> {','.join(map(str, self.new.sl_to_vl))}"
        if self.kind == "vlarb":
            table, half, port = fw.vlarb_from_modifier(self.modifier)
            def fmt(b):
                return "?" if b is None else (",".join(f"{vl}:{w}" for vl, w in vlarb_entries(b) if w or vl)
                                              or "(all 0:0)")
            return (f"SubnSet(VLArbitrationTable) {self.name} port {port or self.port} {table} "
                    f"{half * 32}-{half * 32 + 31}: {fmt(self.old)} -> {fmt(self.new)}")
        if self.kind == "guids":
            def guids(t):
                return "?" if t is None else ",".join(f"{g:#x}" for g in t.guids if g) or "(none)"
            return (f"SubnSet(GUIDInfo) {self.name} port {self.port} block {self.modifier}: "
                    f"{guids(self.old)} -> {guids(self.new)}")
        block, port = fw.pkey_from_modifier(self.modifier)
        where = f"SubnSet(P_KeyTable) {self.name} port {port or self.port} block {block}"
        if self.old is None or list(self.old.p_keys[1:]) == list(self.new.p_keys[1:]):
            old = "?" if self.old is None else f"{self.old.p_keys[0]:#06x}"
            return f"{where}: [0] {old} -> {self.new.p_keys[0]:#06x}"

        def keys(t):  # a whole block (partitions): its keys in use
            return ",".join(f"{k:#06x}" for k in t.p_keys if k) or "(none)"
        return f"{where}: {keys(self.old)} -> {keys(self.new)}"

    def get(self) -> Request:
        return Request.dr(Method.GET, LINK_TABLES[self.kind].ATTR_ID, self.path, self.modifier)

    def request(self, data: bytes | None = None) -> Request:
        """The Set; ``data``: ``self.new`` already encoded (many changes share one table)."""
        modifier = fw.sl2vl_all_inputs_modifier(self.modifier & 0xFF) if self.all_inputs else self.modifier
        return Request.dr(Method.SET, LINK_TABLES[self.kind].ATTR_ID, self.path, modifier,
                          self.new if data is None else data)


LinkTable = SLtoVLMappingTable | VLArbitrationTable | P_KeyTable | GUIDInfo


# the attribute class of each kind of table
LINK_TABLES: dict[str, type[LinkTable]] = {"sl2vl": SLtoVLMappingTable, "vlarb": VLArbitrationTable,
                                           "pkeys": P_KeyTable, "guids": GUIDInfo}


# VL0, weight0, VL1, ...: one C call per part (a backup of a 648-host fat tree holds thousands)
_VLARB_FIELDS = operator.attrgetter(*(f"{k}_{i}" for i in range(fw.VLARB_BLOCK_SIZE) for k in ("vl", "weight")))


def table_json(kind: str, value) -> list:
    """A table value as JSON: sl2vl 16 VLs, vlarb its 32 entries flat (VL0, weight0, VL1,
    weight1, ...: one list, not 32, per part), pkeys 32 keys, guids 8 GUIDs in hex (64 bits:
    more than a JSON reader's doubles hold)."""
    if kind == "sl2vl":
        return list(value.sl_to_vl)
    if kind == "vlarb":
        return list(_VLARB_FIELDS(value))
    if kind == "guids":
        return [f"0x{g:016x}" for g in value.guids]
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
    if kind == "guids":
        if not (isinstance(data, list) and len(data) == fw.GUID_BLOCK_SIZE
                and all(isinstance(g, str) and g.startswith("0x") for g in data)):
            raise ValueError("guids: 8 GUIDs in hex (\"0x...\") expected")
        try:
            guids = [int(g, 16) for g in data]
        except ValueError:
            raise ValueError("guids: 8 GUIDs in hex (\"0x...\") expected") from None
        if any(g >> 64 for g in guids):
            raise ValueError("guids: a GUID has 64 bits")
        return GUIDInfo(guids=guids)
    raise ValueError(f"unknown link table {kind!r}")


def check_modifier(kind: str, modifier: int) -> None:
    """ValueError unless `modifier` addresses a `kind` table (the codec's inverse checks)."""
    {"sl2vl": fw.sl2vl_from_modifier, "vlarb": fw.vlarb_from_modifier, "pkeys": fw.pkey_from_modifier,
     "guids": fw.guid_from_modifier}[kind](modifier)


@dataclasses.dataclass
class Want:
    """One table unit we want a port to hold: how to read it and what it should say."""
    kind: str
    guid: int
    name: str
    path: tuple
    modifier: int
    value: object  # sl2vl: tuple of 16; vlarb: list of pairs; pkeys: 32 keys, or None (index 0 only); guids: 8
    # a switch's SL2VL pairs of one output port that are written, unread, when this
    # representative pair differs: [(modifier), ...]
    siblings: tuple = ()
    port: int = 0  # the CA port the path leads to (0: a switch)
    # the switch takes one Set for all input ports (OptimizedSLtoVLMappingProgramming):
    # a differing representative is written so, covering its siblings
    all_inputs: bool = False
    # pkeys with partitions: the port's whole table (`smagent.linkconf.pkeys.PortTable`),
    # laid out from all its blocks once they are read; ``value`` is then this block
    table: Any = None

    def get(self) -> Request:
        return Request.dr(Method.GET, LINK_TABLES[self.kind].ATTR_ID, self.path, self.modifier)

    def desired(self, current):
        """The attribute value to write given what the port holds."""
        if self.kind == "sl2vl":  # 16 VLs
            return _built(self.kind, tuple(self.value))
        if self.kind == "vlarb":  # (VL, weight) pairs
            return _built(self.kind, tuple(map(tuple, self.value)))
        if self.kind == "guids":  # block 0's GUID 0 is the port's own, read only: as the port holds it
            guids = list(self.value)
            if self.modifier == 0 and current is not None:
                guids[0] = current.guids[0]
            return GUIDInfo(guids=guids)
        if self.value is not None:  # a whole block (smagent.linkconf.pkeys, with partitions)
            return P_KeyTable(p_keys=list(self.value))
        keys = list(current.p_keys) if current is not None else [0] * fw.PKEY_BLOCK_SIZE
        keys[0] = fw.PKEY_DEFAULT
        return P_KeyTable(p_keys=keys)

    def change(self, old, new, **kw) -> TableChange:
        return TableChange(self.kind, self.guid, self.name, self.path, kw.pop("modifier", self.modifier), old, new,
                           port=self.port, **kw)


@functools.lru_cache(maxsize=64)
def _built(kind: str, value: tuple):
    """The SL2VL or VLArb attribute of a wanted value, built once per distinct value: a
    fabric wants the same few tables on every port (2 million SL2VL pairs, 140,000 VLArb
    parts on 11,664 hosts), and one shared attribute is also encoded once. Never
    modified (attributes are replaced, not changed)."""
    if kind == "sl2vl":
        return SLtoVLMappingTable(sl_to_vl=list(value))
    return vlarb_block(value)


def same_table(kind, cur, new) -> bool:
    if kind == "pkeys":
        return list(cur.p_keys) == list(new.p_keys)
    if kind == "guids":
        return list(cur.guids) == list(new.guids)
    return cur == new


def refuses(kind: str, error) -> bool:
    """Whether a Set's error says the port does not take this optional kind of table."""
    if kind not in OPTIONAL or not isinstance(error, SmpStatusError) or not error.raw:
        return False
    return Status.from_word(status_of(error.raw)).invalid_field in _UNSUPPORTED


# Gets or Sets of per-port tables sent per batch (`write`, `linkconf.io`'s reads): a first
# sweep's link tables are millions of Sets at 11,664 hosts (every switch SL2VL pair), and
# each one's request, reply and answer bytes held at once were the sweep's peak memory; a
# batch drains the window once, one round trip in thousands of SMPs
BATCH = 4096


def write(transport, changes: list[TableChange], written: list | None = None,
          failed: set[int] | None = None, refused: list | None = None) -> list[str]:
    """Send the Sets (in batches of `BATCH`) and check each GetResp holds what was
    written; the changes confirmed are appended to ``written``; ``failed`` collects the
    GUIDs of nodes a Set got no answer from; ``refused`` the changes of an `OPTIONAL` kind
    the port refused as unsupported (then not a problem)."""
    problems: list[str] = []
    encoded: dict[int, bytes] = {}  # id(new) -> its bytes: a switch's SL2VL pairs share one table
    for i in range(0, len(changes), BATCH):
        batch = changes[i:i + BATCH]
        reqs = []
        for c in batch:
            data = encoded.get(id(c.new))
            if data is None:
                data = encoded[id(c.new)] = c.new.encode()
            reqs.append(c.request(data))
        _check_answers(batch, transport.execute(reqs), encoded, problems, written, failed, refused)
    return problems


def _check_answers(changes, replies, encoded, problems, written, failed, refused) -> None:
    """`write`'s verdict on one batch's answers."""
    for c, rep in zip(changes, replies):
        if not rep.ok:
            if refused is not None and refuses(c.kind, rep.error):
                refused.append(c)
                continue
            problems.append(f"{c.name}: {c.describe()}: failed: {rep.error}")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(c.guid)
            continue
        # the GetResp holds the bytes sent (most do): equal, no decoding (72,576 SL2VL Sets
        # on a 648-host tree); else decoded and compared as tables (reserved bits aside)
        sent = encoded[id(c.new)]
        if rep.data[:len(sent)] != sent and not same_table(c.kind, rep.value(LINK_TABLES[c.kind]), c.new):
            problems.append(f"{c.name}: {c.describe()}: reads back differently")
        elif written is not None:
            written.append(c)


def confirmed_units(written: list[TableChange]) -> list[TableChange]:
    """The journal units among the changes ``written`` confirmed: every change that is
    not a representative's unread pair, a representative only when its pairs were
    confirmed too (an all-inputs Set confirms them with its own answer)."""
    done = {c.unit for c in written}
    return [c for c in written if c.same_as is None
            and (c.all_inputs or all((c.guid, c.port, m) in done for m in c.also))]
