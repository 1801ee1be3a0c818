"""QoS tables: the SL2VL and VLArbitration tables a port should hold (OpenSM's QoS
manager's, folded into the VLs the port runs; an enhanced switch port 0's: `_sw0_wants`), and what qos "auto" probes (`qos_units`)
and judges unusable (`_unusable`)."""
from __future__ import annotations

import dataclasses
import functools

from mad import codes
from mad import forwarding as fw
from mad.attributes import vlarb_entries
from smagent.fdb.porttables import Want
from smagent.config.linkoptions import LinkOptions
from smagent.linkconf.portinfo import CAP_SL_MAPPING, _vl_mask, enhanced_port0


def layers_problem(opts, op_vls: dict) -> str | None:
    """Why the SL2VL tables these options write would not carry SL n on VL n for every
    routing layer (`LinkOptions.sl_layers`) on every port (``op_vls``: (guid, port) ->
    OperationalVLs code), or None."""
    if opts.sl_layers <= 1:
        return None
    if opts.qos_mode == "never":
        return (f"the routing layers paths over {opts.sl_layers} VLs (SL n on VL n) but --no-qos leaves "
                f"the SL2VL tables as they are: drop --no-qos")
    for cls in ("ca", "swe"):
        for code in sorted(set(op_vls.values())):
            table = _sl2vl_table(opts.for_class(cls), code)
            off = [sl for sl in range(opts.sl_layers) if table[sl] != sl]
            if off:
                return (f"the routing layers paths over {opts.sl_layers} VLs (SL n on VL n), but the SL2VL table"
                        f"{' of ' + CLASS_NAMES[cls] if opts.qos_classes else ''} maps SL {off[0]} to "
                        f"VL{table[off[0]]} on ports running {codes.DATA_VLS.get(code, 1)} data VLs")
    return None


CLASS_NAMES = {"ca": "CA ports (qos_ca_sl2vl)", "swe": "switch ports (qos_swe_sl2vl)"}


def sl2vl_table(opts, cls: str, op_vls) -> tuple:
    """The SL2VL table a port of class ``cls`` (ca, swe) running ``op_vls`` (an
    OperationalVLs code) is given: what the planned tables map each SL to."""
    return _sl2vl_table(opts.for_class(cls), op_vls)


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
    layers: int = 1  # SLs 0..layers-1 must map to VLs 0..layers-1 (`LinkOptions.sl_layers`)

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
    opts = opts.for_class("ca")
    out = [Want("vlarb", n.guid, n.description, path, fw.vlarb_modifier(part, 0), e, port=p)
           for part, e in _vlarb_parts(opts, pi, vls).items()]
    if pi.capability_mask & CAP_SL_MAPPING:
        out.append(Want("sl2vl", n.guid, n.description, path, 0, _sl2vl_table(opts, vls), port=p))
    return out


def _switch_out_wants(n, outp, linked, vls, opts) -> list[Want]:
    """The tables of one switch output port: VLArb parts, and the SL2VL pair read as the
    representative of all (input, `outp`) pairs."""
    opts = opts.for_class("swe")
    out = [Want("vlarb", n.guid, n.description, n.path, fw.vlarb_modifier(part, outp), e)
           for part, e in _vlarb_parts(opts, n.ports[outp], vls).items()]
    if n.ports[0].capability_mask & CAP_SL_MAPPING:
        # one output port has a table per input port: (ports+1) x ports tables a switch,
        # 72k on a 648-host fat tree. They are written together (by OpenSM, by us), so
        # one is read as the representative (from the first other linked input, the
        # path data takes; else input 0): when it holds the right table the others are
        # taken to, else all are written (by one Set where the switch takes all input ports).
        rep = ([p for p in linked if p != outp] or [0])[0]
        out.append(Want("sl2vl", n.guid, n.description, n.path, fw.sl2vl_modifier(rep, outp),
                        _sl2vl_table(opts, vls), _sibling_modifiers(n.num_ports, rep, outp),
                        all_inputs=fw.sl2vl_optimized(n.switch_info)))
    return out


def _sw0_wants(n, linked, opts) -> list[Want]:
    """Enhanced port 0's tables as OpenSM's QoS manager leaves them: the (input, 0) SL2VL
    pairs from the swe class (its external-port pass takes output port 0 too on such a
    switch), then port 0's own VLArb and the pair (0, 0) from the sw0 class (its end-port
    pass, which comes after and overwrites (0, 0)). sw0 without lines of its own is the
    class-less default, not swe (OpenSM builds each class over the common qos_* options).
    Every VL is folded into the VLs port 0 runs."""
    pi, sw0 = n.ports[0], opts.for_class("sw0")
    vls = pi.operational_vls
    out = [Want("vlarb", n.guid, n.description, n.path, fw.vlarb_modifier(part, 0), e)
           for part, e in _vlarb_parts(sw0, pi, vls).items()]
    if pi.capability_mask & CAP_SL_MAPPING:
        out.append(Want("sl2vl", n.guid, n.description, n.path, fw.sl2vl_modifier(0, 0), _sl2vl_table(sw0, vls)))
        # the external inputs: one read as the representative of all, as for other outputs;
        # never one all-inputs Set, which would also overwrite (0, 0)
        rep = (linked or [1])[0]
        siblings = tuple(fw.sl2vl_modifier(i, 0) for i in range(1, n.num_ports + 1) if i != rep)
        out.append(Want("sl2vl", n.guid, n.description, n.path, fw.sl2vl_modifier(rep, 0),
                        _sl2vl_table(opts.for_class("swe"), vls), siblings))
    return out


@functools.lru_cache(maxsize=4096)
def _sibling_modifiers(num_ports: int, rep: int, outp: int) -> tuple[int, ...]:
    """The SL2VL modifiers of output port ``outp``'s pairs but the representative's, one
    tuple shared by every switch alike (2 million pairs on 11,664 hosts, a few hundred
    distinct tuples)."""
    return tuple(fw.sl2vl_modifier(i, outp) for i in range(num_ports + 1) if i != rep)


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


def nodes_of(topo, only=None):
    """The nodes of ``topo`` in its order, those of ``only`` (GUIDs) when given."""
    if only is None:
        return topo.nodes.values()
    return [n for g, n in topo.nodes.items() if g in only]


def qos_units(topo, opts: LinkOptions, op_vls: dict, only=None) -> list[QosUnit]:
    """What qos "auto" reads: one probe per CA port and per switch, not per output port.

    Why one switch port stands for all of them: a switch's SL2VL and VLArb tables are
    reset together (a switch or SMA reset resets every port; a link going down resets
    none) and an SM programs them together (OpenSM's QoS manager walks every port), so
    the ports of one switch hold the tables of the same writer. What differs between
    ports is the VLs they run, and a table fine for 8 VLs may not be for 4: the ports
    are grouped by their planned OperationalVLs, one probe per group, and a port whose
    OperationalVLs this sweep changes is judged on its own (its table was chosen for
    other VLs). CA ports each have their own tables: one probe each. ``only``: the node
    GUIDs to plan for (None: all)."""
    units = []
    for n in nodes_of(topo, only):
        if not n.is_switch:
            units += [QosUnit([_ca_qos_wants(n, p, pi, path, vls, opts)], codes.DATA_VLS.get(vls, 1),
                              f"{n.description} port {p}", opts.sl_layers)
                      for p, pi, path, vls in _ca_ports(topo, n, op_vls)]
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
                                 codes.DATA_VLS.get(vls, 1), f"{n.description} port {ports[0]}", opts.sl_layers))
        if enhanced_port0(n):  # its own unit: port 0 runs its own VLs and has its own writer's class
            # layers 1: port 0 is where packets end, never a channel of a credit loop
            units.append(QosUnit([_sw0_wants(n, linked, opts)], codes.DATA_VLS.get(n.ports[0].operational_vls, 1),
                                 f"{n.description} port 0"))
    return [u for u in units if u.ports[0]]


def _unusable(unit: QosUnit, read: list) -> str | None:
    """Why the probe's tables (``read``: [(Want, value)]) cannot carry data on every SL
    (`codes.unmapped_sls`, `codes.starved_vls`) or do not carry the routing's layer n on
    VL n (``unit.layers``), or None when they can."""
    sl2vl = next((v.sl_to_vl for w, v in read if w.kind == "sl2vl"), None)
    if sl2vl is not None:
        off = [(sl, sl2vl[sl]) for sl in range(unit.layers) if sl2vl[sl] != sl]
        if off:  # the routing's layer n must ride VL n, or its credit loops come back
            return (", ".join(f"SL {sl} -> VL{vl}" for sl, vl in off[:3]) + (" ..." if len(off) > 3 else "")
                    + f" (the routing layers SLs 0..{unit.layers - 1} on VLs 0..{unit.layers - 1})")
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
