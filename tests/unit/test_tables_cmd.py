"""Unit tests of the table commands (smagent lft / mft): the ibroute formats, the dump parser
(with line numbers), plans, and the commands end to end against a tiny fake SMA."""
import json

import pytest

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import (
    AttrID, LinearForwardingTable, MulticastForwardingTable, NodeDescription, NodeInfo, NodeType, PortInfo,
    SwitchInfo,
)
from mad.header import Method
from smagent import api
from smagent.fdb import lft as linear, switch
from smagent.model import lftdump as fdbtext  # the formats and plans (the click commands run below via the CLI)
from smagent.fdb import mft as mfttab
from smagent.transport.base import UMAD_STATUS_TIMEOUT, Transport

SW_GUID = 0x0000000000200000
CA_GUID = 0x0000000000100000


# -- formats -----------------------------------------------------------------------------
def test_format_lft_like_ibroute_n():
    table = bytearray([255]) * 64
    table[1], table[2], table[5], table[6] = 1, 0, 5, 3
    table[4] = 33  # beyond an 8-port switch: invalid, ibroute hides it
    out = fdbtext.format_lft("Lid 2", SW_GUID, "Switch1", 6, table, 8)
    assert out == [
        "Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0000000000200000 (Switch1):",
        "  Lid  Out   Destination",
        "       Port     Info ",
        "0x0001 001 ", "0x0002 000 ", "0x0005 005 ", "0x0006 003 ",
        "4 valid lids dumped ",
    ]
    every = fdbtext.format_lft("Lid 2", SW_GUID, "Switch1", 6, table, 8, dump_all=True)
    assert "0x0004 033 " in every and every[-1] == "7 lids dumped "


def test_format_lft_shows_lid_top_when_top_is_a_multiple_of_64():
    # ibroute 44 never reads the block holding LID `top` when top % 64 == 0; we do
    table = bytearray([255]) * 128
    table[1], table[64] = 1, 2
    out = fdbtext.format_lft("Lid 2", SW_GUID, "S", 64, table, 8)
    assert out[0].startswith("Unicast lids [0x0-0x40] ")
    assert "0x0040 002 " in out and out[-1] == "2 valid lids dumped "


def test_dest_resolver_like_dump_fts():
    idx = {1: fdbtext.PortRef(NodeType.CA, 0x100001, "Hca1", 1, 0),
           2: fdbtext.PortRef(NodeType.SWITCH, 0x200000, "Switch1", 2, 0)}
    for lid in (8, 9, 10, 11):
        idx[lid] = fdbtext.PortRef(NodeType.CA, 0x100004, "Hca2", 8, 2)
    d = fdbtext.DestResolver(idx)
    assert d(0, False) == ": (path #0 - illegal port)"  # dump_fts's own quirk for LID 0
    assert d(1, True) == ": (Channel Adapter portguid 0x0000000000100001: 'Hca1')"
    assert d(2, True) == ": (Switch portguid 0x0000000000200000: 'Switch1')"
    assert d(3, True) == ": (node info not available fabric scan)"
    assert d(4, False) == ": (illegal port)"
    assert d(8, True) == ": (Channel Adapter portguid 0x0000000000100004: 'Hca2')"
    assert d(9, True) == ": (path #2 out of 4: portguid 0x0000000000100004)"
    assert d(11, True) == ": (path #4 out of 4: portguid 0x0000000000100004)"
    assert d(10, False) == ": (path #2 - illegal port)"


# ibroute -M -n 2 on ibsim, 36-port switch (vectors/capture/36port/transcripts/post_lid_mft.txt)
IBROUTE_MFT_36 = """\
Multicast mlids [0xc000-0xc3ff] of switch Lid 2 guid 0x0000000000200000 (S36):
 MLid       Port Mask
0xc000      0002001e000a
0xc001      00000002000a
2 valid mlids dumped """


def test_format_mft_like_ibroute_m_n():
    masks = {(b, p): [0] * 32 for b in range(32) for p in range(3)}
    masks[(0, 0)][0], masks[(0, 1)][0], masks[(0, 2)][0] = 0x0002, 0x001E, 0x000A
    masks[(0, 1)][1], masks[(0, 2)][1] = 0x0002, 0x000A
    first, last = mfttab.mft_range(1024, 0)
    out = fdbtext.format_mft("Lid 2", SW_GUID, "S36", first, last, masks, 3)
    assert "\n".join(out) == IBROUTE_MFT_36
    assert mfttab.mft_ports(masks, 0xC000, 3) == [1, 17, 18, 19, 20, 33, 35]


def test_mft_range_and_blocks():
    assert mfttab.mft_range(1024, 0) == (0xC000, 0xC3FF)
    assert mfttab.mft_range(1024, 0xC010) == (0xC000, 0xC010)
    assert mfttab.mft_blocks_to_read(1024, 0) == list(range(32))
    assert mfttab.mft_blocks_to_read(1024, 0xC020) == [0, 1]
    assert mfttab.mft_blocks_to_read(0, 0) == []


def test_port_masks_positions():
    assert fw.ports_masks([1, 17, 20, 35], 3) == [0x0002, 0x0012, 0x0008]
    assert fw.ports_masks([], 1) == [0]


# -- the dump format -------------------------------------------------------------------------
DUMP = """\
Unicast lids [0x0-0x6] of switch DR path slid 0; dlid 0; 0,1 guid 0x0000000000200000 (Switch1):
  Lid  Out   Destination
       Port     Info 
0x0000 255 : (path #0 - illegal port)
0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
0x0002 000 : (Switch portguid 0x0000000000200000: 'Switch1')
0x0005 005 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')
4 valid lids dumped 
# a comment
Unicast lids [0x0-0x3] of switch Lid 4 guid 0x0000000000200001 (Switch2):
0x0001 003 
0x0003 003
2 valid lids dumped 

*** WARNING ***: this command has been replaced by dump_fts
"""


def test_parse_dump():
    s1, s2 = fdbtext.parse_lft_dump(DUMP)
    assert (s1.guid, s1.line, s1.top, s1.description) == (SW_GUID, 1, 6, "Switch1")
    assert s1.entries == {0: (255, 4), 1: (1, 5), 2: (0, 6), 5: (5, 7)}
    assert s1.max_routed_lid() == 5
    assert (s2.guid, s2.top, s2.entries) == (0x200001, 3, {1: (3, 11), 3: (3, 12)})


def test_parse_dump_lists_every_problem_with_its_line():
    text = "\n".join([
        "0x0001 001",                                              # 1: before any header
        "Unicast lids [0x0-0x6] of switch Lid 2 guid 0xZZ (x):",  # 2: bad guid
        "Unicast lids [0x0-0x6] of switch Lid 2 guid 0x20 (x):",  # 3
        "0x0001 one",                                              # 4: bad port
        "0xc000 001",                                              # 5: multicast LID
        "0x0002 256",                                              # 6: port out of range
        "0x0003 001",                                              # 7
        "0x0003 002",                                              # 8: conflicts with 7
        "hello",                                                   # 9: not a dump line
        "Unicast lids [0x0-0x6] of switch Lid 3 guid 0x20 (y):",  # 10: duplicate switch
        "Multicast mlids [0xc000-0xc3ff] of switch Lid 2 guid 0x20 (x):",  # 11
    ])
    with pytest.raises(fdbtext.DumpError) as ei:
        fdbtext.parse_lft_dump(text, "f.txt")
    p = ei.value.problems
    # line 3's section has no "lids dumped" trailer: reported when the next header closes it
    assert [x.split(":")[1] for x in p] == ["1", "2", "4", "5", "6", "8", "9", "3", "10", "11"], p
    assert "outside a switch section" in p[0] and "GUID" in p[1] and "0xc000" in p[3]
    assert "line 7" in p[5] and "has no 'N valid lids dumped'" in p[7] and "appears again (first at line 3)" in p[8]


def test_parse_dump_empty_is_an_error():
    with pytest.raises(fdbtext.DumpError, match="no 'Unicast lids"):
        fdbtext.parse_lft_dump("# nothing\n\n")


def _si(**kw):
    base = dict(linear_fdb_cap=0xC000, multicast_fdb_cap=1024, linear_fdb_top=6, life_time_value=18,
                port_state_change=1)
    base.update(kw)
    return SwitchInfo(**base)


def _facts(**kw):
    return {SW_GUID: switch.SwitchFacts(SW_GUID, "Switch1", 8, _si(**kw), path=(0, 1))}


def test_validate_sections():
    text = ("Unicast lids [0x0-0x6] of switch guid 0x0000000000200000 (Switch1):\n"
            "0x0001 009\n0x0002 255\n0x0100 001\n3 valid lids dumped\n"
            "Unicast lids [0x0-0x6] of switch guid 0x0000000000100000 (Hca1):\n0x0001 001\n1 valid lids dumped\n"
            "Unicast lids [0x0-0x6] of switch guid 0x00000000deadbeef (Gone):\n0x0001 001\n1 valid lids dumped\n")
    secs = fdbtext.parse_lft_dump(text, "f")
    facts = _facts(linear_fdb_cap=0x100)
    p = linear.validate_sections(secs, facts, "f", {CA_GUID: "Hca1"})
    assert len(p) == 4, p
    assert p[0].startswith("f:2: port 9 does not exist on Switch1: ports 0..8")
    assert p[1].startswith("f:4: LID 0x100 (256) is beyond Switch1's LinearFDBCap 256")
    assert p[2] == "f:6: switch GUID 0x0000000000100000 (Hca1) is 'Hca1', not a switch"
    assert "0x00000000deadbeef (Gone) is not a switch in this fabric" in p[3]


def _current(ports: dict, blocks=1):
    t = bytearray([255]) * (64 * blocks)
    for lid, port in ports.items():
        t[lid] = port
    return {(SW_GUID, b): bytes(t[b * 64:(b + 1) * 64]) for b in range(blocks)}


def test_plan_load_one_edit_is_one_change():
    facts = _facts()
    cur = _current({1: 1, 2: 0, 5: 5})
    secs = fdbtext.parse_lft_dump("Unicast lids [0x0-0x6] of switch guid 0x200000 (S):\n0x0001 001\n0x0002 000\n0x0005 003\n3 valid lids dumped\n")
    assert linear.load_blocks_to_read(secs, facts) == [(SW_GUID, (0, 1), 0)]
    changes, tops = linear.plan_load(secs, facts, cur)
    assert tops == []
    assert linear.lft_plan_lines(changes, tops) == ["Switch1 LFT block 0: lid 5: 5 -> 3"]
    # the same table again: nothing to do
    same = fdbtext.parse_lft_dump("Unicast lids [0x0-0x6] of switch guid 0x200000 (S):\n0x0001 001\n0x0002 000\n0x0005 005\n3 valid lids dumped\n")
    assert linear.plan_load(same, facts, cur) == ([], [])


def test_plan_load_replaces_the_whole_table_and_raises_top():
    facts = _facts()
    cur = _current({1: 1, 2: 0, 5: 5}, blocks=2)
    secs = fdbtext.parse_lft_dump("Unicast lids [0x0-0x6] of switch guid 0x200000 (S):\n0x0001 001\n0x0002 000\n0x0041 002\n3 valid lids dumped\n")
    changes, tops = linear.plan_load(secs, facts, cur)
    lines = linear.lft_plan_lines(changes, tops)
    assert lines == ["Switch1 SwitchInfo: linear_fdb_top 6 -> 65",
                     "Switch1 LFT block 0: lid 5: 5 -> 255",  # not in the file: forwards nowhere
                     "Switch1 LFT block 1: lid 65: 255 -> 2"]
    new = tops[0].new
    assert (new.linear_fdb_top, new.port_state_change, new.life_time_value) == (65, 0, 18)


def test_plan_load_keeps_entries_above_span():
    facts = _facts(linear_fdb_top=3)
    cur = _current({1: 1, 2: 0, 3: 1, 10: 4})  # LID 10 lies above top and the dump's range
    secs = fdbtext.parse_lft_dump("Unicast lids [0x0-0x3] of switch guid 0x200000 (S):\n0x0001 001\n0x0002 000\n0x0003 002\n3 valid lids dumped\n")
    changes, _ = linear.plan_load(secs, facts, cur)
    assert [c for ch in changes for c in ch.changed_lids()] == [(3, 1, 2)]


def test_plan_mft_set_writes_only_changing_positions():
    f = switch.SwitchFacts(SW_GUID, "S36", 36, _si(), path=(0, 1))
    cur = {(0, p): [0] * 32 for p in range(3)}
    ch = mfttab.plan_mft_set(f, 0xC005, [1, 17, 20, 35], cur)
    assert [(c.block, c.position, c.new[5]) for c in ch] == [(0, 0, 0x0002), (0, 1, 0x0012), (0, 2, 0x0008)]
    assert ch[1].lines() == ["S36 MFT block 0 position 1: mlid 0xc005: ports {} -> {17,20}"]  # as the sweep's plan
    cur2 = {(0, 0): [0] * 32, (0, 1): [0] * 32, (0, 2): [0] * 32}
    cur2[(0, 0)][5] = 0x0002
    assert [c.position for c in mfttab.plan_mft_set(f, 0xC005, [1, 3], cur2)] == [0]  # 1, 2: zero, stay zero
    assert mfttab.check_mft_entry(f, 0xC400, [37]) == [
        "MLID 0xc400 is beyond S36's MulticastFDBCap 1024 (MLIDs 0xc000..0xc3ff)",
        "port 37 does not exist on S36: ports 0..36"]


# -- the commands, against a fake SMA ------------------------------------------------------
class FakeFabric(Transport):
    """A CA (path 0, LID 1) cabled port 1 <-> port 1 of an 8-port switch (path 0,1, LID 2).
    Answers Gets and Sets of the attributes the table commands use; records every Set."""

    name = "fake"

    def __init__(self, num_ports=8):
        super().__init__(timeout_ms=5, retries=0)
        self.inbox = []
        self.sets = []
        self.num_ports = num_ports
        self.swinfo = _si(linear_fdb_cap=0xC000, linear_fdb_top=6, port_state_change=0)
        self.lft = bytearray([255]) * (64 * 768)
        for lid, port in {1: 1, 2: 0, 5: 1, 6: 1}.items():
            self.lft[lid] = port
        self.mft = {}

    def _node(self, smp, dlid):
        if smp.directed:
            path = tuple(smp.initial_path[:smp.hop_count + 1])
            return {(0,): "ca", (0, 1): "sw"}.get(path)
        return {1: "ca", 2: "sw"}.get(dlid)

    def _send(self, raw, dlid):
        req = smpcodec.decode(raw)
        node = self._node(req, dlid)
        value, status = self._answer(node, req)
        if value is None and status is None:
            self.inbox.append((raw, UMAD_STATUS_TIMEOUT))
            return
        resp = smpcodec.response_to(req, status=status or 0, value=value)
        self.inbox.append((smpcodec.encode(resp), 0))

    def _recv(self, timeout_s):
        out, self.inbox = self.inbox, []
        return out

    def _answer(self, node, req):
        a, mod, is_set = req.attribute_id, req.attribute_modifier, req.method == Method.SET
        if node is None:
            return None, None
        if is_set:
            self.sets.append((a, mod))
        sw = node == "sw"
        if a == AttrID.NODE_INFO:
            return NodeInfo(base_version=1, class_version=1, node_type=NodeType.SWITCH if sw else NodeType.CA,
                                num_ports=self.num_ports if sw else 1, node_guid=SW_GUID if sw else CA_GUID,
                                port_guid=SW_GUID if sw else CA_GUID + 1, local_port_num=1), None
        if a == AttrID.NODE_DESCRIPTION:
            return NodeDescription(node_string="Switch1" if sw else "Hca1"), None
        if a == AttrID.PORT_INFO:
            port = mod & 0xFF
            up = port in (0, 1) if sw else port == 1
            return PortInfo(lid=(2 if sw else 1) if port in (0, 1) else 0, master_sm_lid=1,
                                port_state=4 if up else 1, port_physical_state=5 if up else 2,
                                local_port_num=port), None
        if not sw:
            return None, 0x000C
        if a == AttrID.SWITCH_INFO:
            if is_set:
                self.swinfo = SwitchInfo.LAYOUT.replace(req.attribute(), port_state_change=0)
            return self.swinfo, None
        if a == AttrID.LINEAR_FORWARDING_TABLE:
            if mod >= 768:
                return None, 0x001C
            if is_set:
                self.lft[mod * 64:(mod + 1) * 64] = bytes(req.attribute().ports)
            return LinearForwardingTable(ports=list(self.lft[mod * 64:(mod + 1) * 64])), None
        if a == AttrID.MULTICAST_FORWARDING_TABLE:
            block, pos = fw.mft_from_modifier(mod)
            if is_set:
                self.mft[(block, pos)] = list(req.attribute().port_masks)
            return MulticastForwardingTable(port_masks=list(self.mft.get((block, pos), [0] * 32))), None
        return None, None  # SMInfo etc.: nobody home


@pytest.fixture
def fake(monkeypatch):
    f = FakeFabric()
    s = api.Session(f)
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: s)  # the CLI over the fake, through the API
    return f


def test_cli_lft_show(cli, fake):
    r = cli("lft", "show", "-n", "2")  # ibroute -n: no destinations, no discovery
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0000000000200000 (Switch1):",
        "  Lid  Out   Destination", "       Port     Info ",
        "0x0001 001 ", "0x0002 000 ", "0x0005 001 ", "0x0006 001 ", "4 valid lids dumped "]
    r = cli("lft", "show", "0,1", "--json", "-n")
    doc = json.loads(r.output)
    assert doc["linear_fdb_top"] == 6 and doc["routes"][0] == {"lid": 1, "port": 1}
    assert fake.sets == []


def test_cli_lft_show_names_the_destinations_as_ibroute_does(cli, fake):
    """Without -n the Destination column names the port holding each LID, in ibroute's
    words (tests/live/test_tables_cmd_live.py compares with ibroute itself)."""
    r = cli("lft", "show", "2")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[3] == "0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')"
    assert lines[4] == "0x0002 000 : (Switch portguid 0x0000000000200000: 'Switch1')"
    doc = json.loads(cli("lft", "show", "Switch1", "--json").output)
    assert doc["routes"][0] == {"lid": 1, "port": 1, "destination": {
        "node_type": "Channel Adapter", "port_guid": "0x0000000000100001", "description": "Hca1",
        "base_lid": 1, "lmc": 0}}
    assert fake.sets == []


def test_cli_lft_show_not_a_switch(cli, fake):
    r = cli("lft", "show", "0")
    assert r.exit_code == 2 and "not a switch" in r.output


def test_cli_lft_set_dry_run_then_apply(cli, fake):
    r = cli("lft", "set", "0,1", "5", "0", "--dry-run")
    assert r.exit_code == 0 and r.output.strip() == "Switch1 LFT block 0: lid 5: 1 -> 0"
    assert fake.sets == []
    r = cli("lft", "set", "0,1", "5", "3", "--json")  # port 3 has no cable: refused (issue 39 item 3)
    assert r.exit_code == 4 and r.json()["defects"]["black_hole"]["count"] == 1 and fake.sets == []
    r = cli("lft", "set", "0,1", "5", "3", "--json", "--allow-defects")
    assert r.exit_code == 1  # written, and the hole it leaves is reported
    doc = r.json()
    assert doc["plan_defects"]["black_hole"]["examples"] == [
        {"switch": "Switch1", "lid": 5, "port": 3, "cause": "unlinked_port"}]
    assert doc["sets"] == {"switchinfo": 0, "lft_blocks": 1} and doc["problems"] == []
    assert fake.lft[5] == 3 and fake.sets == [(AttrID.LINEAR_FORWARDING_TABLE, 0)]
    r = cli("lft", "set", "2", "5", "3")
    assert r.output.strip() == "# nothing to change" and len(fake.sets) == 1


def test_cli_lft_set_raises_top(cli, fake):
    r = cli("lft", "set", "2", "0x80", "1")
    assert r.exit_code == 0, r.output
    assert fake.swinfo.linear_fdb_top == 0x80 and fake.lft[0x80] == 1
    assert fake.sets == [(AttrID.SWITCH_INFO, 0), (AttrID.LINEAR_FORWARDING_TABLE, 2)]
    assert "0x0080 001 " in cli("lft", "show", "2").output


@pytest.mark.parametrize("lid, port, needle", [
    ("0xc000", "1", "not a unicast LID"),
    ("0", "1", "not a unicast LID"),
    ("5", "9", "port 9 does not exist on Switch1: ports 0..8"),
    ("5", "256", "not a port"),
])
def test_cli_lft_set_bad_input(cli, fake, lid, port, needle):
    r = cli("lft", "set", "2", lid, port)
    assert r.exit_code == 2 and needle in r.output, r.output
    assert fake.sets == []


def test_cli_lft_set_beyond_cap(cli, fake):
    fake.swinfo = SwitchInfo.LAYOUT.replace(fake.swinfo, linear_fdb_cap=64)
    r = cli("lft", "set", "2", "64", "1")
    assert r.exit_code == 2 and "LinearFDBCap 64" in r.output and fake.sets == []


def test_cli_dump_then_load(cli, fake, tmp_path):
    f = tmp_path / "lfts"
    r = cli("lft", "dump", "-o", str(f))
    assert r.exit_code == 0, r.output
    text = f.read_text()
    assert "0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')" in text
    assert "0x0002 000 : (Switch portguid 0x0000000000200000: 'Switch1')" in text
    assert cli("lft", "load", str(f)).output.strip() == "# nothing to change"
    f.write_text(text.replace("0x0005 001 ", "0x0005 000 "))
    r = cli("lft", "load", str(f), "--dry-run")
    assert r.output.strip() == "Switch1 LFT block 0: lid 5: 1 -> 0" and fake.sets == []
    r = cli("lft", "load", str(f), "--json")
    assert json.loads(r.output)["sets"] == {"switchinfo": 0, "lft_blocks": 1} and fake.lft[5] == 0
    assert json.loads(cli("lft", "load", str(f), "--json").output)["sets"] == {"switchinfo": 0, "lft_blocks": 0}


def test_cli_truncated_dump_is_refused(cli, fake, tmp_path):
    """A dump cut at a line break (no "N valid lids dumped" trailer) or with a count that
    does not match its LID lines would black-hole the missing LIDs: lft load and lft restore
    refuse it whole, exit 2, before the first SMP."""
    f = tmp_path / "lfts"
    assert cli("lft", "dump", "-o", str(f)).exit_code == 0
    whole = f.read_text()
    lines = whole.splitlines(keepends=True)
    assert lines[-1].startswith("4 valid lids dumped")
    for bad, needle in [("".join(lines[:-2]), "has no 'N valid lids dumped' line"),  # cut, trailer lost
                        ("".join(lines[:-2] + lines[-1:]), "says 4 valid lids dumped, but the section"),
                        (whole + "0x0007 001\n", "LID line after the section's 'lids dumped' line")]:
        f.write_text(bad)
        for cmd in (["lft", "load", str(f)], ["lft", "restore", str(f)]):
            sent = fake.stats.sent
            r = cli(*cmd)
            assert r.exit_code == 2 and needle in r.output, (cmd, r.output)
            assert fake.sets == [] and fake.stats.sent == sent, cmd  # refused before the first SMP


def test_cli_truncated_block_backup_is_refused(cli, fake, tmp_path):
    """The same for a backup saved before an apply: cut at a line break, it is refused
    whole (exit 2) before the first SMP; whole, it restores."""
    from smagent.fdb import backup, lft as linear
    old = bytes(fake.lft[:64])
    change = linear.BlockChange(SW_GUID, "Switch1", (0, 1), 0, old, b"\x01" * 64)
    path = backup.save_before_apply(None, None, [change], tmp_path)
    whole = path.read_text()
    path.write_text("".join(whole.splitlines(keepends=True)[:-3]))
    sent = fake.stats.sent
    r = cli("lft", "restore", str(path))
    assert r.exit_code == 2 and "not a block backup" in r.output and fake.stats.sent == sent, r.output
    path.write_text(whole)
    fake.lft[5] = 3
    r = cli("lft", "restore", str(path))
    assert r.exit_code == 0 and bytes(fake.lft[:64]) == old, r.output


def test_opensm_style_trailer_counts_to_the_top():
    """OpenSM's own LFT dump ends a section with "N lids dumped", N the top of its range."""
    text = ("Unicast lids [0-6] of switch Lid 2 guid 0x0000000000200000 ('S'):\n"
            "0x0001 001 # Channel Adapter portguid 0x0000000000100001: 'Hca1'\n"
            "0x0002 000 # Switch portguid 0x0000000000200000: 'S'\n"
            "6 lids dumped\n")
    (s,) = fdbtext.parse_lft_dump(text)
    assert s.top == 6 and s.entries == {1: (1, 2), 2: (0, 3)}
    with pytest.raises(fdbtext.DumpError, match="says 5 lids dumped"):
        fdbtext.parse_lft_dump(text.replace("6 lids", "5 lids"))


def test_cli_load_rejects_as_a_whole(cli, fake, tmp_path):
    f = tmp_path / "lfts"
    f.write_text("Unicast lids [0x0-0x6] of switch guid 0x0000000000200000 (Switch1):\n0x0005 003\n0x0006 009\n"
                 "2 valid lids dumped\n"
                 "Unicast lids [0x0-0x6] of switch guid 0x0000000000abcdef (X):\n0x0001 001\n1 valid lids dumped\n")
    r = cli("lft", "load", str(f))
    assert r.exit_code == 2 and fake.sets == []
    assert f"{f}:3: port 9" in r.output and f"{f}:5: switch GUID 0x0000000000abcdef" in r.output
    f.write_text("garbage\n")
    r = cli("lft", "load", str(f))
    assert r.exit_code == 2 and f"{f}:1: not a line" in r.output


def test_cli_mft_set_and_show(cli, fake):
    fake.num_ports = 36
    r = cli("mft", "set", "2", "0xc001", "1", "17", "20", "35", "--dry-run")
    # ports 17, 20, 35 have no cable: the dry run says so (exit 1), the write is refused (4)
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 3 and fake.sets == []
    assert "mcast: MLID 0xc001: Switch1 forwards to port 17, which is not linked" in r.stderr
    assert cli("mft", "set", "2", "0xc001", "1", "17", "20", "35").exit_code == 4 and fake.sets == []
    r = cli("mft", "set", "2", "0xc001", "1", "17", "20", "35", "--allow-defects")
    assert r.exit_code == 1, r.output
    assert sorted(fake.sets) == [(AttrID.MULTICAST_FORWARDING_TABLE, fw.mft_modifier(0, p)) for p in range(3)]
    r = cli("mft", "show", "2")
    assert r.output.splitlines()[2:] == ["0xc001      000200120008", "1 valid mlids dumped "]
    assert json.loads(cli("mft", "show", "2", "--json").output)["groups"] == [{"mlid": "0xc001", "ports": [1, 17, 20, 35]}]
    n = len(fake.sets)
    r = cli("mft", "set", "2", "0xc001", "1")  # positions 1 and 2 go to zero; 0 unchanged
    assert r.exit_code == 0, r.output  # it removes problems, adds none
    assert [m for _a, m in fake.sets[n:]] == [fw.mft_modifier(0, 1), fw.mft_modifier(0, 2)]
    for bad in (["0xbfff", "1"], ["0xc400", "1"], ["0xc001", "37"]):
        r = cli("mft", "set", "2", *bad)
        assert r.exit_code == 2, (bad, r.output)
    assert len(fake.sets) == n + 2
