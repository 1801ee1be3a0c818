"""Turning decoded SMPs and attributes into text (smpquery-like) and JSON-able dicts."""
from __future__ import annotations

from mad.attributes import NodeType, PortState, SMState
from mad.header import Method

_ENUMS = {
    "node_type": NodeType,
    "port_state": PortState,
    "sm_state": SMState,
}
_PHYS = {0: "NoChange", 1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
         5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}
_MTU = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
_HEX = ("guid", "m_key", "gid_prefix", "capability_mask", "sm_key", "vendor_id", "device_id",
        "revision", "diag_code")


def jsonable(value):
    """Attribute/SMP dataclass -> plain dict with the codec's names."""
    if hasattr(value, "LAYOUT"):
        return {n: jsonable(getattr(value, n)) for n in value.LAYOUT.names}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def smp_dict(smp) -> dict:
    """An SMP as JSON: header, addressing, status and the decoded attribute."""
    d = {n: jsonable(getattr(smp, n)) for n in smp.LAYOUT.names if n not in ("data", "initial_path", "return_path")}
    d["method_name"] = smp.method_name
    d["attribute_name"] = smp.attribute_name
    st = smp.status_info
    d["status_decoded"] = {"busy": st.busy, "redirect": st.redirect, "invalid_field": st.invalid_field,
                           "class_specific": st.class_specific, "text": st.describe()}
    if smp.directed:
        d["initial_path"] = list(smp.initial_path[: smp.hop_count + 1])
        d["return_path"] = list(smp.return_path[: smp.hop_count + 1])
    try:
        d["attribute"] = jsonable(smp.attribute())
    except Exception as e:  # noqa: BLE001 - an unknown attribute still prints its header
        d["attribute"] = None
        d["attribute_error"] = str(e)
        d["data"] = smp.data.hex()
    return d


def _fmt(name: str, v) -> str:
    if name in _ENUMS:
        try:
            return f"{_ENUMS[name](v).name.title().replace('_', '')} ({v})"
        except ValueError:
            return str(v)
    if name == "port_physical_state":
        return f"{_PHYS.get(v, 'Reserved')} ({v})"
    if name in ("mtu_cap", "neighbor_mtu"):
        return f"{_MTU.get(v, 'Reserved')} ({v})"
    if isinstance(v, int) and (name.endswith(_HEX) or name in _HEX):
        return f"{v:#x}"
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def attribute_text(value, indent: str = "") -> str:
    lines = []
    for n in value.LAYOUT.names:
        v = getattr(value, n)
        if isinstance(v, str):
            v = v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        lines.append(f"{indent}{n}:".ljust(44, ".") + _fmt(n, v))
    return "\n".join(lines)


def smp_text(smp) -> str:
    hdr = (f"# {smp.method_name}({smp.attribute_name}) {smp.target()} "
           f"modifier {smp.attribute_modifier:#x} tid {smp.transaction_id:#018x}")
    out = [hdr]
    st = smp.status_info
    out.append("status:".ljust(44, ".") + f"{smp.status_word:#06x} ({st.describe()})")
    if smp.directed:
        out.append("d:".ljust(44, ".") + str(smp.d))
        out.append("hop_pointer / hop_count:".ljust(44, ".") + f"{smp.hop_pointer} / {smp.hop_count}")
        out.append("dr_slid / dr_dlid:".ljust(44, ".") + f"{smp.dr_slid:#06x} / {smp.dr_dlid:#06x}")
        out.append("initial_path:".ljust(44, ".") + ",".join(map(str, smp.initial_path[: smp.hop_count + 1])))
        if smp.method == Method.GET_RESP:
            out.append("return_path:".ljust(44, ".") + ",".join(map(str, smp.return_path[: smp.hop_count + 1])))
    out.append("m_key:".ljust(44, ".") + f"{smp.m_key:#018x}")
    try:
        out.append(attribute_text(smp.attribute()))
    except Exception as e:  # noqa: BLE001
        out.append(f"(attribute not decoded: {e})")
        out.append("data:".ljust(44, ".") + smp.data.hex())
    return "\n".join(out)
