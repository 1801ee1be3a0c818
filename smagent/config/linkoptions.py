"""Link options (`LinkOptions`): OpenSM's defaults, their checks, and their parsing from a
desired state's ``links:`` mapping and OpenSM's SL2VL / VLArb text syntax."""
from __future__ import annotations

import dataclasses

from mad import codes
from mad import forwarding as fw
from smagent.errors import BadInput


DEFAULT_SUBNET_PREFIX = 0xFE80000000000000


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
    # a smagent.config.partitions.PartitionConfig: whole P_Key tables and switch enforcement
    # (smagent.linkconf.pkeys); None: the default partition at index 0 only
    partitions: object = None
    # SLs 0..n-1 must ride VLs 0..n-1 on every port (a VL-layering routing engine's layers,
    # dfsssp: set by the sweep from the routes, not an admin's option): qos "auto" also
    # rewrites tables that map one of them elsewhere
    sl_layers: int = 1
    # per-port-class tables of a QoS policy (`smagent.config.qospolicy`: OpenSM's qos_ca_*,
    # qos_swe_*, qos_sw0_*): ((class, ((field, value), ...)), ...) over the fields above
    # (sl2vl, vlarb_high, vlarb_low, vl_high_limit); `for_class` reads them
    qos_classes: tuple = ()

    def for_class(self, name: str) -> "LinkOptions":
        """These options with port class ``name``'s tables (ca: CA ports, swe: switch
        external ports, sw0: an enhanced switch port 0) in place of the common ones."""
        fields = dict(dict(self.qos_classes).get(name, ()))
        return dataclasses.replace(self, **fields) if fields else self

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
        own = (self.sl2vl, self.vlarb_high, self.vlarb_low) != (OSM_SL2VL, OSM_VLARB_HIGH, OSM_VLARB_LOW) or any(
            fields for _c, fields in self.qos_classes)
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
