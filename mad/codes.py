"""Names of the coded PortInfo fields (IBA 14.2.5.6), as infiniband-diags prints them.

One table per code; `smagent query` text, `discover`'s link rates and degraded-link
checks all read these. Pure data and small functions: no I/O.
"""
from __future__ import annotations

import enum

from mad.attributes import PortState

# LinkWidth* bits -> (smpquery's name, ibnetdiscover's rate prefix, lanes)
WIDTHS = {1: ("1X", "1x", 1), 2: ("4X", "4x", 4), 4: ("8X", "8x", 8), 8: ("12X", "12x", 12), 16: ("2X", "2x", 2)}
# LinkSpeed* bits -> (smpquery's name, rate suffix, Gb/s per lane)
SPEEDS = {1: ("2.5 Gbps", "SDR", 2.5), 2: ("5.0 Gbps", "DDR", 5.0), 4: ("10.0 Gbps", "QDR", 10.0)}
# LinkSpeedExt* bits (valid where IsExtendedSpeedsSupported): they take precedence when non-zero
EXT_SPEEDS = {1: ("14.0625 Gbps", "FDR", 14.0625), 2: ("25.78125 Gbps", "EDR", 25.78125),
              4: ("53.125 Gbps", "HDR", 53.125), 8: ("106.25 Gbps", "NDR", 106.25)}
MTUS = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
VLS = {1: "VL0", 2: "VL0-1", 3: "VL0-3", 4: "VL0-7", 5: "VL0-14"}
MTU_CODES = {v: k for k, v in MTUS.items()}  # bytes -> NeighborMTU / MTUCap code
DATA_VLS = {1: 1, 2: 2, 3: 4, 4: 8, 5: 15}  # OperationalVLs / VLCap code -> data VLs (VL0..n-1)
VL_CODES = {v: k for k, v in DATA_VLS.items()}
VL15 = 15  # the management VL: a data packet whose SL maps to it is dropped (IBA 7.6.6)
PORT_STATES = {0: "NoChange", 1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}
PHYS_STATES = {0: "NoChange", 1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
               5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}
LINK_DOWN_DEFAULT = {0: "NoChange", 1: "Sleep", 2: "Polling"}


class Mtu(enum.IntEnum):
    """NeighborMTU / MTUCap codes; ``.bytes`` the size."""
    MTU_256 = 1
    MTU_512 = 2
    MTU_1024 = 3
    MTU_2048 = 4
    MTU_4096 = 5

    @property
    def bytes(self) -> int:
        return MTUS[self]


class Vls(enum.IntEnum):
    """OperationalVLs / VLCap codes; ``.data_vls`` how many data VLs (VL0..n-1)."""
    VL0 = 1
    VL0_1 = 2
    VL0_3 = 3
    VL0_7 = 4
    VL0_14 = 5

    @property
    def data_vls(self) -> int:
        return DATA_VLS[self]


class LinkWidth(enum.IntFlag):
    """LinkWidth* bits."""
    X1 = 1
    X4 = 2
    X8 = 4
    X12 = 8
    X2 = 16


class LinkSpeed(enum.IntFlag):
    """LinkSpeed* bits (LinkSpeedExt* are `EXT_SPEEDS`)."""
    SDR = 1
    DDR = 2
    QDR = 4


# PortInfo fields whose numbers are codes, by kind: the one rule for how a value reads
FIELD_KINDS = {"neighbor_mtu": "mtu", "mtu_cap": "mtu", "operational_vls": "vls", "vl_cap": "vls",
               "port_state": "state", "port_physical_state": "phys", "link_down_default_state": "down_default",
               **{f"link_width_{k}": "width" for k in ("enabled", "supported", "active")},
               **{f"link_speed_{k}": "speed" for k in ("enabled", "supported", "active")}}
# the enum each coded field is handed out as by the API (`smagent.api`; port_state: PortState)
FIELD_ENUMS: dict[str, type[enum.IntEnum] | type[enum.IntFlag]] = {
    "neighbor_mtu": Mtu, "mtu_cap": Mtu, "operational_vls": Vls, "vl_cap": Vls, "port_state": PortState,
    **{f"link_width_{k}": LinkWidth for k in ("enabled", "supported", "active")},
    **{f"link_speed_{k}": LinkSpeed for k in ("enabled", "supported", "active")}}


def as_enum(field: str, value: int) -> int:
    """A PortInfo field's value as its enum (`FIELD_ENUMS`), an int still (``== 4`` holds);
    a reserved code stays a plain int."""
    kind = FIELD_ENUMS.get(field)
    if kind is None:
        return value
    if issubclass(kind, enum.IntFlag):
        return kind(value) if value and not value & ~sum(kind) else value
    return kind(value) if value in kind._value2member_map_ else value


def value_name(field: str, code: int) -> str | None:
    """A coded PortInfo field's value in its human unit (MTUs in bytes, VLs as the count of
    data VLs, states by name, widths, speeds); None for a plain number. Plan text and plan
    JSON (``old_name``/``new_name``) both read it."""
    kind = FIELD_KINDS.get(field)
    if kind == "mtu":
        return f"{MTUS[code]} bytes" if code in MTUS else f"undefined ({code})"
    if kind == "vls":
        return (f"{DATA_VLS[code]} VL{'s' if DATA_VLS[code] != 1 else ''}" if code in DATA_VLS
                else f"undefined ({code})")
    if kind == "state":  # as the plan has always named them (PortState), not smpquery's "Active"
        return PortState(code).name if code in PortState._value2member_map_ else f"undefined ({code})"
    if kind == "phys":
        return PHYS_STATES.get(code, f"undefined ({code})")
    if kind == "down_default":
        return LINK_DOWN_DEFAULT.get(code, f"undefined ({code})")
    if kind == "width":
        return width_text(code)
    if kind == "speed":
        return speed_text(code)
    return None


def value_text(field: str, value: int) -> str:
    """A PortInfo field's value as text: `value_name`, the GID prefix in hex, else the number."""
    if field == "gid_prefix":
        return f"{value:#018x}"
    name = value_name(field, value)
    return str(value) if name is None else name


def _bits(value: int, table: dict, undefined: str) -> str:
    names = [table[b][0] for b in sorted(table) if value & b]
    return " or ".join(names) if names else undefined


def width_text(value: int) -> str:
    """LinkWidthEnabled/Supported/Active: '1X or 4X'."""
    if value == 0xFF:
        return "Set to LinkWidthSupported value"
    return _bits(value, WIDTHS, f"undefined ({value})")


def speed_text(value: int) -> str:
    """LinkSpeedEnabled/Supported/Active: '2.5 Gbps or 5.0 Gbps'."""
    if value == 0xF:
        return "Set to LinkSpeedSupported value"
    return _bits(value, SPEEDS, f"undefined ({value})")


def ext_speed_text(value: int) -> str:
    if value == 0:
        return "No Extended Speed"
    if value == 0x1E:
        return "Set to LinkSpeedExtSupported value"
    return _bits(value, EXT_SPEEDS, f"undefined ({value})")


def mtu_text(code: int) -> str:
    return str(MTUS[code]) if code in MTUS else f"undefined ({code})"


def vls_text(code: int) -> str:
    return VLS.get(code, f"undefined ({code})")


def _highest(value: int, table: dict) -> int:
    """The bit of `value` the table rates highest (most lanes, fastest), 0 if none. Bit
    order is not rate order: 2X (bit 4) came after 12X (bit 3)."""
    return max((b for b in table if value & b), key=lambda b: table[b][2], default=0)


def active_speed(pi) -> tuple[str, float] | None:
    """(rate suffix, Gb/s per lane) a port runs at, extended speeds first; None if unknown."""
    ext = getattr(pi, "link_speed_ext_active", 0)
    if ext in EXT_SPEEDS:
        return EXT_SPEEDS[ext][1:]
    if pi.link_speed_active in SPEEDS:
        return SPEEDS[pi.link_speed_active][1:]
    return None


def rate_text(pi) -> str:
    """A port's active link as ibnetdiscover writes it ("4xQDR"); '' when not known."""
    width, speed = WIDTHS.get(pi.link_width_active), active_speed(pi)
    if width is None or speed is None:
        return ""
    return f"{width[1]}{speed[0]}"


def degraded(a, b) -> list[str]:
    """Why a link between ports `a` and `b` (PortInfo of each end) runs below what both
    ends support: active width or speed lower than the best common one. [] if not.
    As iblinkinfo's "Could be" hints, Supported counts, not Enabled: a lane or speed
    lost in training and one an admin disabled look alike, and both cost bandwidth."""
    why = []
    common_w = _highest(a.link_width_supported & b.link_width_supported, WIDTHS)
    if common_w and WIDTHS.get(a.link_width_active, ("", "", 0))[2] < WIDTHS[common_w][2]:
        why.append(f"width {WIDTHS.get(a.link_width_active, ('?',))[0]} of {WIDTHS[common_w][0]} possible")
    common_ext = _highest(getattr(a, "link_speed_ext_supported", 0) & getattr(b, "link_speed_ext_supported", 0), EXT_SPEEDS)
    best = EXT_SPEEDS[common_ext] if common_ext else SPEEDS.get(
        _highest(a.link_speed_supported & b.link_speed_supported, SPEEDS))
    now = active_speed(a)
    if best is not None and now is not None and now[1] < best[2]:
        why.append(f"speed {now[0]} of {best[1]} possible")
    return why


def unmapped_sls(sl_to_vl, data_vls: int) -> list[tuple[int, int]]:
    """(SL, VL) of the SLs an SLtoVLMappingTable sends to a VL a link with `data_vls`
    data VLs does not run (VL15, the management VL, included: data on it is dropped).
    Every SL counts, SL15 too: it is a data SL (OpenSM maps it to VL7). [] if usable.
    The one rule for both the sweep (which repairs such tables) and `verify`."""
    return [(sl, vl) for sl, vl in enumerate(sl_to_vl) if vl == VL15 or vl >= data_vls]


def starved_vls(used_vls, low, high) -> list[int]:
    """The VLs in `used_vls` that no VLArbitration entry serves: no (VL, weight > 0) in
    the low or the high table (`low`/`high`: the (VL, weight) pairs a port implements).
    A VL without weight in either table never gets to send: an all-zero table (the IBA
    reset value) starves every data VL of a port that runs more than VL0."""
    served = {vl for vl, w in list(low) + list(high) if w}
    return sorted(set(used_vls) - served)


# PathRecord/MCMemberRecord Rate codes (IBA 15.2.5.16, Table 205 and its extensions): the
# link's signalling rate in Gb/s (lanes x nominal lane rate) -> code
RATE_CODES = {2.5: 2, 10: 3, 30: 4, 5: 5, 20: 6, 40: 7, 60: 8, 80: 9, 120: 10, 14: 11, 56: 12, 112: 13, 168: 14,
              25: 15, 100: 16, 200: 17, 300: 18, 28: 19, 50: 20, 400: 21, 600: 22}
# nominal Gb/s per lane of each speed, as the rate codes count them (FDR 14, EDR 25, ...)
_NOMINAL = {"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100}


def rate_code(pi) -> int:
    """The Rate code of a port's active link (width x speed), 0 if it has none."""
    width, speed = WIDTHS.get(pi.link_width_active), active_speed(pi)
    if width is None or speed is None:
        return 0
    return RATE_CODES.get(width[2] * _NOMINAL[speed[0]], 0)


def rate_gbps(code: int) -> float:
    """Gb/s of a Rate code (0 for an unknown code): what "slower" means between codes."""
    return next((g for g, c in RATE_CODES.items() if c == code), 0.0)
