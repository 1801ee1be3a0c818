"""Fabrics more than one test file builds: the seed's RFT chassis (the in-process
simulator models RFT switches; ibsim has none) and a 36-port switch with multicast
members beyond PortMask position 0."""
from smagent.model.fabric import HCA, SWITCH, Fabric

RFT_CAPS = {"linear_fdb_cap": 0, "random_fdb_cap": 32, "lids_per_port": 1}


def chassis_fabric(with_caps=True) -> Fabric:
    """The seed's chassis (Figure 25-29): switch C with TCAs T1..T6 on ports 1-6 and one
    port (8) to the fabric, here switch F with hosts H1 (the SM) and H2. Both RFT-only."""
    f = Fabric()
    f.add_node(name="H1", node_type=HCA, num_ports=1)
    f.add_node(name="C", node_type=SWITCH, num_ports=8)
    f.add_node(name="F", node_type=SWITCH, num_ports=8)
    for i in range(1, 7):
        f.add_node(name=f"T{i}", node_type=HCA, num_ports=1)
        f.connect(f"T{i}", 1, "C", i)
    f.add_node(name="H2", node_type=HCA, num_ports=1)
    f.connect("C", 8, "F", 1)
    f.connect("H1", 1, "F", 2)
    f.connect("H2", 1, "F", 3)
    if with_caps:
        f.node("C").caps.update(RFT_CAPS)
        f.node("F").caps.update(RFT_CAPS, random_fdb_cap=20)
    return f


def big_switch_fabric() -> Fabric:
    """Big: 36 ports, hosts on 1, 17, 20, 35, port 36 to Small (8 ports, hosts on 2, 3).
    H1 comes first, so ibsim puts the SM (us) on it."""
    f = Fabric()
    for name in ("H1", "H17", "H20", "H35", "G2", "G3"):
        f.add_node(name=name, node_type=HCA, num_ports=1)
    f.add_node(name="Big", node_type=SWITCH, num_ports=36)
    f.add_node(name="Small", node_type=SWITCH, num_ports=8)
    for p in (1, 17, 20, 35):
        f.connect(f"H{p}", 1, "Big", p)
    f.connect("G2", 1, "Small", 2)
    f.connect("G3", 1, "Small", 3)
    f.connect("Big", 36, "Small", 1)
    return f
