"""Partitions files over the ports of a live ibsim fabric: the ports read by a client
(`ports`), a partitions.conf for them (`conf_text`, `explicit_default_text`)."""
from __future__ import annotations
import json
import sys
import textwrap

PORTS = textwrap.dedent("""
    import json
    from smagent import discovery
    from smagent.transport.umad import UmadTransport
    topo = discovery.discover(UmadTransport())
    out = []
    for n in sorted(topo.nodes.values(), key=lambda n: n.description):
        if n.is_switch:
            out += [[n.description, list(n.path), p, "switch", n.port_guids.get(0, n.guid)]
                    for p in range(n.num_ports + 1) if p == 0 or (n.guid, p) in topo.links]
        else:
            out += [[n.description, list(n.port_paths[p]), p, "ca", n.port_guids[p]] for p in sorted(n.port_paths)]
    print(json.dumps(out))
""")


def ports(sim) -> list:
    return json.loads(sim.run([sys.executable, "-c", PORTS], timeout=300).stdout)


def conf_text(port_list) -> str:
    cas = [g for _n, _p, _port, kind, g in port_list if kind == "ca"]
    g = [f"0x{x:016x}" for x in cas]
    return (f"# three partitions and OpenSM's implicit default (ALL=limited, SELF=full)\n"
            f"storage=0x8001, ipoib, mtu=4 : ALL_CAS=limited, {g[1]}=full,\n"
            f"    {g[2]}=full ;\n"
            f"compute=0x0002 : {g[3]}, {g[4]}=full, {g[5]} ;\n"
            f"mgmt=0x0003, defmember=full : {g[6]}, {g[7]}=limited ;\n")


def explicit_default_text(port_list) -> str:
    """A rule for the default P_Key that names no ALL: OpenSM still makes every end port a
    limited member of it (it makes the default partition before it reads the file)."""
    g = [f"0x{x:016x}" for _n, _p, _port, kind, x in port_list if kind == "ca"]
    return f"Default=0x7fff : SELF=full, {g[4]}=limited ;\nx=0x10 : {g[3]}=full, {g[4]}=full ;\n"
