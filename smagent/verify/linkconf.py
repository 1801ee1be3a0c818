"""Link checks: both ends of a link agree on MTU and VLs, degraded links (warnings), the
default partition on end ports, and every SL mapped to a data VL on every hop data takes
(`data_hops`, from the unicast routes)."""
from __future__ import annotations

from mad import codes
from mad import forwarding as fw
from smagent.verify.model import Snapshot, _Defects, _Net
from smagent.verify.unicast import DELIVERED, _check_lids_and_sources, _steps_for, _stops


def _check_links(net: _Net, D: _Defects) -> int | None:
    """The link checks, when the snapshot holds PortInfo; the number of data hops whose
    SL2VL tables were checked (None: not checked)."""
    if not net.snap.port_info:
        return None
    _check_link_params(net, D)
    _check_degraded(net, D)
    if not net.snap.tables_read:
        return None
    _check_partitions(net, D)
    return _check_sl_to_vl(net, D)


def _link_ends(snap: Snapshot):
    """Every link once, as (key, PortInfo, peer key, PortInfo), both ends read."""
    for a, b in sorted(snap.links.items()):
        if a < b and a in snap.port_info and b in snap.port_info:
            yield a, snap.port_info[a], b, snap.port_info[b]


# (defect class, field, capability field, code -> value shown, unit)
_LINK_PARAMS = (("link_mtu_mismatch", "neighbor_mtu", "mtu_cap", codes.MTUS, "MTU"),
                ("link_vl_mismatch", "operational_vls", "vl_cap", codes.DATA_VLS, "data VLs"))


def _check_link_params(net: _Net, D: _Defects) -> None:
    """Both ends of a link must run the same MTU and VLs; agreeing values below what both
    ends can do are a warning (an SM's configured cap looks the same)."""
    for a, pa, b, pb in _link_ends(net.snap):
        for cls, field, cap, shown, unit in _LINK_PARAMS:
            va, vb = getattr(pa, field), getattr(pb, field)
            x, y = shown.get(va, va), shown.get(vb, vb)
            an, bn = net.port_name(a), net.port_name(b)
            if va != vb:
                D.add(cls, {"port": an, "peer": bn, "value": x, "peer_value": y},
                      f"{an} runs {unit} {x}, its peer {bn} {y}")
                continue
            best = min(getattr(pa, cap), getattr(pb, cap))
            if va < best:
                D.add("link_below_capability", {"port": an, "peer": bn, "field": field, "value": x,
                                                "capable": shown.get(best, best)},
                      f"{an} - {bn}: {unit} {x}, both ends can run {shown.get(best, best)}")


def _check_degraded(net: _Net, D: _Defects) -> None:
    for a, pa, b, pb in _link_ends(net.snap):
        why = codes.degraded(pa, pb)
        if why:
            an, bn = net.port_name(a), net.port_name(b)
            D.add("degraded_link", {"port": an, "peer": bn, "rate": codes.rate_text(pa), "why": why},
                  f"{an} - {bn} ({codes.rate_text(pa) or 'rate unknown'}): {'; '.join(why)}")


def _check_partitions(net: _Net, D: _Defects) -> None:
    """End ports that send or receive data must hold the default partition as a full
    member (a port whose P_Key table was not read is listed as unreached)."""
    snap = net.snap
    if snap.partition_rules is not None:
        return  # partitions given: the partition check (verify.partitions) judges the tables
    for key in sorted(snap.pkeys):
        keys = snap.pkeys[key]
        if fw.PKEY_DEFAULT not in keys:
            name = net.port_name(key)
            held = [f"{k:#06x}" for k in keys if k]
            D.add("no_default_partition", {"port": name, "pkeys": held},
                  f"{name}: P_Key block 0 holds {', '.join(held) or 'no key'}, not 0xffff")


def _check_sl_to_vl(net: _Net, D: _Defects) -> int:
    """Every hop data takes maps every SL to a data VL the link runs."""
    snap = net.snap
    sw_hops, ca_hops = data_hops(snap)
    checked = 0
    for g, inp, out in sorted(sw_hops) + [(g, 0, p) for g, p in sorted(ca_hops)]:
        table = snap.sl2vl.get((g, inp, out))
        if table is None:
            continue  # not read: listed as unreached, or the port has no SL2VL table
        checked += 1
        vls = _link_vls(snap, (g, out))
        bad = [list(x) for x in codes.unmapped_sls(table, vls)]
        if bad:
            sw = g in snap.switches
            name = net.port_name((g, out))
            where = f"{snap.switches[g].name} in {inp} out {out}" if sw else name
            D.add("sl_unmapped", {"port": name, "in_port": inp if sw else None, "out_port": out,
                                  "data_vls": vls, "sls": bad},
                  f"{where}: " + ", ".join(f"SL {sl} -> VL{vl}" for sl, vl in bad)
                  + f" (the link runs {vls} data VL{'s' if vls != 1 else ''})")
    return checked


def _link_vls(snap: Snapshot, key) -> int:
    """Data VLs a link runs: the smaller OperationalVLs of its two ends."""
    ends = [snap.port_info.get(k) for k in (key, snap.links.get(key))]
    return min(codes.DATA_VLS.get(pi.operational_vls, 0) if pi is not None else 0 for pi in ends)


def data_hops(snap: Snapshot) -> tuple[set, set]:
    """Where data leaves a port on some (source, DLID) route: switch hops as (switch GUID,
    input port, output port) (input 0: the switch sends) and CA ports that send, as
    (GUID, port). Per DLID, each (switch, input port) is followed once."""
    net = _Net.of(snap)
    _check_lids_and_sources(net, _Defects(0))
    starts: dict = {}  # place -> {input port: {sources}}
    ca_hops = set()
    for place, srcs in net.sources.items():
        for src in srcs:
            inp = 0 if src[0] == "sw" else snap.links[src[1]][1]
            starts.setdefault(place, {}).setdefault(inp, set()).add(src)
            if src[0] == "ca":
                ca_hops.add(src[1])
    hops: set = set()
    for dlid in sorted(net.owner):
        own = net.owner[dlid]
        # the last hop to a CA port: out of the switch port it is linked to
        last = snap.links[own[1]] if own[0] == "ca" else None
        last = (net.idx.get(last[0]), last[1]) if last else None
        steps = _steps_for(net, dlid)
        todo = [(pl, inp) for pl, ins in starts.items() for inp, srcs in ins.items() if srcs != {own}]
        seen: set = set()
        while todo:
            place, inp = todo.pop()
            stp, i = steps[place], place >> 1
            if (place, inp) in seen:
                continue
            seen.add((place, inp))
            if stp == DELIVERED and last and last[0] == i:
                hops.add((i, inp, last[1]))
            if _stops(stp):
                continue
            hops.add((i, inp, stp[0]))
            todo.append((stp[1], net.exits[i][stp[0]][2]))
    return {(net.st[i].guid, inp, out) for i, inp, out in hops}, ca_hops
