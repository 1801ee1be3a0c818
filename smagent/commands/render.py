"""Turning decoded SMPs and attributes into text (smpquery-like) and JSON-able dicts."""
from __future__ import annotations

from mad import codes
from mad.attributes import NodeType, SMState
from mad.header import Method

_ENUMS = {
    "node_type": NodeType,
    "sm_state": SMState,
}
# coded fields shown by name, as smpquery shows them (the number follows in brackets)
_CODED = {
    "port_state": lambda v: codes.PORT_STATES.get(v, "Reserved"),
    "port_physical_state": lambda v: codes.PHYS_STATES.get(v, "Reserved"),
    "link_down_default_state": lambda v: codes.LINK_DOWN_DEFAULT.get(v, "Reserved"),
    "mtu_cap": codes.mtu_text, "neighbor_mtu": codes.mtu_text,
    "vl_cap": codes.vls_text, "operational_vls": codes.vls_text,
    "link_width_enabled": codes.width_text, "link_width_supported": codes.width_text,
    "link_width_active": codes.width_text,
    "link_speed_enabled": codes.speed_text, "link_speed_supported": codes.speed_text,
    "link_speed_active": codes.speed_text,
    "link_speed_ext_enabled": codes.ext_speed_text, "link_speed_ext_supported": codes.ext_speed_text,
    "link_speed_ext_active": codes.ext_speed_text,
}
# keys are never shown unless asked for (smpquery prints "<not displayed>" likewise)
KEY_FIELDS = frozenset({"m_key", "sm_key"})
HIDDEN = "<not displayed>"
_HEX = ("guid", "m_key", "gid_prefix", "capability_mask", "sm_key", "vendor_id", "device_id",
        "revision", "diag_code")


def _key(name: str, v, show_keys: bool):
    return HIDDEN if name in KEY_FIELDS and not show_keys else v


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 switch', '2 switches', '0 CAs'."""
    return f"{n} {noun if n == 1 else plural or noun + ('es' if noun.endswith(('s', 'sh', 'ch')) else 's')}"


def jsonable(value, show_keys: bool = False):
    """Attribute/SMP dataclass -> plain dict with the codec's names (keys hidden unless
    `show_keys`)."""
    if hasattr(value, "LAYOUT"):
        return {n: _key(n, jsonable(getattr(value, n), show_keys), show_keys) for n in value.LAYOUT.names}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def smp_dict(smp, show_keys: bool = False) -> dict:
    """An SMP as JSON: header, addressing, status and the decoded attribute."""
    d = {n: _key(n, jsonable(getattr(smp, n)), show_keys) for n in smp.LAYOUT.names
         if n not in ("data", "initial_path", "return_path")}
    d["method_name"] = smp.method_name
    d["attribute_name"] = smp.attribute_name
    st = smp.status_info
    d["status_decoded"] = {"busy": st.busy, "redirect": st.redirect, "invalid_field": st.invalid_field,
                           "class_specific": st.class_specific, "text": st.describe()}
    if smp.directed:
        d["initial_path"] = list(smp.initial_path[: smp.hop_count + 1])
        d["return_path"] = list(smp.return_path[: smp.hop_count + 1])
    try:
        d["attribute"] = jsonable(smp.attribute(), show_keys)
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
    if name in _CODED:
        return f"{_CODED[name](v)} ({v})"
    if isinstance(v, int) and (name.endswith(_HEX) or name in _HEX):
        return f"{v:#x}"
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def _table_lines(value) -> list[str] | None:
    """The per-port tables, one readable line per entry (None for other attributes)."""
    from mad.attributes import vlarb_entries
    name = value.LAYOUT.name
    if name == "P_KeyTable":
        return [f"[{i}]:".ljust(44, ".") + f"{k:#06x} ({'full' if k & 0x8000 else 'limited'} member, "
                f"base {k & 0x7FFF:#06x})" for i, k in enumerate(value.p_keys) if k & 0x7FFF] or \
            ["(no valid P_Key in this block)"]
    if name == "SLtoVLMappingTable":
        return [f"SL{sl}:".ljust(44, ".") + (f"VL{vl}" + (" (dropped: management VL)" if vl == 15 else ""))
                for sl, vl in enumerate(value.sl_to_vl)]
    if name == "GUIDInfo":  # index 0 of block 0 is the port's own GUID; 0: no alias there
        return [f"[{i}]:".ljust(44, ".") + f"{g:#018x}" for i, g in enumerate(value.guids)]
    if name == "VLArbitrationTable":
        return [f"[{i}]:".ljust(44, ".") + f"VL{vl} weight {w}" for i, (vl, w) in enumerate(vlarb_entries(value))
                if w or vl] or ["(every entry VL0 weight 0)"]
    return None


def attribute_text(value, indent: str = "", show_keys: bool = False) -> str:
    table = _table_lines(value)
    if table is not None:
        return "\n".join(indent + x for x in table)
    lines = []
    for n in value.LAYOUT.names:
        v = getattr(value, n)
        if isinstance(v, str):
            v = v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        shown = HIDDEN if n in KEY_FIELDS and not show_keys else _fmt(n, v)
        lines.append(f"{indent}{n}:".ljust(44, ".") + shown)
    return "\n".join(lines)


def smp_text(smp, show_keys: bool = False) -> str:
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
    out.append("m_key:".ljust(44, ".") + (f"{smp.m_key:#018x}" if show_keys else HIDDEN))
    try:
        out.append(attribute_text(smp.attribute(), show_keys=show_keys))
    except Exception as e:  # noqa: BLE001
        out.append(f"(attribute not decoded: {e})")
        out.append("data:".ljust(44, ".") + smp.data.hex())
    return "\n".join(out)


def _port_dict(n, p, pi, topo) -> dict:
    peer = topo.links.get((n.guid, p))
    return {"lid": pi.lid, "lmc": pi.lmc, "port_state": pi.port_state,
            "port_physical_state": pi.port_physical_state,
            "guid": f"{n.port_guids[p]:#018x}" if p in n.port_guids else None,
            "link_width_active": pi.link_width_active, "link_width_supported": pi.link_width_supported,
            "link_speed_active": pi.link_speed_active, "link_speed_supported": pi.link_speed_supported,
            "link_speed_ext_active": pi.link_speed_ext_active,
            "link_speed_ext_supported": pi.link_speed_ext_supported,
            "rate": (codes.rate_text(pi) or None) if peer is not None else None,
            "peer": None if peer is None else {"guid": f"{peer[0]:#018x}", "port": peer[1]}}


def topology_dict(topo, degraded=()) -> dict:
    """A discovered `Topology` as JSON: nodes (IDs, ports with link width and speed),
    links, degraded links (`discovery.degraded_links`), loopbacks, what was unreachable."""
    nodes = []
    for n in topo.nodes.values():
        ni = n.node_info
        nodes.append({
            "guid": f"{n.guid:#018x}", "type": "switch" if n.is_switch else "ca", "description": n.description,
            "vendor_id": f"{ni.vendor_id:#08x}", "device_id": f"{ni.device_id:#06x}", "revision": ni.revision,
            "num_ports": n.num_ports, "path": ",".join(map(str, n.path)),
            "ports": {str(p): _port_dict(n, p, pi, topo) for p, pi in sorted(n.ports.items())},
            "switch_info": jsonable(n.switch_info) if n.switch_info else None,
        })
    return {"local": {"guid": f"{topo.local[0]:#018x}", "port": topo.local[1]}, "nodes": nodes,
            "links": topo.num_links(), "smps": topo.smps, "unreachable": topo.unreachable,
            "degraded_links": [{"a": {"guid": f"{a.guid:#018x}", "description": a.description, "port": pa},
                                "b": {"guid": f"{b.guid:#018x}", "description": b.description, "port": pb},
                                "why": why} for a, pa, b, pb, why in degraded],
            "loopbacks": [{"guid": f"{g:#018x}", "description": topo.nodes[g].description, "port": p}
                          for g, p in topo.loopbacks]}
