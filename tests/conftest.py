import json
import pathlib

import pytest

VECTORS = pathlib.Path(__file__).parent / "vectors"


@pytest.fixture(scope="session")
def vectors():
    """Every golden vector, by name."""
    out = {}
    for f in sorted(VECTORS.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            v = json.loads(line)
            out[v["name"]] = v
    return out


def _fat_tree_2_dual_damaged(cuts=((1, 0), (4, 0), (6, 2))):
    """fat_tree_2(8)'s switches (8 leaves, 4 spines) with 16 dual-port hosts, host port 1
    on an even leaf and port 2 on the next (odd) leaf, and the leaf-spine cables ``cuts``
    ((leaf, spine), ...) missing: by default S0 lost L1 and L4, S2 lost L6."""
    from smagent.fabric import Fabric
    f = Fabric()
    for h in range(16):
        f.add_node(name=f"H{h}", node_type="Hca", num_ports=2)
    for i in range(8):
        f.add_node(name=f"L{i}", node_type="Switch", num_ports=8)
    for i in range(4):
        f.add_node(name=f"S{i}", node_type="Switch", num_ports=8)
    for h in range(16):
        pair, i = divmod(h, 4)
        f.connect(f"H{h}", 1, f"L{2 * pair}", i + 1)
        f.connect(f"H{h}", 2, f"L{2 * pair + 1}", i + 1)
    for leaf in range(8):
        for s in range(4):
            if (leaf, s) not in cuts:
                f.connect(f"L{leaf}", 5 + s, f"S{s}", leaf + 1)
    return f


def _fat_tree_3_without(k=4, victim="A1"):
    """topogen.fat_tree_3(k) with the switch ``victim`` (an aggregation switch) gone."""
    from smagent import topogen
    from smagent.fabric import Fabric
    full, f = topogen.fat_tree_3(k), Fabric()
    for n in full:
        if n.name != victim:
            f.add_node(name=n.name, node_type=n.node_type, num_ports=n.num_ports)
    for a, b in full.links():
        if victim not in (a.node, b.node):
            f.connect(a.node, a.num, b.node, b.num)
    return f


@pytest.fixture(scope="session")
def irregular_fabrics():
    """Builders of fabrics where updn's roots must be chosen with care (issue 11 item 8):
    {name: (builder, the GUID-free names of the roots expected)}."""
    return {
        "ft2_dual_damaged": (_fat_tree_2_dual_damaged, {"S1", "S3"}),
        "ft2_every_spine_damaged": (lambda: _fat_tree_2_dual_damaged(((1, 0), (3, 1), (5, 2), (7, 3))), None),
        "ft3_without_agg": (_fat_tree_3_without, {"S0", "S1"}),  # A1 fed cores S2, S3
        "ft3_8_without_agg": (lambda: _fat_tree_3_without(8, "A5"), None),
    }
