"""Table commands on ibsim, with infiniband-diags as the witness: after `smagent sweep`,
`lft set` / `lft load` / `mft set` show up in ibroute, dry runs and bad input change
nothing, and our `show` output equals ibroute's."""
import json
import re
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from smagent.model.fabric import HCA, SWITCH, Fabric

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

SW1 = "0,1"  # Switch1 of topogen.two_switch(), seen from Hca1 (the first node: ibsim's client port)


def routes(text: str) -> dict[int, int]:
    return {int(m.group(1), 16): int(m.group(2)) for m in re.finditer(r"^(0x[0-9a-f]+) (\d+) ", text, re.M)}


def ibroute(sim, path=SW1, *extra):
    return sim.run(["ibroute", *extra, "-n", "-D", path]).stdout


@pytest.fixture
def two_switch(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    sim.smagent("sweep")
    return sim


def test_show_equals_ibroute(two_switch):
    sim = two_switch
    for path in (SW1, "0,1,3"):
        assert sim.smagent("lft", "show", "-n", path).stdout == ibroute(sim, path)
        # without -n both name the port behind every LID
        named = sim.smagent("lft", "show", path).stdout
        assert named == sim.run(["ibroute", "-D", path]).stdout
        assert "(Channel Adapter portguid 0x" in named and ": (Switch portguid 0x" in named
    lid = int(re.search(r"^Lid:\.+(\d+)$", sim.run(["smpquery", "-D", "portinfo", SW1, "0"]).stdout, re.M).group(1))
    assert sim.smagent("lft", "show", "-n", str(lid)).stdout == sim.run(["ibroute", "-n", str(lid)]).stdout
    assert sim.smagent("lft", "show", "-n", str(lid), "-a").stdout == sim.run(["ibroute", "-a", "-n", str(lid)]).stdout
    assert sim.smagent("lft", "show", str(lid)).stdout == sim.run(["ibroute", str(lid)]).stdout
    assert sim.smagent("lft", "show", str(lid), "-a").stdout == sim.run(["ibroute", "-a", str(lid)]).stdout


def test_lft_set_shows_in_ibroute(two_switch):
    sim = two_switch
    before = routes(ibroute(sim))
    new_port = 2 if before[5] != 2 else 1
    dry = sim.smagent("lft", "set", SW1, "5", str(new_port), "--dry-run", check=False)
    assert dry.returncode == 1 and "misdelivered" in dry.stderr  # LID 5 sent to the wrong host
    assert dry.stdout.strip() == f"Switch1 LFT block 0: lid 5: {before[5]} -> {new_port}"
    assert routes(ibroute(sim)) == before
    refused = sim.smagent("lft", "set", SW1, "5", str(new_port), "--json", check=False)
    assert refused.returncode == 4 and "unreachable" in refused.json()["defects"], refused.stdout  # LID 5 astray
    assert routes(ibroute(sim)) == before
    r = json.loads(sim.smagent("lft", "set", SW1, "5", str(new_port), "--json", "--allow-defects", check=False).stdout)
    assert r["sets"] == {"switchinfo": 0, "lft_blocks": 1} and r["problems"] == []
    assert routes(ibroute(sim)) == {**before, 5: new_port}
    again = json.loads(sim.smagent("lft", "set", SW1, "5", str(new_port), "--json", "--allow-defects").stdout)
    assert again["plan"] == [] and again["sets"] == {"switchinfo": 0, "lft_blocks": 0}


def test_lft_set_above_top_raises_it_and_shows_lid_top(two_switch):
    # LID 64 = the new LinearFDBTop, a multiple of 64: ibroute 44 never reads block 1
    # (docs/PITFALLS.md), smpdump and we do
    sim = two_switch
    sim.smagent("lft", "set", SW1, "64", "3")
    out = sim.run(["smpquery", "-D", "switchinfo", SW1]).stdout
    assert re.search(r"^LinearFdbTop:\.+64$", out, re.M), out
    assert sim.run(["smpdump", "-D", SW1, "0x19", "1"]).stdout.split()[0].startswith("03")
    assert 64 not in routes(ibroute(sim))  # ibroute's blind spot
    assert routes(sim.smagent("lft", "show", SW1).stdout)[64] == 3
    sim.smagent("lft", "set", SW1, "65", "2")  # now ibroute sees both
    assert {64: 3, 65: 2}.items() <= routes(ibroute(sim)).items()


def test_dump_edit_load(two_switch, tmp_path):
    sim = two_switch
    dump = tmp_path / "lfts.dump"
    sim.smagent("lft", "dump", "-o", str(dump))
    text = dump.read_text()
    assert text.count("Unicast lids [") == 2
    assert re.search(r"^0x0001 001 : \(Channel Adapter portguid 0x[0-9a-f]{16}: 'Hca1'\)$", text, re.M)
    before = routes(ibroute(sim))
    # Switch1's section: route LID 6 elsewhere
    parts = re.split(r"(?m)^(?=Unicast lids )", text)
    sw1_idx = next(i for i, p in enumerate(parts) if p and "(Switch1):" in p.splitlines()[0])
    old = before[6]
    new = 1 if old != 1 else 2
    parts[sw1_idx] = re.sub(r"(?m)^0x0006 \d{3} ", f"0x0006 {new:03d} ", parts[sw1_idx])
    dump.write_text("".join(parts))

    dry = sim.smagent("lft", "load", str(dump), "--dry-run", check=False)
    assert dry.returncode == 1 and "misdelivered" in dry.stderr  # LID 6 sent to the wrong host
    assert dry.stdout.splitlines() == [f"Switch1 LFT block 0: lid 6: {old} -> {new}"]
    assert routes(ibroute(sim)) == before, "a dry run sends no Set"
    r = json.loads(sim.smagent("lft", "load", str(dump), "--json", "--allow-defects", check=False).stdout)
    assert r["sets"] == {"switchinfo": 0, "lft_blocks": 1} and r["problems"] == []
    assert routes(ibroute(sim)) == {**before, 6: new}
    again = json.loads(sim.smagent("lft", "load", str(dump), "--json").stdout)
    assert again["plan"] == [] and again["sets"] == {"switchinfo": 0, "lft_blocks": 0}
    # dump_lfts' own output (infiniband-diags) loads too, and matches what is there now
    theirs = tmp_path / "dump_lfts.out"
    theirs.write_text(sim.run(["dump_lfts"]).stdout)
    assert json.loads(sim.smagent("lft", "load", str(theirs), "--json").stdout)["plan"] == []


def test_bad_input_exit_2_and_nothing_sent(two_switch, tmp_path):
    sim = two_switch
    before = ibroute(sim), ibroute(sim, "0,1,3")
    for args, needle in ((["lft", "set", SW1, "0xc000", "1"], "not a unicast LID"),
                         (["lft", "set", SW1, "5", "99"], "port 99 does not exist on Switch1: ports 0..8"),
                         (["lft", "set", "0", "5", "1"], "not a switch")):
        r = sim.smagent(*args, check=False)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
    dump = tmp_path / "lfts.dump"
    sim.smagent("lft", "dump", "-o", str(dump))
    text = dump.read_text()
    guid = re.search(r"guid (0x[0-9a-f]{16}) \(Switch1\)", text).group(1)
    parts = re.split(r"(?m)^(?=Unicast lids )", text.replace(guid, "0x00000000deadbeef"))
    parts = [re.sub(r"(?m)^(0x0001) \d{3} ", r"\1 009 ", p) if "(Switch2):" in p else p for p in parts]
    dump.write_text("".join(parts))
    r = sim.smagent("lft", "load", str(dump), check=False)
    assert r.returncode == 2, r.stderr
    assert "0x00000000deadbeef (Switch1) is not a switch in this fabric" in r.stderr
    assert "port 9 does not exist on Switch2" in r.stderr  # every problem listed
    assert (ibroute(sim), ibroute(sim, "0,1,3")) == before


def fabric_36() -> Fabric:
    """One 36-port switch with hosts on ports 1, 17, 20, 35 (PortMask positions 0, 1, 2)."""
    f = Fabric()
    ports = (1, 17, 20, 35)
    for i in range(len(ports)):
        f.add_node(name=f"H{i}", node_type=HCA, num_ports=1)
    f.add_node(name="S36", node_type=SWITCH, num_ports=36)
    for i, p in enumerate(ports):
        f.connect(f"H{i}", 1, "S36", p)
    return f


def matrix_ports(text: str, mlid: int) -> list[int]:
    """Ports marked x for MLID in `ibroute -M` (non-brief) output."""
    line = next(l for l in text.splitlines() if l.startswith(f"0x{mlid:04x}"))
    cols = line[12:]
    return [i // 2 for i, ch in enumerate(cols) if ch == "x"]


def test_mft_set_36_ports(ibsim, tmp_path):
    net = tmp_path / "s36.net"
    net.write_text(netfile.dumps(fabric_36()))
    sim = ibsim(net)
    sim.smagent("sweep")
    sw = "0,1"
    dry = sim.smagent("mft", "set", sw, "0xc005", "1", "17", "20", "35", "--dry-run", check=False)
    assert [l.split(":")[0] for l in dry.stdout.splitlines()] == [
        f"S36 MFT block 0 position {p}" for p in range(3)]
    assert "0xc005" not in sim.run(["ibroute", "-M", "-D", sw]).stdout
    r = json.loads(sim.smagent("mft", "set", sw, "0xc005", "1", "17", "20", "35", "--json", "--allow-defects",
                               check=False).stdout)
    assert r["sets"] == {"switchinfo": 0, "mft_blocks": 3} and r["problems"] == []
    assert matrix_ports(sim.run(["ibroute", "-M", "-D", sw]).stdout, 0xC005) == [1, 17, 20, 35]
    sim.smagent("mft", "set", sw, "0xc03f", "0", "16", "36", "--allow-defects", check=False)  # block 1, position 2 edge ports
    ours = sim.smagent("mft", "show", sw).stdout
    assert ours == sim.run(["ibroute", "-M", "-n", "-D", sw]).stdout
    assert "0xc005      000200120008" in ours and "0xc03f      000100010010" in ours
    lid = int(re.search(r"^Lid:\.+(\d+)$", sim.run(["smpquery", "-D", "portinfo", sw, "0"]).stdout, re.M).group(1))
    assert sim.smagent("mft", "show", str(lid)).stdout == sim.run(["ibroute", "-M", "-n", str(lid)]).stdout
    # shrink to port 1: positions 1 and 2 are cleared, position 0 is unchanged (not written)
    r = json.loads(sim.smagent("mft", "set", sw, "0xc005", "1", "--json", "--allow-defects", check=False).stdout)
    assert [c["position"] for c in r["changes"]] == [1, 2]
    assert matrix_ports(sim.run(["ibroute", "-M", "-D", sw]).stdout, 0xC005) == [1]
    again = json.loads(sim.smagent("mft", "set", sw, "0xc005", "1", "--json").stdout)
    assert again["plan"] == []
    before = sim.run(["ibroute", "-M", "-n", "-D", sw]).stdout
    for bad in (["0xc400", "1"], ["0xbfff", "1"], ["0xc005", "37"]):
        assert sim.smagent("mft", "set", sw, *bad, check=False).returncode == 2
    assert sim.run(["ibroute", "-M", "-n", "-D", sw]).stdout == before


def test_lft_set_into_a_port_without_a_cable_is_refused(two_switch):
    """Issue 39 item 3 on ibsim: the edit's plan check refuses a black hole (Switch1's
    port 4 has no cable), exit 4 and nothing sent; a dry run reports it (exit 1); with
    --allow-defects it is written and the backup it made is named, and exists."""
    sim = two_switch
    before = routes(ibroute(sim))
    r = sim.smagent("lft", "set", SW1, "5", "4", check=False)
    assert r.returncode == 4 and "black_hole: Switch1 LID 5 -> port 4: the exit port has no link" in r.stderr, r.stderr
    assert routes(ibroute(sim)) == before
    dry = sim.smagent("lft", "set", SW1, "5", "4", "--dry-run", check=False)
    assert dry.returncode == 1 and "warning: planned tables: black_hole" in dry.stderr
    done = sim.smagent("lft", "set", SW1, "5", "4", "--allow-defects", "--json", check=False)
    assert done.returncode == 1 and done.json()["plan_defects"]["black_hole"]["count"] == 1
    assert routes(ibroute(sim)) == {**before, 5: 4}
    backup = done.json()["backup"]
    assert backup and Path(backup).is_file() and Path(backup).is_relative_to(sim.env["SMAGENT_STATE_DIR"])
