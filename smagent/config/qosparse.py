"""The grammar of a QoS policy file (`smagent.config.qospolicy`): OpenSM 3.3.23's
qos-policy.conf (its osm_qos_parser_l.l / osm_qos_parser_y.y and osm_qos_policy.c's
checks), one entry a line, and the opensm.conf ``qos_*`` table lines.

As OpenSM reads it: keywords are lower case; ``#`` starts a comment; in names and name
lists blanks are dropped unless quoted (``name: Virtual Servers`` is the group
``VirtualServers``, ``port-name: "vs1 HCA-1/P1"`` keeps its blank); numbers are decimal
or 0x hex; a range is N-M; names of groups and levels are matched ignoring case (the
first of a name wins); a port name is ``NodeDescription/Pn`` (n >= 1); qos-setup is
checked and ignored. Refused, as OpenSM refuses them: an unknown keyword or section, a
section not closed, port-groups or qos-ulps with nothing in them, a port-group or
qos-level without a name, a qos-level without an SL, a match rule without a level or
naming a level or group that does not exist, a field given twice where OpenSM takes one,
an MTU limit outside 1..5, a rate limit outside 2..22, no default level (a qos-level
named DEFAULT, or ``default`` in qos-ulps). Refused beyond OpenSM (it would take them
and misbehave): an SL outside 0..15, a packet lifetime outside 0..63, a number past 64
bits, a range written backwards, a second ``default`` in qos-ulps."""
from __future__ import annotations

import re

from smagent.config.qosrules import (DEFAULT_PKEY, ISER_PORT, NODE_TYPES, OPTIONS, RDS_BASE, RDS_PORT, SDP_BASE,
                                      PortClass, PortGroup, QosLevel, QosPolicy, QosPolicyError, Ranges, Rule)

MTU_CODES, RATE_CODES = (1, 5), (2, 22)  # OpenSM 3.3.23's IB_MIN/MAX_MTU, IB_MIN/MAX_RATE
# section -> (the entries it holds, whether it may be empty)
BLOCKS = {"port-groups": ("port-group", False), "qos-levels": ("qos-level", True),
          "qos-match-rules": ("qos-match-rule", True), "vlarb-tables": ("vlarb-scope", True),
          "sl2vl-tables": ("sl2vl-scope", True)}
FIELDS = {
    "port-group": ("name", "use", "port-guid", "port-name", "pkey", "partition", "node-type"),
    "qos-level": ("name", "use", "sl", "mtu-limit", "rate-limit", "packet-life", "path-bits", "pkey"),
    "qos-match-rule": ("use", "qos-class", "qos-level-name", "source", "destination", "service-id", "pkey"),
    "vlarb-scope": ("group", "across", "vlarb-high", "vlarb-low", "vl-high-limit"),
    "sl2vl-scope": ("group", "across", "across-to", "across-from", "from", "to", "sl2vl-table"),
}
ONCE = {"name", "use", "sl", "mtu-limit", "rate-limit", "packet-life", "qos-level-name", "sl2vl-table", "vl-high-limit"}
ULP_KINDS = {"service-id": "service_ids", "pkey": "pkeys", "target-port-guid": "destinations",
             "source-port-guid": "sources", "source-target-port-guid": "both"}
MAX_PORTS = 128  # OSM_QOS_POLICY_MAX_PORTS_ON_SWITCH: sl2vl-scope from/to


def _strip_comment(raw: str) -> str:
    out, quoted = [], False
    for ch in raw:
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


def _squeeze(text: str) -> str:
    """A name as OpenSM's lexer makes it: blanks dropped outside quotes, quotes removed."""
    parts = text.split('"')
    return "".join(p if i % 2 else re.sub(r"\s+", "", p) for i, p in enumerate(parts))


def _split(text: str) -> list[str]:
    """Comma-separated items, commas inside quotes kept."""
    items: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return items + ["".join(cur)]


def number(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"0[xX][0-9a-fA-F]+|[0-9]+", t):
        raise ValueError(f"{t!r} is not a number")
    n = int(t, 16) if t[:2].lower() == "0x" else int(t, 10)
    if n >= 1 << 64:
        raise ValueError(f"{t} does not fit in 64 bits")
    return n


def ranges(text: str, what: str, mask: int | None = None) -> Ranges:
    """"N, N-M, ..." -> ((lo, hi), ...), each value ANDed with ``mask`` first (P_Keys:
    their 15 bits, as OpenSM); ValueError naming the bad item."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        lo, dash, hi = item.partition("-")
        try:
            a = number(lo)
            b = number(hi) if dash else a
        except ValueError as e:
            why = str(e) if "64 bits" in str(e) else "is not a number or range N-M"
            raise ValueError(f"{what} {item!r} {why}") from None
        if mask is not None:
            a, b = a & mask, b & mask
        if a > b:
            raise ValueError(f"{what} range {item!r} is empty (written backwards)")
        out.append((a, b))
    return tuple(out)


def _names(text: str, what: str) -> tuple[str, ...]:
    items = [_squeeze(i) for i in _split(text)]
    if not all(items):
        raise ValueError(f"{what}: an empty name in {text.strip()!r}")
    return tuple(items)


def _one_name(text: str, what: str) -> str:
    items = _names(text, what)
    if len(items) != 1:
        raise ValueError(f"{what} takes one name, got {text.strip()!r}")
    return items[0]


def _bounded(text: str, what: str, lo: int, hi: int) -> int:
    n = number(text)
    if not lo <= n <= hi:
        raise ValueError(f"{what} {n} is not {lo}..{hi}")
    return n


class Parser:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[str] = []
        self.groups: list[PortGroup] = []
        self.levels: list[QosLevel] = []
        self.rules: list[tuple[dict, int]] = []  # qos-match-rules as written, resolved at the end
        self.ulps: list[Rule] = []
        self.ulp_default: tuple[int, int] | None = None  # (SL, line)
        self.options: dict[tuple[str, str], tuple[object, int]] = {}
        self.stack: list[tuple[str, int]] = []  # open sections (name, line)
        self.entry: dict | None = None  # the entry being read
        self.counts: dict[int, int] = {}  # line of an open section -> entries in it
        self.has_policy = False

    def error(self, line: int, msg: str) -> None:
        self.problems.append(f"line {line}: {msg}")

    # -- the file ---------------------------------------------------------------------
    def parse(self, text: str) -> QosPolicy:
        for no, raw in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
            line = _strip_comment(raw)
            if line:
                self.line(line, no)
        for name, at in reversed(self.stack):
            self.error(at, f"section '{name}' is not closed by 'end-{name}'")
        policy = self.finish()
        if self.problems:
            raise QosPolicyError(self.source, self.problems)
        return policy

    def line(self, line: str, no: int) -> None:
        word = line.split()[0]
        inside = self.stack[-1][0] if self.stack else None
        if inside is not None and word == f"end-{inside}":
            return self.close(no)
        if inside == "qos-ulps":
            return self.ulp(line, no)
        if inside in FIELDS:
            return self.field(inside, line, no)
        if inside in BLOCKS:
            if word == BLOCKS[inside][0]:
                return self.open(word, no)
            return self.error(no, f"{line!r} in {inside}: expected '{BLOCKS[inside][0]}' or 'end-{inside}'")
        if inside == "qos-setup":
            if word in ("vlarb-tables", "sl2vl-tables"):
                return self.open(word, no)
            return self.error(no, f"{line!r} in qos-setup: expected vlarb-tables, sl2vl-tables or 'end-qos-setup'")
        if word in ("qos-ulps", "port-groups", "qos-levels", "qos-match-rules", "qos-setup"):
            self.has_policy = True
            return self.open(word, no)
        if word.startswith("qos_") or word == "qos":
            return self.option(line, no)
        if word.startswith("end-"):
            return self.error(no, f"'{word}' without its section")
        if word.lower() != word and word.lower() in ("qos-ulps", "port-groups", "qos-levels", "qos-match-rules"):
            return self.error(no, f"'{word}': keywords are lower case (OpenSM's)")
        return self.error(no, f"{line!r} is neither a qos_* option nor a section (port-groups, qos-setup, "
                              f"qos-levels, qos-match-rules, qos-ulps)")

    def open(self, name: str, no: int) -> None:
        if self.stack:
            self.counts[self.stack[-1][1]] = self.counts.get(self.stack[-1][1], 0) + 1
        self.stack.append((name, no))
        if name in FIELDS:
            self.entry = {"line": no}

    def close(self, no: int) -> None:
        name, at = self.stack.pop()
        empty = not self.counts.get(at)
        if name in FIELDS:
            self.end_entry(name, self.entry or {"line": at}, no)
            self.entry = None
        elif (name in BLOCKS and not BLOCKS[name][1] or name == "qos-ulps") and empty:
            self.error(no, f"{name} (line {at}) holds nothing; OpenSM refuses an empty {name} section")

    # -- entries ----------------------------------------------------------------------
    def field(self, entry: str, line: str, no: int) -> None:
        m = re.fullmatch(r"([a-z0-9-]+)\s*:\s*(.*)", line)
        key = m.group(1) if m else line.split()[0]
        if m is None or key not in FIELDS[entry]:
            if line.split()[0] in BLOCKS or line.split()[0] in FIELDS or line.startswith("end-"):
                return self.error(no, f"'{line.split()[0]}' inside {entry} (line {self.stack[-1][1]}): "
                                      f"close it with 'end-{entry}' first")
            return self.error(no, f"{line!r} in {entry}: expected one of {', '.join(k + ':' for k in FIELDS[entry])}")
        assert self.entry is not None
        value = m.group(2).strip()
        if key in ONCE and key in self.entry:
            return self.error(no, f"{entry} has a second '{key}' (first on line {self.entry[key][1]})")
        if not value:
            return self.error(no, f"'{key}:' has no value")
        try:
            parsed = self.value(entry, key, value)
        except ValueError as e:
            return self.error(no, f"{key}: {e}")
        if key in ONCE:
            self.entry[key] = (parsed, no)
        else:  # lists: every mention adds (OpenSM merges them)
            self.entry.setdefault(key, ((), no))
            self.entry[key] = (self.entry[key][0] + parsed, self.entry[key][1])

    def value(self, entry: str, key: str, value: str):
        if key == "use":
            return value.replace('"', "")
        if key in ("name", "qos-level-name"):
            return _one_name(value, key)
        if key in ("source", "destination", "partition", "group", "across", "across-to", "across-from"):
            return _names(value, key)
        if key == "port-name":
            return tuple(_port_name(n) for n in _names(value, key))
        if key == "node-type":
            return _node_types(value)
        if key == "sl":
            return _bounded(value, "SL", 0, 15)
        if key == "mtu-limit":
            return _bounded(value, "MTU limit", *MTU_CODES)
        if key == "rate-limit":
            return _bounded(value, "rate limit", *RATE_CODES)
        if key == "packet-life":
            return _bounded(value, "packet lifetime", 0, 63)
        if key == "vl-high-limit":
            return number(value)
        if key in ("vlarb-high", "vlarb-low"):
            return tuple(tuple(number(x) for x in _pair(p)) for p in value.split(","))
        if key == "sl2vl-table":
            vls = tuple(number(x) for x in value.split(","))
            if len(vls) != 16 or any(v > 15 for v in vls):
                raise ValueError("needs 16 VLs, each 0..15")
            return vls
        if key in ("from", "to"):
            if value == "*":
                return ((0, MAX_PORTS - 1),)
            got = ranges(value, key)
            if any(hi >= MAX_PORTS for _lo, hi in got):
                raise ValueError(f"port number out of range (0..{MAX_PORTS - 1})")
            return got
        return ranges(value, key, 0x7FFF if key == "pkey" else None)  # port-guid, pkey, path-bits, qos-class, service-id

    def end_entry(self, name: str, e: dict, no: int) -> None:
        at = e["line"]
        get = {k: v[0] for k, v in e.items() if k != "line"}
        if name == "port-group":
            if "name" not in get:
                return self.error(at, "port-group without a 'name:'")
            self.groups.append(PortGroup(get["name"], at, get.get("port-guid", ()), get.get("port-name", ()),
                                         get.get("pkey", ()), get.get("partition", ()),
                                         frozenset(t for t in get.get("node-type", ()) if t),
                                         0 in get.get("node-type", ()), get.get("use", "")))
        elif name == "qos-level":
            for need in ("sl", "name"):
                if need not in get:
                    return self.error(at, f"qos-level without a '{need}:'")
            self.levels.append(QosLevel(get["name"], get["sl"], get.get("mtu-limit"), get.get("rate-limit"),
                                        get.get("packet-life"), get.get("path-bits", ()), get.get("pkey", ()), at,
                                        get.get("use", "")))
        elif name == "qos-match-rule":
            if "qos-level-name" not in get:
                return self.error(at, "qos-match-rule without a 'qos-level-name:'")
            self.rules.append((get, at))
        elif name == "vlarb-scope" and not (get.get("group") or get.get("across")):
            self.error(at, "vlarb-scope names no port group ('group:' or 'across:')")
        elif name == "sl2vl-scope":
            if "sl2vl-table" not in get:
                self.error(at, "sl2vl-scope without an 'sl2vl-table:'")
            elif not any(get.get(k) for k in ("group", "across", "across-to", "across-from")):
                self.error(at, "sl2vl-scope names no port group ('group:', 'across-to:' or 'across-from:')")
        return None

    # -- qos-ulps -----------------------------------------------------------------------
    def ulp(self, line: str, no: int) -> None:
        self.counts[self.stack[-1][1]] = self.counts.get(self.stack[-1][1], 0) + 1
        head, sep, sl_text = line.rpartition(":")
        if not sep:
            return self.error(no, f"rule {line!r} has no ': SL'")
        try:
            sl = _bounded(sl_text, "SL", 0, 15)
        except ValueError:
            return self.error(no, f"SL {sl_text.strip()!r} is not 0..15")
        ulp, comma, rest = (s.strip() for s in head.partition(","))
        ulp = ulp.lower()
        if comma and not rest:
            return self.error(no, f"'{ulp},' without a criterion")
        if ulp == "default":
            if rest:
                return self.error(no, "'default' takes no criterion")
            if self.ulp_default is not None:
                return self.error(no, f"a second 'default' rule (first on line {self.ulp_default[1]})")
            self.ulp_default = (sl, no)
            return None
        try:
            kind, values = _criterion(ulp, rest)
        except ValueError as e:
            return self.error(no, str(e))
        level = QosLevel(f"SimpleQoSLevel_SL{sl}", sl)
        text = " ".join(head.split())
        if kind in ("sources", "destinations", "both"):
            group = (PortGroup({"sources": "_ULP_Sources_", "destinations": "_ULP_Targets_",
                                "both": "_ULP_Sources_Targets_"}[kind], no, values),)
            self.ulps.append(Rule(level, sources=group if kind != "destinations" else (),
                                  destinations=group if kind != "sources" else (), line=no, text=text, ulp=ulp))
        else:
            self.ulps.append(Rule(level, service_ids=values if kind == "service_ids" else (),
                                  pkeys=values if kind == "pkeys" else (), line=no, text=text, ulp=ulp))
        return None

    # -- qos_* options ------------------------------------------------------------------
    def option(self, line: str, no: int) -> None:
        key, _sp, value = line.partition(" ")
        value = value.strip()
        m = re.fullmatch(r"qos_(?:(ca|sw0|swe|rtr)_)?(max_vls|high_limit|vlarb_high|vlarb_low|sl2vl)", key)
        if m is None:
            return self.error(no, f"unknown option {key!r} (known: qos_[ca_|sw0_|swe_]{{{', '.join(OPTIONS)}}})")
        cls, name = m.group(1) or "", m.group(2)
        if cls == "rtr":
            return self.error(no, f"{key}: router ports are not configured by smagent")
        if not value:
            return self.error(no, f"{key} has no value")
        if (cls, name) in self.options:
            return self.error(no, f"{key} given twice (first on line {self.options[(cls, name)][1]})")
        try:
            parsed = _option_value(name, value)
        except ValueError as e:
            return self.error(no, f"{key}: {e}")
        self.options[(cls, name)] = (parsed, no)

    # -- the whole ----------------------------------------------------------------------
    def finish(self) -> QosPolicy:
        levels: dict[str, QosLevel] = {}
        for lv in self.levels:
            levels.setdefault(lv.name.lower(), lv)  # OpenSM takes the first of a name
        groups: dict[str, PortGroup] = {}
        for g in self.groups:
            groups.setdefault(g.name.lower(), g)
        rules = []
        for n, (get, at) in enumerate(self.rules, 1):
            level = levels.get(get["qos-level-name"].lower())
            if level is None:
                self.error(at, f"qos-match-rule {n}: qos-level '{get['qos-level-name']}' is not defined")
            ends = {}
            for key, field in (("source", "sources"), ("destination", "destinations")):
                missing = [name for name in get.get(key, ()) if name.lower() not in groups]
                if missing:
                    self.error(at, f"qos-match-rule {n}: {key} port-group '{missing[0]}' is not defined")
                ends[field] = tuple(groups[name.lower()] for name in get.get(key, ()) if name.lower() in groups)
            if level is None:
                continue
            text = get.get("use") or f"qos-match-rule {n}, qos-level {level.name}"
            rules.append(Rule(level, ends["sources"], ends["destinations"], get.get("service-id", ()),
                              get.get("pkey", ()), get.get("qos-class", ()), at, text))
        default = levels.get("default")
        if default is None and self.ulp_default is not None:
            default = QosLevel("SimpleQoSLevel_DEFAULT", self.ulp_default[0], line=self.ulp_default[1])
        if default is None and self.has_policy:
            self.problems.append("no default QoS level: OpenSM refuses a policy without one (give a qos-level named "
                          "DEFAULT, or 'default : SL' in qos-ulps)")
        classes: dict[str, dict] = {}
        for (cls, name), (value, _line) in self.options.items():
            classes.setdefault(cls, {})[name] = value
        return QosPolicy(tuple(rules + self.ulps), default,
                         tuple((c, PortClass(**kw)) for c, kw in sorted(classes.items())), self.source,
                         tuple(self.groups), tuple(self.levels))


def _pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition(":")
    if not sep:
        raise ValueError(f"{text.strip()!r} is not VL:WEIGHT")
    return a, b


def _port_name(text: str) -> tuple[str, int]:
    desc, slash, port = text.rpartition("/")
    if not slash or len(port) < 2 or port[0] not in "pP":
        raise ValueError(f"'{text}' is not NodeDescription/Pn")
    try:
        n = number(port[1:])
    except ValueError:
        n = 0
    if n == 0:
        raise ValueError(f"'{text}': illegal port number (1 and up)")
    return desc, n


def _node_types(text: str) -> tuple[int, ...]:
    """NodeType numbers; 0 stands for SELF."""
    out: list[int] = []
    for item in (s.strip().lower() for s in text.split(",")):
        if item == "all":
            out += NODE_TYPES.values()
        elif item == "self":
            out.append(0)
        elif item in NODE_TYPES:
            out.append(NODE_TYPES[item])
        else:
            raise ValueError(f"{item!r} is not a node type (CA, SWITCH, ROUTER, ALL, SELF)")
    return tuple(out)


def _criterion(ulp: str, rest: str) -> tuple[str, Ranges]:
    """(Rule field or sources / destinations / both, ranges) of a qos-ulps rule's
    "ULP[, keyword ranges]"."""
    words = rest.split(None, 1)
    key, values = (words[0], words[1] if len(words) > 1 else "") if words else ("", "")
    if key and not values:
        raise ValueError(f"'{key}' needs values")
    if ulp == "any":
        if key not in ULP_KINDS:
            raise ValueError(f"'any' needs service-id, pkey, target-port-guid, source-port-guid or "
                             f"source-target-port-guid, got {rest!r}")
        return ULP_KINDS[key], ranges(values, key, 0x7FFF if key == "pkey" else None)
    if ulp in ("sdp", "rds", "iser"):
        if not key:
            return "service_ids", (((SDP_BASE, SDP_BASE + 0xFFFF),) if ulp == "sdp" else
                                   ((RDS_BASE + (RDS_PORT if ulp == "rds" else ISER_PORT),) * 2,))
        if key != "port-num":
            raise ValueError(f"'{ulp}' takes port-num, got {key!r}")
        ports = ranges(values, "port-num")
        if any(hi > 0xFFFF for _lo, hi in ports):
            raise ValueError("port-num above 65535")
        base = SDP_BASE if ulp == "sdp" else RDS_BASE
        return "service_ids", tuple((base + lo, base + hi) for lo, hi in ports)
    if ulp == "ipoib":
        if not key:
            return "pkeys", ((DEFAULT_PKEY, DEFAULT_PKEY),)
        if key != "pkey":
            raise ValueError(f"'ipoib' takes pkey, got {key!r}")
        return "pkeys", ranges(values, "pkey", 0x7FFF)
    if ulp == "srp":
        if key != "target-port-guid":
            raise ValueError("'srp' needs target-port-guid")
        return "destinations", ranges(values, key)
    raise ValueError(f"unknown ULP {ulp!r} (known: default, any, sdp, rds, iser, ipoib, srp)")


def _option_value(name: str, value: str):
    from smagent.config.linkoptions import LinkConfigError, parse_sl2vl, parse_vlarb
    try:
        if name == "sl2vl":
            t = parse_sl2vl(value)
            if len(t) != 16 or not all(0 <= v <= 15 for v in t):
                raise ValueError(f"needs 16 VLs 0..15, got {value!r}")
            return t
        if name in ("vlarb_high", "vlarb_low"):
            t = parse_vlarb(value)
            if len(t) > 64 or not all(0 <= vl <= 14 and 0 <= w <= 255 for vl, w in t):
                raise ValueError(f"needs at most 64 VL:WEIGHT pairs (VL 0..14, weight 0..255), got {value!r}")
            return t
    except LinkConfigError as e:
        raise ValueError(str(e)) from None
    try:
        n = _legacy_number(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    lo, hi = (1, 15) if name == "max_vls" else (0, 255)
    if not lo <= n <= hi:
        raise ValueError(f"{n} is not {lo}..{hi}")
    return n


def _legacy_number(text: str) -> int:
    return int(text, 0) if not re.fullmatch(r"0\d+", text) else int(text, 10)
