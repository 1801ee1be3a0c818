"""The fabric model: nodes, ports, links, and the errors that guard them."""
import pytest

from smagent.model.fabric import HCA, ROUTER, SWITCH, Fabric, FabricError, Link, Node, Port


def small() -> Fabric:
    f = Fabric()
    f.add_node(name="H0", node_type=HCA, num_ports=2)
    f.add_node(name="S0", node_type=SWITCH, num_ports=8)
    f.add_node(name="S1", node_type=SWITCH, num_ports=8)
    f.connect("H0", 1, "S0", 1)
    f.connect("S0", 3, "S1", 5)
    return f


def test_node_defaults_and_validation():
    n = Node(name="H0", node_type=HCA, num_ports=1)
    assert n.description == "H0" and n.guid is None and n.caps == {}
    assert Node(name="x", node_type=HCA, num_ports=1, description="").description == ""
    with pytest.raises(FabricError, match="type 'Ca' is not one of"):
        Node(name="x", node_type="Ca", num_ports=1)
    with pytest.raises(FabricError, match="num_ports 0 out of range 1..254"):
        Node(name="x", node_type=SWITCH, num_ports=0)
    with pytest.raises(FabricError, match="num_ports 255"):
        Node(name="x", node_type=SWITCH, num_ports=255)
    with pytest.raises(FabricError, match="must not be empty"):
        Node(name="", node_type=HCA, num_ports=1)


def test_port_guid_and_lid_rules():
    sw = Node(name="S", node_type=SWITCH, num_ports=4, guid=0x200, lids={0: 7})
    assert sw.port_guid(3) == 0x200  # switch ports share port 0's GUID
    sw.port_guids[0] = 0x201
    assert sw.port_guid(1) == 0x201
    assert sw.lid() == 7 and sw.lid(3) == 7 and sw.first_port == 0
    ca = Node(name="H", node_type=HCA, num_ports=2, guid=0x100, port_guids={1: 0x101}, lids={2: 9})
    assert ca.port_guid(1) == 0x101 and ca.port_guid(2) is None
    assert ca.lid(2) == 9 and ca.lid(1) is None and ca.first_port == 1


def test_add_node_rejects_duplicates():
    f = Fabric()
    f.add_node(Node(name="A", node_type=HCA, num_ports=1, guid=0x10))
    with pytest.raises(FabricError, match="duplicate node name 'A'"):
        f.add_node(name="A", node_type=SWITCH, num_ports=4)
    with pytest.raises(FabricError, match="GUID 0x10 already belongs to node 'A'"):
        f.add_node(name="B", node_type=HCA, num_ports=1, guid=0x10)
    assert f.by_guid(0x10).name == "A"
    with pytest.raises(TypeError):
        f.add_node(Node(name="C", node_type=HCA, num_ports=1), name="C")


def test_set_guid_keeps_index():
    f = small()
    f.set_guid("S0", 0x5)
    assert f.by_guid(0x5) is f.node("S0")
    f.set_guid("S0", 0x6)
    assert f.by_guid(0x5) is None and f.by_guid(0x6).name == "S0"
    with pytest.raises(FabricError, match="already belongs"):
        f.set_guid("S1", 0x6)


def test_neighbor_is_symmetric():
    f = small()
    assert f.neighbor("H0", 1) == Port("S0", 1)
    assert f.neighbor("S0", 1) == ("H0", 1)
    assert f.neighbor(f.node("S1"), 5) == Port("S0", 3)
    assert f.neighbor("H0", 2) is None
    assert f.neighbor("nobody", 1) is None


def test_connect_rejects_bad_ports():
    f = small()
    with pytest.raises(FabricError, match=r"node 'S0' has ports 1..8; port 9 does not exist"):
        f.connect("S0", 9, "S1", 1)
    with pytest.raises(FabricError, match="port 0 does not exist"):
        f.connect("S0", 0, "S1", 1)
    with pytest.raises(FabricError, match=r'"S0"\[1\] is already connected to "H0"\[1\]'):
        f.connect("S1", 1, "S0", 1)
    with pytest.raises(FabricError, match=r'"S1"\[5\] is already connected'):
        f.connect("S1", 5, "H0", 2)
    with pytest.raises(FabricError, match="to itself"):
        f.connect("S1", 2, "S1", 2)
    with pytest.raises(FabricError, match="no node named 'X'"):
        f.connect("X", 1, "S1", 1)
    assert f.num_links == 2  # failed attempts changed nothing


def test_loopback_cable_between_two_ports_of_one_node_is_allowed():
    f = small()
    f.connect("S1", 1, "S1", 2)
    assert f.neighbor("S1", 2) == ("S1", 1)


def test_disconnect():
    f = small()
    assert f.disconnect("S0", 3) == Port("S1", 5)
    assert f.neighbor("S1", 5) is None and f.num_links == 1
    assert f.disconnect("S0", 3) is None
    f.connect("S1", 5, "H0", 2)  # the freed port can be reused


def test_queries_and_iteration_order():
    f = small()
    f.add_node(name="R0", node_type=ROUTER, num_ports=1)
    assert [n.name for n in f] == ["H0", "S0", "S1", "R0"]
    assert [n.name for n in f.switches()] == ["S0", "S1"]
    assert [n.name for n in f.cas()] == ["H0"]
    assert [n.name for n in f.routers()] == ["R0"]
    assert len(f) == 4 and "S1" in f and f.node("S1") in f and "Z" not in f
    assert f.connected_ports("S0") == [(1, Port("H0", 1)), (3, Port("S1", 5))]


def test_links_listed_once_in_order():
    f = small()
    assert list(f.links()) == [
        Link(Port("H0", 1), Port("S0", 1)),
        Link(Port("S0", 3), Port("S1", 5)),
    ]
    assert f.num_links == 2


def test_link_set_compares_across_names():
    a = small()
    b = Fabric()  # same graph, other names, other order, names in descriptions
    for name, desc, t, p in (("y", "S1", SWITCH, 8), ("x", "S0", SWITCH, 8), ("z", "H0", HCA, 2)):
        b.add_node(name=name, node_type=t, num_ports=p, description=desc)
    b.connect("y", 5, "x", 3)
    b.connect("x", 1, "z", 1)
    assert a != b
    assert a.link_set() == b.link_set(key=lambda n: n.description)
    b.disconnect("x", 1)
    b.connect("x", 2, "z", 1)
    assert a.link_set() != b.link_set(key=lambda n: n.description)


def test_equality_ignores_node_order_but_not_content():
    a = small()
    b = Fabric()
    for n in reversed(list(a)):
        b.add_node(Node(name=n.name, node_type=n.node_type, num_ports=n.num_ports))
    b.connect("S1", 5, "S0", 3)
    b.connect("S0", 1, "H0", 1)
    assert a == b
    b.node("S0").caps["linear_fdb_cap"] = 1024
    assert a != b
    del b.node("S0").caps["linear_fdb_cap"]
    b.node("H0").lids[1] = 3
    assert a != b
    b.node("H0").lids.clear()
    b.disconnect("S0", 3)
    assert a != b
    assert a != "not a fabric"


def test_large_fabric_is_linear():
    # 12,000 hosts on 36-port switches: must build without quadratic work
    f = Fabric()
    for s in range(400):
        f.add_node(name=f"S{s}", node_type=SWITCH, num_ports=36)
    for h in range(12000):
        f.add_node(name=f"H{h}", node_type=HCA, num_ports=1)
        f.connect(f"H{h}", 1, f"S{h // 30}", h % 30 + 1)
    assert f.num_links == 12000
    assert f.neighbor("S399", 30) == ("H11999", 1)
    assert sum(1 for _ in f.links()) == 12000
