"""The infiniband-diags witness's own logic (tests/support/fabric_witness.py), on made-up
output: it must see a hole, a loop and a wrong delivery, or its 'all reachable' means
nothing."""
from fabric_witness import read_links, walk

# H1 (LID 1) - port 1 of A (LID 3), A port 2 - port 1 of B (LID 4), B port 2 - H2 (LID 2)
LINKS = """\
0x0000000000000011 "   H1"      1    1[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x00000000000000a0      3    1[  ] "A" ( )
0x00000000000000a0 "    A"      3    1[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x0000000000000011      1    1[  ] "H1" ( )
0x00000000000000a0 "    A"      3    2[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x00000000000000b0      4    1[  ] "B" ( )
0x00000000000000a0 "    A"      3    3[  ] ==(                Down/ Polling)==>             [  ] "" ( )
0x00000000000000b0 "    B"      4    1[  ] ==( 4X  2.5 Gbps Armed/  LinkUp)==>  0x00000000000000a0      3    2[  ] "A" ( )
0x00000000000000b0 "    B"      4    2[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x0000000000000022      2    1[  ] "H2" ( )
0x0000000000000022 "   H2"      2    1[  ] ==( 4X  2.5 Gbps Active/  LinkUp)==>  0x00000000000000b0      4    2[  ] "B" ( )
"""
LIDS = {1: (0x11, 1), 2: (0x22, 1), 3: (0xa0, 0), 4: (0xb0, 0)}


def test_read_links_keeps_cabled_ports_and_their_state():
    ports = read_links(LINKS)
    assert len(ports) == 6  # the Down port without a peer is not a cable
    assert ports[(0xb0, 1)]["state"] == "Armed" and ports[(0xa0, 2)]["peer"] == (0xb0, 1)
    assert ports[(0x22, 1)]["lid"] == 2


def test_walk_follows_tables_and_sees_holes_and_loops():
    ports = read_links(LINKS)
    good = {0xa0: {1: 1, 2: 2, 3: 0, 4: 2}, 0xb0: {1: 1, 2: 2, 3: 1, 4: 0}}
    assert all(walk(good, ports, LIDS, a, b) for a in LIDS for b in LIDS if a != b)
    hole = {0xa0: {1: 1, 3: 0, 4: 2}, 0xb0: good[0xb0]}  # A has no entry for H2
    assert not walk(hole, ports, LIDS, 1, 2) and walk(hole, ports, LIDS, 2, 1)
    loop = {0xa0: dict(good[0xa0]), 0xb0: {**good[0xb0], 2: 1}}  # B sends H2's LID back to A
    assert not walk(loop, ports, LIDS, 1, 2)
    wrong = {0xa0: {**good[0xa0], 2: 1}, 0xb0: good[0xb0]}  # A delivers H2's LID to H1
    assert not walk(wrong, ports, LIDS, 1, 2)
    uncabled = {0xa0: {**good[0xa0], 2: 3}, 0xb0: good[0xb0]}  # out of a port with no cable
    assert not walk(uncabled, ports, LIDS, 1, 2)
