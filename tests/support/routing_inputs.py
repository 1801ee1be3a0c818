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


def mcast_trees(fabric, mlids: int = 4):
    """(switch port -> switch port beyond, masks of `mlids` groups of every host) and a
    function giving the masks with one switch gone (its trees re-rooted)."""
    from smagent.planning import multicast as mc
    sw = [n.name for n in fabric.switches()]
    ports, adj, hosts = {}, {s: [] for s in sw}, set()
    for a, b in fabric.links():
        if a.node in adj and b.node in adj:
            ports[(a.node, a.num)], ports[(b.node, b.num)] = (b.node, b.num), (a.node, a.num)
            adj[a.node].append((a.num, b.node, b.num))
            adj[b.node].append((b.num, a.node, a.num))
        else:
            hosts.add(a.node if a.node in adj else b.node)

    def masks(adjacency):
        members = hosts & set(adjacency)  # a drained switch's own hosts leave the groups
        root = mc.choose_root(adjacency, members)
        tree = mc.spanning_tree(adjacency, root, members)
        return root, {s: {0xC000 + g: sum(1 << p for p in tree.get(s, ())) for g in range(mlids)} for s in sw}

    def without(gone):
        return masks({s: sorted(e for e in v if e[1] != gone) for s, v in adj.items() if s != gone})[1]
    return ports, masks({s: sorted(v) for s, v in adj.items()}), without
