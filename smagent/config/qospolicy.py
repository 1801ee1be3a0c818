"""A QoS policy (`--qos-policy FILE`, a desired state's ``qos_policy:``): the SL of a
path by OpenSM's simplified QoS policy (``qos-ulps``, the section of the
``qos-policy.conf`` that `opensm -Q -Y FILE` reads), and the per-port-class SL2VL and
VLArbitration tables OpenSM takes from its opensm.conf (``qos_ca_*``, ``qos_sw0_*``,
``qos_swe_*`` and the ``qos_*`` they default to), written as opensm.conf lines in the
same file::

    # a comment, to the end of the line
    qos_swe_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
    qos_ca_vlarb_low 0:8,1:8,2:8,3:8
    qos-ulps
        default                                : 0
        any, service-id 0x10000-0x1FFFF        : 1   # ranges: N or N-M, comma-separated
        any, pkey 0x0ABC                       : 2
        any, target-port-guid 0x0002c903000001 : 3
        sdp, port-num 10000-20000              : 4   # sdp, rds, iser: by service ID
        ipoib                                  : 5   # ipoib: by P_Key (default 0x7fff)
        srp, target-port-guid 0x1234           : 6
    end-qos-ulps

Rules are tried in file order, the first that matches wins; ``default`` applies when
none does (OpenSM's order). A rule by service ID or P_Key matches only a PathRecord
query that gives that component (OpenSM's matching); a rule by target port GUID matches
every query for that destination. Options: ``max_vls`` (1..15; OpenSM's QoS manager
reads it and applies nothing, nor does smagent), ``high_limit`` (VLHighLimit 0..255),
``vlarb_high`` / ``vlarb_low`` ("VL:WEIGHT,..."), ``sl2vl`` (16 VLs), each for a class
(``ca``: CA ports; ``swe``: switch external ports, every (input, output) pair;
``sw0``: an enhanced switch port 0) or without one (the default of the three).

Not read (refused with the line): the full policy's other sections (port-groups,
qos-setup, qos-levels, qos-match-rules), source-port GUID rules, router classes.
Every problem is reported with its line number in one `QosPolicyError` (exit 2),
before anything is sent."""
from __future__ import annotations

import dataclasses
import re

from smagent.config import files as paths
from smagent.errors import FileProblems

CLASSES = ("ca", "sw0", "swe")
OPTIONS = ("max_vls", "high_limit", "vlarb_high", "vlarb_low", "sl2vl")
SECTIONS = ("port-groups", "qos-setup", "qos-levels", "qos-match-rules")
# the ULPs OpenSM names, as the service IDs / P_Keys it matches them by (QoS_management_in_OpenSM)
SDP_BASE, RDS_BASE = 0x10000, 0x1060000
RDS_PORT, ISER_PORT = 0x48CA, 0x0CBC
DEFAULT_PKEY = 0x7FFF
KINDS = ("service-id", "pkey", "target-port-guid")


class QosPolicyError(FileProblems):
    """A QoS policy that cannot be used; every problem, with its line."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One qos-ulps match rule: ``kind`` (service-id, pkey, target-port-guid), inclusive
    ``ranges`` of values, the ``sl`` it gives, where it was written."""
    kind: str
    ranges: tuple[tuple[int, int], ...]
    sl: int
    line: int = 0
    text: str = ""
    ulp: str = ""  # the ULP it was written for (any, sdp, rds, iser, ipoib, srp)

    def covers(self, value: int) -> bool:
        return any(lo <= value <= hi for lo, hi in self.ranges)

    @property
    def by_request(self) -> bool:
        """Whether the rule matches only queries that carry a component (service ID,
        P_Key), not every path to a port."""
        return self.kind != "target-port-guid"

    def describe(self) -> str:
        return f"line {self.line} ({self.text})" if self.line else self.text


@dataclasses.dataclass(frozen=True)
class PortClass:
    """One port class's tables (None: the class-less option's, else OpenSM's default)."""
    sl2vl: tuple | None = None
    vlarb_high: tuple | None = None
    vlarb_low: tuple | None = None
    high_limit: int | None = None
    max_vls: int | None = None


@dataclasses.dataclass(frozen=True)
class QosPolicy:
    rules: tuple[Rule, ...] = ()
    default_sl: int | None = None  # None: no default rule (the engine's SL, else 0)
    classes: tuple[tuple[str, PortClass], ...] = ()  # (class or "", options) as written
    source: str = "qos policy"

    def port_class(self, name: str) -> PortClass:
        """``name``'s tables, each option falling back to the class-less one (OpenSM's
        qos_build_config); None where neither is given."""
        given = dict(self.classes)
        own, base = given.get(name, PortClass()), given.get("", PortClass())
        return PortClass(**{f: getattr(own, f) if getattr(own, f) is not None else getattr(base, f)
                            for f in OPTIONS if f in PortClass.__dataclass_fields__})

    @property
    def has_tables(self) -> bool:
        return any(getattr(pc, f) is not None for _n, pc in self.classes for f in ("sl2vl", "vlarb_high",
                                                                                 "vlarb_low", "high_limit"))

    def sls(self) -> list[tuple[int, str]]:
        """(SL, where it is given: "rule line N (...)" or "default") of every rule."""
        out = [(r.sl, f"rule {r.describe()}") for r in self.rules]
        return out + ([(self.default_sl, "the default rule")] if self.default_sl is not None else [])

    def match(self, dst_guid: int | None, service_id: int | None = None,
              pkey: int | None = None) -> Rule | None:
        """The first rule matching a query for a path to port ``dst_guid`` that gives
        ``service_id`` / ``pkey`` (None: not in the query), or None."""
        for r in self.rules:
            if r.kind == "service-id":
                hit = service_id is not None and r.covers(service_id)
            elif r.kind == "pkey":
                hit = pkey is not None and r.covers(pkey & 0x7FFF)
            else:
                hit = dst_guid is not None and r.covers(dst_guid)
            if hit:
                return r
        return None

    def sl(self, dst_guid: int | None, service_id: int | None = None, pkey: int | None = None) -> int | None:
        """The SL the policy gives such a query: its first matching rule's, else the
        default's; None when neither says."""
        r = self.match(dst_guid, service_id, pkey)
        return r.sl if r is not None else self.default_sl

    def possible(self, dst_guid: int, pkey_applies) -> tuple[list[Rule], Rule | None]:
        """What any query for a path to ``dst_guid`` may be given: the request-dependent
        rules that may match before it (``pkey_applies(rule)``: a P_Key rule names a
        partition the pair may share), and the first rule that matches whatever the
        query holds (a target rule), or None (then the default)."""
        maybe: list[Rule] = []
        for r in self.rules:
            if r.kind == "target-port-guid":
                if r.covers(dst_guid):
                    return maybe, r
            elif r.kind == "service-id" or pkey_applies(r):
                maybe.append(r)
        return maybe, None


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[str] = []
        self.rules: list[Rule] = []
        self.default: tuple[int, int] | None = None  # (SL, line)
        self.options: dict[tuple[str, str], tuple[object, int]] = {}

    def error(self, line: int, msg: str) -> None:
        self.problems.append(f"line {line}: {msg}")

    def parse(self, text: str) -> QosPolicy:
        section = None  # (name, line) of the open section
        for no, raw in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            word = line.split()[0].lower()
            if section is not None:
                if word == f"end-{section[0]}":
                    section = None
                elif section[0] == "qos-ulps":
                    self.rule(line, no)
                continue  # an unsupported section's body was reported at its start
            if word == "qos-ulps":
                section = ("qos-ulps", no)
            elif word in SECTIONS:
                self.error(no, f"section '{word}' is not supported (smagent reads qos-ulps and the qos_* options)")
                section = (word, no)
            elif word.startswith("qos_") or word == "qos":
                self.option(line, no)
            elif word.startswith("end-"):
                self.error(no, f"'{word}' without its section")
            else:
                self.error(no, f"{line!r} is neither a qos_* option nor a section (qos-ulps ... end-qos-ulps)")
        if section is not None:
            self.error(section[1], f"section '{section[0]}' is not closed by 'end-{section[0]}'")
        if self.problems:
            raise QosPolicyError(self.source, self.problems)
        classes: dict[str, dict] = {}
        for (cls, name), (value, _line) in self.options.items():
            classes.setdefault(cls, {})[name] = value
        return QosPolicy(tuple(self.rules), None if self.default is None else self.default[0],
                         tuple((c, PortClass(**kw)) for c, kw in sorted(classes.items())), self.source)

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

    def rule(self, line: str, no: int) -> None:
        head, sep, sl_text = line.rpartition(":")
        if not sep:
            return self.error(no, f"rule {line!r} has no ': SL'")
        try:
            sl = _number(sl_text.strip())
            if not 0 <= sl <= 15:
                raise ValueError
        except ValueError:
            return self.error(no, f"SL {sl_text.strip()!r} is not 0..15")
        ulp, _c, rest = (s.strip() for s in head.partition(","))
        ulp = ulp.lower()
        if ulp == "default":
            if rest:
                return self.error(no, "'default' takes no criterion")
            if self.default is not None:
                return self.error(no, f"a second 'default' rule (first on line {self.default[1]})")
            self.default = (sl, no)
            return None
        try:
            kind, ranges = _criterion(ulp, rest)
        except ValueError as e:
            return self.error(no, str(e))
        self.rules.append(Rule(kind, ranges, sl, no, " ".join(head.split()), ulp))
        return None


def _number(text: str) -> int:
    return int(text, 0) if not re.fullmatch(r"0\d+", text) else int(text, 10)


def _ranges(text: str, what: str) -> tuple[tuple[int, int], ...]:
    """"N, N-M, ..." -> ((lo, hi), ...); ValueError naming the bad item."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        lo, dash, hi = item.partition("-")
        try:
            a = _number(lo.strip())
            b = _number(hi.strip()) if dash else a
        except ValueError:
            raise ValueError(f"{what} {item!r} is not a number or range N-M") from None
        if a > b or a < 0:
            raise ValueError(f"{what} range {item!r} is empty or negative")
        out.append((a, b))
    return tuple(out)


def _criterion(ulp: str, rest: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(kind, ranges) of a rule's "ULP[, keyword ranges]"."""
    words = rest.split(None, 1)
    key, values = (words[0].lower(), words[1] if len(words) > 1 else "") if words else ("", "")
    if key and not values:
        raise ValueError(f"'{key}' needs values")
    if ulp == "any":
        if key in KINDS:
            return key, _ranges(values, key)
        if key in ("source-port-guid", "source-target-port-guid"):
            raise ValueError(f"'any, {key}' is not supported (smagent matches by target port GUID, service ID, P_Key)")
        raise ValueError(f"'any' needs service-id, pkey or target-port-guid, got {rest!r}")
    if ulp in ("sdp", "rds", "iser"):
        base, dflt = {"sdp": (SDP_BASE, None), "rds": (RDS_BASE, RDS_PORT), "iser": (RDS_BASE, ISER_PORT)}[ulp]
        if not key:
            return "service-id", ((SDP_BASE, SDP_BASE + 0xFFFF),) if dflt is None else ((base + dflt, base + dflt),)
        if key != "port-num":
            raise ValueError(f"'{ulp}' takes port-num, got {key!r}")
        ports = _ranges(values, "port-num")
        if any(hi > 0xFFFF for _lo, hi in ports):
            raise ValueError("port-num above 65535")
        return "service-id", tuple((base + lo, base + hi) for lo, hi in ports)
    if ulp == "ipoib":
        if not key:
            return "pkey", ((DEFAULT_PKEY, DEFAULT_PKEY),)
        if key != "pkey":
            raise ValueError(f"'ipoib' takes pkey, got {key!r}")
        return "pkey", tuple((lo & 0x7FFF, hi & 0x7FFF) for lo, hi in _ranges(values, "pkey"))
    if ulp == "srp":
        if key != "target-port-guid":
            raise ValueError("'srp' needs target-port-guid")
        return "target-port-guid", _ranges(values, key)
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
        n = _number(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    lo, hi = (1, 15) if name == "max_vls" else (0, 255)
    if not lo <= n <= hi:
        raise ValueError(f"{n} is not {lo}..{hi}")
    return n


def parse(text: str, source: str = "qos policy") -> QosPolicy:
    """A QoS policy text; QosPolicyError lists every problem with its line."""
    return _Parser(source).parse(text)


def load(path) -> QosPolicy:
    """Read and parse a QoS policy file (before any SMP is sent)."""
    path, text = paths.read_config(path, QosPolicyError)
    return parse(text, path)


def ipoib_problems(policy, full_members) -> list[str]:
    """What OpenSM 3.3.23's policy parser refuses once the partitions are made: an
    ``ipoib`` rule (with its P_Keys, or bare: the default partition 0x7fff) whose
    partition does not exist or has fewer than two full members, where IPoIB cannot work.
    ``full_members(pkey)``: the number of end ports that are full members of the 15-bit
    ``pkey`` on the fabric, None where no partition has it."""
    out = []
    for r in policy.rules:
        if r.ulp != "ipoib":
            continue
        for lo, hi in r.ranges:
            bad = next(((pk, n) for pk in range(lo, hi + 1) for n in [full_members(pk)] if n is None or n < 2), None)
            if bad is not None:
                pk, n = bad
                why = "no partition has it" if n is None else f"its partition has {n} full member{'s' * (n != 1)}"
                out.append(f"line {r.line}: {r.text}: IPoIB partition {pk:#06x}: {why}; OpenSM refuses a policy "
                           f"whose IPoIB partition has fewer than two full members")
                break
    return out
