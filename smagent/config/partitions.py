"""Partitions: OpenSM's partitions.conf grammar (the file `opensm -P` reads), the same as
structured YAML (a desired state's ``partitions:``), and who is a member of what on a
discovered fabric.

The grammar, as OpenSM documents it (opensm(8), PARTITION CONFIGURATION)::

    # a comment, to the end of the line
    Name[=PKEY][,indx0][,ipoib][,mtu=N][,rate=N][,sl=N][,scope=N][,defmember=full|limited|both] :
        MEMBER[=full|limited|both], MEMBER ... ;

A statement ends at ``;`` and may span lines (a trailing ``\\`` joins lines too).
MEMBER: a port GUID (0x hex or decimal), ``ALL`` (every end port), ``ALL_CAS``,
``ALL_SWITCHES`` (switch port 0), ``ALL_ROUTERS``, ``SELF`` (the SM's own port). A
member's membership defaults to the partition's ``defmember`` (default: limited); an
unrecognised membership word is limited, with a warning (as OpenSM). ``mgid=GID[,flag]*``
lines name multicast groups (kept for the SA). The P_Key's low 15 bits are used; one
omitted is generated (the lowest value no partition of the file names). Statements with
the same P_Key are merged (the first name is kept). ``both`` counts as full (OpenSM
without allow_both_pkeys). A port named twice in a partition gets the last mention's
membership (OpenSM 3.3.23's osm_prtn_add_port), with a warning where that lowers full.

Without a file smagent keeps what it always did, which is OpenSM's default without one
(``Default=0x7fff : ALL=full``: 0xFFFF at index 0 of every end port). A file gets
OpenSM's implicit ``Default=0x7fff : ALL=limited, SELF=full`` always, first: a rule for
0x7fff changes those memberships (the last mention wins), it cannot take a port out of
the default partition (OpenSM makes the default partition before it reads the file).
`layout` places a port's keys in its table as OpenSM's P_Key manager does.

Every problem is reported with its line number in one `PartitionError` (exit 2), before
anything is sent; a member GUID not on the fabric is a warning (`resolve`).
"""
from __future__ import annotations

import bisect
import dataclasses
import re

from mad.attributes import NodeType
from smagent.config import files as paths
from smagent.errors import FileProblems

DEFAULT_PKEY = 0x7FFF
FULL_BIT = 0x8000
MEMBERSHIPS = ("full", "limited", "both")
KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")
# partition flags taking a number, with their range (IBA codes: mtu 1..5, rate 2..22)
NUMBER_FLAGS = {"mtu": (1, 5), "rate": (2, 22), "sl": (0, 15), "scope": (0, 15), "q_key": (0, 0xFFFFFFFF),
                "tclass": (0, 255), "flowlabel": (0, 0xFFFFF)}


class PartitionError(FileProblems):
    """A partitions file or mapping that cannot be used; every problem, with its line."""


@dataclasses.dataclass(frozen=True)
class Member:
    who: int | str  # a port GUID, or one of KEYWORDS
    membership: str  # full | limited | both
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Partition:
    name: str
    pkey: int  # the 15-bit base
    members: tuple = ()  # Members, in file order
    indx0: bool = False
    ipoib: bool = False
    flags: tuple = ()  # (flag, value) of mtu, rate, sl, scope, ... in file order
    mgroups: tuple = ()  # (mgid text, ((flag, value), ...)) for the SA
    line: int = 0

    def flag(self, name: str, default=None):
        return next((v for k, v in self.flags if k == name), default)

    def properties(self) -> dict:
        """The partition's flags as `partitions show --json` lists them."""
        return {"ipoib": self.ipoib, "indx0": self.indx0, **{k: v for k, v in self.flags}}


@dataclasses.dataclass(frozen=True)
class PartitionConfig:
    partitions: tuple  # Partitions, one per P_Key, in the order first named
    source: str = "partitions"
    warnings: tuple = ()  # problems that do not stop it (OpenSM accepts them too)

    def by_pkey(self, pkey: int) -> Partition | None:
        return next((p for p in self.partitions if p.pkey == pkey), None)


# -- the text grammar ----------------------------------------------------------------------
class _Lines:
    """Offsets in the comment-stripped text -> line numbers of the file."""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def _strip(text: str) -> str:
    """Comments blanked (offsets kept), backslash-newline joins blanked to spaces."""
    out = []
    for line in text.split("\n"):
        cut = line.find("#")
        if cut >= 0:
            line = line[:cut] + " " * (len(line) - cut)
        if line.rstrip().endswith("\\"):
            i = line.rstrip().rfind("\\")
            line = line[:i] + " " + line[i + 1:]
        out.append(line)
    return "\n".join(out)


def _number(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"0[xX][0-9a-fA-F]+|[0-9]+", t):
        raise ValueError
    return int(t, 0)


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.parts: dict[int | None, list] = {}  # pkey -> [Partition fields], None-keyed list for generated

    def error(self, line: int, msg: str) -> None:
        self.problems.append(f"line {line}: {msg}")

    def parse(self, text: str) -> PartitionConfig:
        clean = _strip(text.replace("\r\n", "\n"))
        lines = _Lines(clean)
        pos = 0
        stmts = []
        for m in re.finditer(";", clean):
            stmts.append((clean[pos:m.start()], pos))
            pos = m.end()
        if clean[pos:].strip():
            start = pos + len(clean[pos:]) - len(clean[pos:].lstrip())
            self.error(lines.at(start), "statement not ended by ';'")
        defs: list[dict] = []
        for body, off in stmts:
            if not body.strip():
                continue
            d = self.statement(body, off, lines)
            if d is not None:
                defs.append(d)
        return self.finish(defs)

    def statement(self, body: str, off: int, lines: _Lines) -> dict | None:
        first = off + len(body) - len(body.lstrip())
        line = lines.at(first)
        head, sep, props = body.partition(":")
        if not sep:
            self.error(line, f"partition definition {body.strip()!r} has no ':' before its members")
            return None
        d = self.definition(head, line)
        if d is None:
            return None
        props_off = off + len(head) + 1
        # OpenSM also accepts "defmember=X :" at the start of the properties
        m = re.match(r"\s*defmember\s*=\s*(\w+)\s*:", props)
        if m:
            self.defmember(d, m.group(1), lines.at(props_off + m.start(1)))
            props_off += m.end()
            props = props[m.end():]
        self.properties(d, props, props_off, lines)
        return d

    def definition(self, head: str, line: int) -> dict | None:
        items = [s.strip() for s in head.split(",")]
        name, eq, pk = items[0].partition("=")
        d: dict = {"name": name.strip(), "pkey": None, "line": line, "indx0": False, "ipoib": False, "flags": [],
                   "defmember": "limited", "members": [], "mgroups": []}
        if eq:
            try:
                v = _number(pk)
                if v > 0xFFFF or not v & 0x7FFF:
                    raise ValueError
                d["pkey"] = v & 0x7FFF
            except ValueError:
                self.error(line, f"P_Key {pk.strip()!r} is not a 16-bit number with a non-zero base (e.g. 0x8001)")
                return None
        if not re.fullmatch(r"[^\s=,:;]*", d["name"]):
            self.error(line, f"partition name {d['name']!r} contains blanks or separators")
        for item in items[1:]:
            self.flag(d, item, line)
        return d

    def flag(self, d: dict, item: str, line: int) -> None:
        key, eq, val = (s.strip() for s in item.partition("="))
        k = key.lower()
        if not eq and k in ("indx0", "ipoib"):
            d[k] = True
        elif eq and k == "defmember":
            self.defmember(d, val, line)
        elif eq and k in NUMBER_FLAGS:
            lo, hi = NUMBER_FLAGS[k]
            try:
                v = _number(val)
                if not lo <= v <= hi:
                    raise ValueError
                d["flags"].append((k, v))
            except ValueError:
                self.error(line, f"{key}={val!r}: not a number {lo}..{hi}")
        else:
            self.error(line, f"unknown partition flag {item!r} (known: indx0, ipoib, defmember=, "
                             f"{', '.join(f + '=' for f in NUMBER_FLAGS)})")

    def defmember(self, d: dict, val: str, line: int) -> None:
        if val.lower() not in MEMBERSHIPS:
            self.error(line, f"defmember={val!r} is not full, limited or both")
        else:
            d["defmember"] = val.lower()

    def properties(self, d: dict, props: str, off: int, lines: _Lines) -> None:
        pos = off
        for raw in props.split("\n"):
            here = pos
            pos += len(raw) + 1
            if raw.strip().lower().startswith("mgid="):
                self.mgroup(d, raw.strip(), lines.at(here))
                continue
            col = 0
            for item in raw.split(","):
                at = here + col + len(item) - len(item.lstrip())
                col += len(item) + 1
                if item.strip():
                    self.member(d, item.strip(), lines.at(at))

    def mgroup(self, d: dict, text: str, line: int) -> None:
        items = [s.strip() for s in text.split(",")]
        gid = items[0].partition("=")[2]
        if not re.fullmatch(r"[fF][fF][0-9a-fA-F:]+", gid):
            self.error(line, f"mgid {gid!r} is not a multicast GID (ff..:..)")
            return
        flags = []
        for item in items[1:]:
            k, eq, v = (s.strip() for s in item.partition("="))
            lo_hi = NUMBER_FLAGS.get(k.lower())
            try:
                if not eq or lo_hi is None:
                    raise KeyError
                n = _number(v)
                if not lo_hi[0] <= n <= lo_hi[1]:
                    raise ValueError
                flags.append((k.lower(), n))
            except KeyError:
                self.error(line, f"unknown multicast group flag {item!r}")
            except ValueError:
                self.error(line, f"{item!r}: not a number {lo_hi[0]}..{lo_hi[1]}")  # type: ignore[index]
        d["mgroups"].append((gid, tuple(flags)))

    def member(self, d: dict, item: str, line: int) -> None:
        who, eq, mem = (s.strip() for s in item.partition("="))
        membership = d["defmember"]
        if eq:
            if mem.lower() in MEMBERSHIPS:
                membership = mem.lower()
            else:  # OpenSM: "when omitted (or unrecognized) limited membership is assumed"
                membership = "limited"
                self.warnings.append(f"line {line}: membership {mem!r} of {who} is not full, limited or both: "
                                     f"limited (as OpenSM)")
        if who.upper() in KEYWORDS:
            d["members"].append(Member(who.upper(), membership, line))
            return
        try:
            g = _number(who)
            if not 0 < g <= 0xFFFFFFFFFFFFFFFF:
                raise ValueError
        except ValueError:
            self.error(line, f"member {who!r} is not a port GUID (0x and hex digits, or decimal) nor one of "
                             f"{', '.join(KEYWORDS)}")
            return
        d["members"].append(Member(g, membership, line))

    def finish(self, defs: list[dict]) -> PartitionConfig:
        if self.problems:
            self.problems.sort(key=lambda x: int(x.split()[1].rstrip(":")))
            raise PartitionError(self.source, self.problems)
        return merge(defs, self.source, self.warnings)


def merge(defs: list[dict], source: str, warnings: list[str], implicit_default: bool = True) -> PartitionConfig:
    """Partitions from parsed definitions: P_Keys generated where omitted, the same P_Key
    merged (first name kept), OpenSM's implicit default partition added."""
    used = {d["pkey"] for d in defs if d["pkey"] is not None}
    nxt = 1
    for d in defs:
        if d["pkey"] is None:
            while nxt in used:
                nxt += 1
            d["pkey"] = nxt
            used.add(nxt)
    merged: dict[int, dict] = {}
    for d in defs:
        m = merged.setdefault(d["pkey"], {**d, "members": [], "mgroups": [], "flags": []})
        m["members"] += d["members"]
        m["mgroups"] += d["mgroups"]
        m["flags"] += [f for f in d["flags"] if f[0] not in {k for k, _v in m["flags"]} or f[0] == "scope"]
        m["indx0"] = m["indx0"] or d["indx0"]
        m["ipoib"] = m["ipoib"] or d["ipoib"]
    if implicit_default:  # OpenSM makes it first and merges a file's rule for 0x7fff into it
        implicit = [Member("ALL", "limited"), Member("SELF", "full")]
        if DEFAULT_PKEY in merged:
            merged[DEFAULT_PKEY]["members"] = implicit + merged[DEFAULT_PKEY]["members"]
        else:
            merged[DEFAULT_PKEY] = {"name": "Default", "pkey": DEFAULT_PKEY, "line": 0, "indx0": False,
                                    "ipoib": False, "flags": [], "mgroups": [], "members": implicit}
    parts = tuple(Partition(m["name"], m["pkey"], tuple(m["members"]), m["indx0"], m["ipoib"], tuple(m["flags"]),
                            tuple(m["mgroups"]), m["line"]) for m in merged.values())
    return PartitionConfig(parts, source, tuple(warnings))


def parse(text: str, source: str = "partitions") -> PartitionConfig:
    """A partitions.conf text; PartitionError lists every problem with its line."""
    return _Parser(source).parse(text)


def load(path) -> PartitionConfig:
    """Read and parse a partitions.conf file (before any SMP is sent)."""
    path, text = paths.read_config(path, PartitionError)
    return parse(text, path)


# -- structured (a desired state's partitions:) ----------------------------------------------
PARTITION_KEYS = ("name", "pkey", "members", "defmember", "indx0", "ipoib", *NUMBER_FLAGS)


def from_mapping(doc, where: str = "partitions") -> PartitionConfig:
    """``partitions:`` of a desired state: a list of {name, pkey, members, defmember,
    indx0, ipoib, mtu, rate, sl, scope, ...}; members as in the file ("0x...=full",
    "ALL_CAS", a GUID number). The same rules as the file; every problem at once."""
    if not isinstance(doc, list):
        raise PartitionError(where, ["expected a list of partitions ({name, pkey, members, ...})"])
    p = _Parser(where)
    defs = []
    for i, e in enumerate(doc, 1):
        at = f"{where}[{i}]"
        if not isinstance(e, dict) or set(e) - set(PARTITION_KEYS):
            bad = sorted(set(e) - set(PARTITION_KEYS)) if isinstance(e, dict) else e
            p.problems.append(f"{at}: expected a mapping of {', '.join(PARTITION_KEYS)}, got {bad!r}")
            continue
        head = ",".join([f"{e.get('name', '')}" + (f"={e['pkey']}" if "pkey" in e else "")]
                        + [k for k in ("indx0", "ipoib") if e.get(k)]
                        + ([f"defmember={e['defmember']}"] if "defmember" in e else [])
                        + [f"{k}={e[k]}" for k in NUMBER_FLAGS if k in e])
        before = len(p.problems)
        d = p.definition(head, i)
        members = e.get("members", [])
        if not isinstance(members, list):
            p.problems.append(f"line {i}: members: expected a list")
            members = []
        if d is not None:
            for m in members:
                p.member(d, f"{m:#x}" if isinstance(m, int) and not isinstance(m, bool) else str(m), i)
            defs.append(d)
        p.problems[before:] = [x.replace(f"line {i}:", f"{at}:", 1) for x in p.problems[before:]]
    p.warnings = [w.replace("line ", f"{where}[", 1).replace(":", "]:", 1) for w in p.warnings]
    if p.problems:
        raise PartitionError(where, p.problems)
    return merge(defs, where, p.warnings)


# -- membership on a fabric ----------------------------------------------------------------------
@dataclasses.dataclass
class Assignment:
    """Who holds which P_Key. ``ports``: (node GUID, port) -> 16-bit P_Keys (membership bit
    set for full) in the order `layout` gives them in a table holding none of them yet
    (what `verify` and the SA compare against); ``pending``: the same keys in the order
    OpenSM's P_Key manager places them (`layout`'s ``wanted``); ``indx0``: the P_Key a port
    wants at index 0 (an ``indx0`` partition), if any."""
    ports: dict
    warnings: list
    pending: dict = dataclasses.field(default_factory=dict)
    indx0: dict = dataclasses.field(default_factory=dict)

    def keys_of(self, guid: int, port: int) -> list[int]:
        return self.ports.get((guid, port), [])


def end_ports(topo) -> dict:
    """(guid, port) -> (kind, port GUID) of every end port: CA and router ports, switch port 0."""
    out = {}
    for n in topo.nodes.values():
        if n.is_switch:
            out[(n.guid, 0)] = ("switch", n.port_guids.get(0, n.guid))
        else:
            kind = "router" if n.node_type == NodeType.ROUTER else "ca"
            for p in sorted(n.port_paths):
                out[(n.guid, p)] = (kind, n.port_guids.get(p, n.guid))
    return out


def _matches(member: Member, key: tuple, kind: str, port_guid: int, local: tuple) -> bool:
    w = member.who
    if isinstance(w, int):
        return w == port_guid
    return (w == "ALL" or (w == "ALL_CAS" and kind == "ca") or (w == "ALL_SWITCHES" and kind == "switch")
            or (w == "ALL_ROUTERS" and kind == "router") or (w == "SELF" and key == local))


def opensm_order(pkey: int) -> int:
    """OpenSM keeps its partitions in a map keyed by the P_Key in network byte order, read
    as a host (little-endian) integer: its P_Key manager visits them, and so appends new
    keys to a table, in this order (0x0100 before 0x0001)."""
    base = pkey & 0x7FFF
    return ((base & 0xFF) << 8) | (base >> 8)


def resolve(config: PartitionConfig, topo) -> Assignment:
    """Every end port's P_Keys. Mentions are taken in file order (OpenSM's implicit
    default partition first) and, as in OpenSM 3.3.23, the last mention of a port in a
    partition sets its membership (``both`` is full) and the last ``indx0`` partition
    naming it (unless a later plain mention of that P_Key) its index 0. A later rule that
    lowers full to limited is a warning; so is a member GUID not on the fabric."""
    ends = end_ports(topo)
    local = topo.local
    sw = topo.nodes.get(local[0])
    if sw is not None and sw.is_switch:
        local = (local[0], 0)
    by_guid = {pg: key for key, (_k, pg) in ends.items()}
    warnings = list(config.warnings)
    member: dict[tuple, dict[int, bool]] = {}
    gave_full: dict[tuple, Member] = {}  # (port, pkey) -> the mention that made it full
    indx0: dict[tuple, int] = {}
    mentions = sorted(((part, m) for part in config.partitions for m in part.members), key=lambda pm: pm[1].line)
    names = {}
    for part, m in mentions:
        if isinstance(m.who, int):
            keys = [by_guid[m.who]] if m.who in by_guid else []
            if not keys:
                warnings.append(f"{config.source}: line {m.line}: member 0x{m.who:016x} of partition "
                                f"{part.name or '(unnamed)'} ({part.pkey:#06x}) is not an end port on the fabric")
        else:
            keys = [k for k, (kind, pg) in ends.items() if _matches(m, k, kind, pg, local)]
        full = m.membership != "limited"
        for k in keys:
            member.setdefault(k, {})[part.pkey] = full
            names[part.pkey] = part.name or "(unnamed)"
            if full:
                gave_full[(k, part.pkey)] = m
            if part.indx0:
                indx0[k] = part.pkey | (FULL_BIT if full else 0)
            elif k in indx0 and indx0[k] & 0x7FFF == part.pkey:
                del indx0[k]
    lowered: dict[tuple, list] = {}
    for (k, pkey), m in gave_full.items():
        if not member[k][pkey]:
            lowered.setdefault((pkey, m.line), []).append(k)
    for (pkey, line), ks in sorted(lowered.items()):
        where = f"line {line}" if line else "OpenSM's implicit default (SELF=full)"
        n = topo.nodes.get(ks[0][0])
        first = f"{n.description or hex(n.guid)}[{ks[0][1]}]" if n is not None else str(ks[0])
        warnings.append(f"{config.source}: partition {names[pkey]} ({pkey:#06x}): {len(ks)} port(s) made full members "
                        f"by {where} are limited members after a later rule (e.g. {first}): the last mention wins, "
                        f"as in OpenSM 3.3.23")
    pending = {k: sorted((p | (FULL_BIT if f else 0) for p, f in d.items()), key=opensm_order)
               for k, d in member.items()}
    ports = {k: [x for x in layout(None, pending[k], indx0.get(k, 0), len(pending[k]) + 1) if x & 0x7FFF] for k in pending}
    return Assignment(ports, warnings, pending, indx0)


def layout(current, wanted: list[int], indx0: int, cap: int) -> list[int]:
    """Where OpenSM 3.3.23's P_Key manager (osm_pkey_mgr.c, keep_pkey_indexes on, one fresh
    run) puts ``wanted`` (16-bit keys in `opensm_order`) in a port of ``cap`` entries whose
    table holds ``current`` (every index read; None: nothing yet): a key the table already
    holds (by base, its first index) stays where it is, and its membership bit is
    updated; index 0 belongs to ``indx0`` if given, else to the default partition; the
    other new keys go after the highest index taken, or, past ``cap``, to the first free
    index; keys that fit nowhere are left out. Returns the whole new table (``cap``
    entries), 0 where no key belongs."""
    cur = list(current or [])
    where: dict[int, int] = {}
    for i, k in enumerate(cur):
        if k & 0x7FFF and k & 0x7FFF not in where:
            where[k & 0x7FFF] = i
    i0 = indx0 & 0x7FFF
    head: list[tuple[int, int | None]] = []
    tail: list[tuple[int, int | None]] = []
    for k in wanted:
        base = k & 0x7FFF
        at = where.get(base)
        if at is not None:
            moves = (base == i0 and at != 0) or (at == 0 and base != (i0 or DEFAULT_PKEY)) \
                or (not i0 and base == DEFAULT_PKEY and at != 0)
            if not moves:
                head.insert(0, (k, at))
                continue
        tail.append((k, None))
    table = [0] * cap
    last = 0  # OpenSM's last_pkey_idx: one past the highest index given out
    for k, at in head + tail:
        base = k & 0x7FFF
        if at is None:
            if base == (i0 or DEFAULT_PKEY):
                at = 0
            else:
                at = last if last else 1
                if at >= cap and base == DEFAULT_PKEY:
                    continue  # OpenSM never moves the default partition to a free index
                if at >= cap:
                    at = next((i for i in range(1, cap) if not table[i] & 0x7FFF), None)
                    if at is None:
                        continue  # the table is full: OpenSM logs ERR 0512
        if at >= cap:
            continue
        table[at] = k
        last = max(last, at + 1)
    return table


def enforcement_keys(host_table: list[int]) -> list[int]:
    """The keys OpenSM copies from an end port's new table to the enforcing switch port
    facing it: in index order, gaps closed, a limited key dropped when its full one is
    there too."""
    keys = set(host_table)
    return [k for k in host_table if k & 0x7FFF and (k & FULL_BIT or (k | FULL_BIT) not in keys)]


# -- what `smagent partitions show` prints ------------------------------------------------------
def view(topo, tables: dict, config: PartitionConfig | None = None) -> dict:
    """Membership by port and by partition. ``tables``: (guid, port) -> 16-bit P_Keys (as
    read, or `resolve`'s); ``config`` names the partitions."""
    ends = end_ports(topo)
    parts = {p.pkey: p for p in (config.partitions if config else ())}
    by_port: list[dict] = []
    by_part: dict[int, dict] = {}
    for key in sorted(tables):
        n = topo.nodes.get(key[0])
        if n is None or key not in ends:
            continue
        where = f"{n.description or hex(n.guid)}[{key[1]}]"
        keys = [k for k in tables[key] if k & 0x7FFF]
        by_port.append({"port": where, "guid": f"0x{ends[key][1]:016x}", "kind": ends[key][0],
                        "pkeys": [{"pkey": f"{k & 0x7FFF:#06x}", "membership": "full" if k & FULL_BIT else "limited"}
                                  for k in keys]})
        for k in keys:
            part = parts.get(k & 0x7FFF)
            e = by_part.setdefault(k & 0x7FFF, {"pkey": f"{k & 0x7FFF:#06x}", "name": part and part.name,
                                                **(part.properties() if part else {}), "full": [], "limited": []})
            e["full" if k & FULL_BIT else "limited"].append(where)
    return {"ports": by_port, "partitions": [by_part[k] for k in sorted(by_part)]}
