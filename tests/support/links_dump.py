"""Every port's PortInfo, SL2VL tables (each input / output pair of a switch, an enhanced
port 0 as output too), VLArb parts (an enhanced port 0's too) and
P_Key block 0, read by directed route from a live fabric (ibsim): what the link-parity tests
compare between smagent and OpenSM (tests/live/test_links_live.py, tests/live/test_qospolicy_live.py)."""
from __future__ import annotations

import json
import sys
import textwrap

# reads every port of the fabric by directed route and prints one JSON object
DUMP = textwrap.dedent("""
    import json
    from mad import forwarding as fw, smp
    from mad.attributes import AttrID, vlarb_entries
    from mad.header import Method
    from smagent import discovery
    from smagent.transport.base import Request
    from smagent.transport.umad import UmadTransport

    t = UmadTransport()
    topo = discovery.discover(t)
    reqs, keys = [], []
    def ask(key, attr, path, mod):
        keys.append(key)
        reqs.append(Request(smp.dr(Method.GET, attr, path, mod)))
    out = {}
    for n in topo.nodes.values():
        for p in sorted(n.ports):
            if p == 0 and not n.is_switch:
                continue
            name = f"{n.description}:{p}"
            out[name] = {k: v for k, v in n.ports[p].to_dict().items() if k not in ("lid", "master_sm_lid")}
            path = n.path_to_port(p)
            # an enhanced switch port 0 has SL2VL (as an output port) and VLArb tables too
            ep0 = n.is_switch and p == 0 and bool(n.switch_info.enhanced_port0)
            if n.is_switch:
                for i in range(n.num_ports + 1):
                    if p or ep0:
                        ask((name, f"sl2vl in {i}"), AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(i, p))
            else:
                ask((name, "sl2vl"), AttrID.SL_TO_VL_MAPPING_TABLE, path, 0)
            if not n.is_switch or p == 0:
                ask((name, "pkeys"), AttrID.P_KEY_TABLE, path, fw.pkey_modifier(0, 0))
            if p or ep0:
                for part in (1, 3):
                    ask((name, f"vlarb {part}"), AttrID.VL_ARBITRATION_TABLE, path,
                        fw.vlarb_modifier(part, p if n.is_switch else 0))
    for (name, what), rep in zip(keys, t.execute(reqs)):
        if not rep.ok:
            out[name][what] = str(rep.error)
            continue
        v = rep.value()
        out[name][what] = (list(v.sl_to_vl) if what.startswith("sl2vl") else list(v.p_keys)
                           if what == "pkeys" else vlarb_entries(v))
    print(json.dumps(out))
""")


def dump(sim) -> dict:
    return json.loads(sim.run([sys.executable, "-c", DUMP], timeout=300).stdout)
