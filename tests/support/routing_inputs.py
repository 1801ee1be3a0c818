"""Routing inputs the engine tests share: a fabric with ibsim's GUIDs and aligned LIDs
(`prepared`), its `RoutingInput` (`rin_of`), and damaged fat trees."""
from smagent.model import netfile, topogen
from smagent.routing import RoutingInput


def prepared(fabric, lmc=0):
    """GUIDs as ibsim numbers them; LIDs: switches 1.., then CA ports (aligned)."""
    netfile.assign_ibsim_guids(fabric)
    lid = 1
    for n in fabric.switches():
        n.lids[0] = lid
        lid += 1
    size = 1 << lmc
    for n in fabric.cas():
        for p, _peer in fabric.connected_ports(n):
            lid = -(-lid // size) * size
            n.lids[p] = lid
            if lmc:
                n.lmcs[p] = lmc
            lid += size
    return fabric


def rin_of(fabric, lmc=0):
    return RoutingInput.from_fabric(prepared(fabric, lmc), lmc)


def damaged_ft2():
    """fat_tree_2(8) with two leaf-spine links gone, two hosts replaced by a dual-port host
    on two leaves, and one more dual-port host on one leaf's two freed host ports."""
    f = topogen.fat_tree_2(8)
    return topogen.variant(f, drop_nodes={"H1", "H5", "H9", "H10"},
                   drop_links=[(("L0", 5), ("S0", 1)), (("L3", 8), ("S3", 4))],
                   dual=[("D0", ("L0", 2), ("L1", 2)), ("D1", ("L2", 2), ("L2", 3))])


def damaged_ft3():
    """fat_tree_3(8, hosts=100) without a core switch, an aggregation switch and a link."""
    f = topogen.fat_tree_3(8, hosts=100)
    return topogen.variant(f, drop_nodes={"S5", "A6"}, drop_links=[(("L0", 5), ("A0", 1))])
