"""M_Keys: `--mkey`, `--mkey-file` (smagent.config.mkeys), discovery's key probing, and the
simulator's protection levels 0-3 and lease (IBA 14.2.4).

The fabric is fixtures/two-switch.net: the SM on Hca1 port 1, Hca1/Hca3 on Switch1,
Hca2/Hca4 on Switch2, Switch1 ports 3 and 5 cabled to Switch2 ports 3 and 5.
GUIDs (ibsim's plan): Switch1 0x200000, Switch2 0x200001, Hca1 0x100000 (ports
0x100001/2), Hca2 0x100003 (ports 0x100004/5), Hca3 0x100006, Hca4 0x100009.
"""
import json
import pathlib

import pytest

import smagent
from mad import smp as smpcodec
from mad.attributes import AttrID, PortState
from mad.forwarding import LFT_NO_PORT, portinfo_modifier
from mad.header import Method
from smagent.config import mkeys
from smagent.sim import SimFabric, mkey as simmkey
from smagent.transport import Request, open_transport
from smagent.transport.sim import SimTransport

TWO_SW = pathlib.Path(__file__).parents[2] / "fixtures" / "two-switch.net"
KEY = 0x1122334455667788  # Switch2's
WRONG = 0x0BADC0DE0BADC0DE
# per-node keys for the key file
KEYS = {"Switch1": 0xA1A2A3A4A5A6A7A8, "Switch2": 0xB1B2B3B4B5B6B7B8, "Hca1": 0xC1C2C3C4C5C6C7C8,
        "Hca2": 0xD1D2D3D4D5D6D7D8}
GUID = {"Switch1": 0x200000, "Switch2": 0x200001, "Hca1": 0x100000, "Hca2": 0x100003}
HCA2_PORT1_GUID = 0x100004


def key_forms(key: int) -> list[str]:
    return [f"{key:x}", f"{key:X}", f"{key:016x}", f"{key:#x}", f"{key:#018x}", str(key)]


def assert_no_key(text: str, *keys: int) -> None:
    for k in keys:
        for form in key_forms(k):
            assert form.lower() not in text.lower(), f"a key ({form[:4]}...) leaked"


def protected(level: int, lease: int = 0, nodes=("Switch2",), keys=None) -> SimFabric:
    keys = keys or {n: KEY for n in nodes}
    return SimFabric.load(TWO_SW, node_caps={n: {"m_key": keys[n], "m_key_protect_bits": level,
                                                 "m_key_lease_period": lease} for n in nodes})


@pytest.fixture
def on_sim(cli, monkeypatch):
    """`on_sim(sim, *args)`: run the CLI on the in-process simulator `sim` (every
    invocation shares it, as successive commands share a live fabric)."""
    def run(sim: SimFabric, *args):
        monkeypatch.setattr(SimFabric, "load", classmethod(lambda cls, src=None, **kw: sim))
        return cli("--transport", "sim", "--topology", TWO_SW, *args)

    return run


def key_file(tmp_path, text: str) -> str:
    p = tmp_path / "mkeys.txt"
    p.write_text(text)
    return str(p)


def per_node_file(tmp_path, nodes) -> str:
    lines = ["# per-node M_Keys", "default 0x0"]
    for n in nodes:
        if n == "Hca2":  # a CA's key by port GUID, without 0x
            lines.append(f"{HCA2_PORT1_GUID:016x}   {KEYS[n]:x}   # Hca2 port 1")
        else:
            lines.append(f"{GUID[n]:#018x} {KEYS[n]:#018x}")
    return key_file(tmp_path, "\n".join(lines) + "\n")


def guards(sim: SimFabric) -> dict:
    """(M_Key, protect bits, lease period) of every port that holds an M_Key."""
    out = {}
    for n in sim:
        for p in ([0] if n.is_switch else range(1, n.num_ports + 1)):
            pi = n.pi[p]
            out[(n.name, p)] = (pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period)
    return out


def violations(sim, name, port=0) -> int:
    return sim.node(name).pi[port].m_key_violations


# -- the key file ---------------------------------------------------------------------------------------------
def test_key_file_parses(tmp_path):
    chain = mkeys.load(key_file(tmp_path, """
# comment line
default   0x00000000cafe0001     # for the rest
0x0000000000200001 0x1122334455667788
0000000000100004   8877665544332211   # a port GUID, no 0x

""") )
    assert chain.default == 0xCAFE0001
    assert chain.by_guid == {0x200001: 0x1122334455667788, 0x100004: 0x8877665544332211}
    assert chain.candidates() == [0xCAFE0001, 0x1122334455667788, 0x8877665544332211]
    assert chain.key_of(0x100003, 0x100004) == 0x8877665544332211  # port GUID entry
    assert chain.key_of(0x100003, 0x100005) == 0xCAFE0001  # not listed: the default
    assert_no_key(repr(chain) + str(chain), 0x1122334455667788, 0x8877665544332211, 0xCAFE0001)
    # --mkey replaces the file's default
    assert mkeys.keychain(7, key_file(tmp_path, "default 5\n")).default == 7
    assert mkeys.keychain(0, key_file(tmp_path, "default 5\n")).default == 5


@pytest.mark.parametrize("text, line, says", [
    ("0x200001\n", 1, "expected 'GUID MKEY'"),
    ("# c\n0x200001 0x1 0x2\n", 2, "found 3 words"),
    ("\n\n0x200001 0xZZ1122334455\n", 3, "the M_Key is not a hexadecimal number"),
    ("0x200001 0x11223344556677889\n", 1, "at most 16 digits"),
    ("switch1 0x1\n", 1, "the first word is not a GUID"),
    ("1122334455667788zz 0x200001\n", 1, "the first word is not a GUID"),  # columns swapped: not quoted
    ("0x0 0x1\n", 1, "GUID 0 is not"),
    ("0x200001 0x1\n0x200001 0x1\n", 2, "listed twice (first on line 1)"),
    ("default 1\ndefault 2\n", 2, "a second 'default' line"),
])
def test_key_file_errors_name_file_and_line(tmp_path, text, line, says):
    path = key_file(tmp_path, text)
    with pytest.raises(mkeys.MKeyFileError) as e:
        mkeys.load(path)
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith(f"{path}:{line}: ") and says in str(e.value)
    for secret in ("ZZ1122334455", "11223344556677889", "1122334455667788", "switch1"):  # nothing quoted
        assert secret.lower() not in str(e.value).lower()


def test_key_file_errors_exit_2_before_any_smp(on_sim, tmp_path):
    sim = protected(2)
    path = key_file(tmp_path, "0x200001 0x1122334455667788\n0x200001 0x1122334455667788\n")
    r = on_sim(sim, "--mkey-file", path, "discover")
    assert r.exit_code == 2 and f"{path}:2:" in r.stderr
    assert_no_key(r.stdout + r.stderr, KEY)
    assert sim.counters["smps"] == 0
    r = on_sim(sim, "--mkey-file", str(tmp_path / "missing.txt"), "discover")
    assert r.exit_code == 2 and "missing.txt" in r.stderr
    with pytest.raises(smagent.api.BadInput, match=r"mkeys.txt:2"):
        smagent.connect("sim", topology=sim, m_key_file=path)


def test_a_key_wider_than_64_bits_is_refused_unquoted(cli):
    with pytest.raises(ValueError, match="64 bits") as e:
        mkeys.KeyChain(default=1 << 64)
    assert str(1 << 64) not in str(e.value)
    r = cli("--mkey", str((1 << 64) + 5), "discover")
    assert r.exit_code == 2 and "64 bits" in r.stderr and str((1 << 64) + 5) not in r.stderr


# -- the key chain and the transport ---------------------------------------------------------------------------
def test_keychain_learns_paths_and_lids():
    chain = mkeys.KeyChain(default=1, by_guid={0x200001: 2, 0x100004: 3})
    assert chain.for_path((0, 1, 3)) == 1 and chain.for_lid(9) == 1
    assert chain.learn(path=(0, 1, 3), guid=0x200001, port_guid=0x200001) == 2
    assert chain.for_path((0, 1, 3)) == 2 and chain.for_path((0, 1, 5)) == 1
    assert chain.learn(path=(0, 1, 3, 1), guid=0x100003, port_guid=0x100004) == 3
    chain.learn(lid=8, lmc=2, key=3)
    assert [chain.for_lid(x) for x in (7, 8, 11, 12)] == [1, 3, 3, 1]
    # a key proven by an answer beats the file for that GUID
    assert chain.learn(path=(0, 1, 5), guid=0x200001, port_guid=0x200001, key=4) == 4
    assert chain.key_of(0x200001, 0x200001) == 4
    assert chain.candidates() == [1, 2, 3, 4]
    assert mkeys.KeyChain(default=0, by_guid={1: 0, 2: 5}).candidates() == [5]


def test_transport_fills_keys_by_path_and_lid_but_keeps_a_given_one():
    sim = protected(2)
    t = SimTransport(sim)
    t.keys = mkeys.KeyChain(by_guid={GUID["Switch2"]: KEY})
    t.keys.learn(path=(0, 1, 3), guid=GUID["Switch2"])
    sent = []
    t.on_send = lambda r: sent.append(r.smp.m_key)
    t.execute([Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1, 3))),
               Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1))),
               Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1, 3), m_key=WRONG))], retries=0)
    assert sent == [KEY, 0, WRONG]
    # a PortInfo read through a known path maps the port's LID to the node's key
    sim.set_lid("Switch2", 0, 21)
    pi = t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0, 1, 3), portinfo_modifier(0))))
    assert pi.attribute().lid == 21 and t.keys.for_lid(21) == KEY
    sim.set_lid("Hca1", 1, 1)
    sim.node("Switch1").lft[21] = 3
    sim.node("Switch1").lft[1] = 1
    sim.node("Switch2").lft[1] = 3
    sim.node("Switch1").si.linear_fdb_top = sim.node("Switch2").si.linear_fdb_top = 21
    sim.activate_all()
    resp = t.query(Request(smpcodec.lid_routed(Method.GET, AttrID.NODE_INFO), dlid=21))
    assert resp.attribute().node_guid == GUID["Switch2"]
    # errors never show the key
    (rep,) = t.execute([Request(smpcodec.dr(Method.SET, AttrID.PORT_INFO, (0, 1, 3), 0, pi.attribute(),
                                            m_key=WRONG))])
    assert "M_Key-protected" in str(rep.error)
    assert_no_key(str(rep.error) + rep.request.describe() + repr(t.keys), KEY, WRONG)


def test_open_transport_takes_the_key_file(tmp_path):
    path = key_file(tmp_path, f"default 0x5\n{GUID['Switch2']:#x} {KEY:#x}\n")
    t = open_transport("sim", topology=str(TWO_SW), m_key_file=path)
    assert t.keys.default == 5 and t.keys.by_guid == {GUID["Switch2"]: KEY} and t.m_key == 5
    t = open_transport("sim", topology=str(TWO_SW), m_key=9, m_key_file=path)
    assert t.m_key == 9


def test_a_capture_shows_the_key_only_when_asked(on_sim, cli, tmp_path):
    """Keys in a recorded capture stay hidden when it is decoded, unless --show-keys."""
    sim = protected(2)
    cap = tmp_path / "s.erf"
    r = on_sim(sim, "--mkey", hex(KEY), "--record", str(cap), "discover")
    assert r.exit_code == 0
    assert_no_key(r.stdout + r.stderr, KEY)
    r = cli("decode", "--pcap", cap)
    assert r.exit_code == 0 and "m_key:" in r.stdout
    assert_no_key(r.stdout, KEY)
    for extra in ([], ["--json"]):
        r = cli("decode", "--pcap", cap, "--show-keys", *extra)
        assert r.exit_code == 0 and (f"{KEY:#018x}" in r.stdout or str(KEY) in r.stdout)


# -- the simulator's M_Key model --------------------------------------------------------------------------------
def _ask(t, method, attr, path, mod=0, value=None, m_key=0):
    (r,) = t.execute([Request(smpcodec.dr(method, attr, path, mod, value, m_key=m_key))], retries=0)
    return r


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_sim_levels(level):
    sim = protected(level)
    t = SimTransport(sim)
    get = _ask(t, Method.GET, AttrID.PORT_INFO, "0,1,3", 0, m_key=WRONG)
    if level >= 2:
        assert not get.ok and violations(sim, "Switch2") == 1
    else:
        assert get.ok and violations(sim, "Switch2") == 0  # a Get at level 0/1 is no violation
        assert get.value().m_key == (KEY if level == 0 else 0)  # level 1 hides the key
    pi = _ask(t, Method.GET, AttrID.PORT_INFO, "0,1,3", 0, m_key=KEY).value()
    assert (pi.m_key, pi.m_key_protect_bits) == (KEY, level)
    before = violations(sim, "Switch2")
    pi.port_state = pi.port_physical_state = 0
    assert not _ask(t, Method.SET, AttrID.PORT_INFO, "0,1,3", 0, pi, m_key=WRONG).ok
    assert violations(sim, "Switch2") == before + 1
    assert _ask(t, Method.SET, AttrID.PORT_INFO, "0,1,3", 0, pi, m_key=KEY).ok


def test_sim_lease_expires_even_when_the_next_smp_has_the_key():
    """Expiry is a timer: the right key arriving after it finds the bits cleared
    (before the fix, a matching key only stopped the timer and the bits stayed)."""
    sim = protected(2, lease=10)
    now = [500.0]
    sim.clock = lambda: now[0]
    t = SimTransport(sim)
    assert not _ask(t, Method.GET, AttrID.NODE_INFO, "0,1,3").ok  # a violation starts the lease
    now[0] += 5
    assert not _ask(t, Method.GET, AttrID.NODE_INFO, "0,1,3").ok  # does not restart it
    now[0] += 5
    pi = _ask(t, Method.GET, AttrID.PORT_INFO, "0,1,3", 0, m_key=KEY).value()
    assert (pi.m_key_protect_bits, pi.m_key, pi.m_key_violations) == (0, KEY, 2)
    # a matching key before expiry stops the timer: no expiry later
    sim = protected(2, lease=10)
    sim.clock = lambda: now[0]
    t = SimTransport(sim)
    assert not _ask(t, Method.GET, AttrID.NODE_INFO, "0,1,3").ok
    assert _ask(t, Method.GET, AttrID.NODE_INFO, "0,1,3", m_key=KEY).ok
    now[0] += 100
    assert not _ask(t, Method.GET, AttrID.NODE_INFO, "0,1,3").ok
    simmkey.expire(sim.node("Switch2"), 0, now[0])
    assert sim.node("Switch2").pi[0].m_key_protect_bits == 2  # the new lease has only just started


# -- sweeps through the CLI ------------------------------------------------------------------------------------------
def _converged(on_sim, sim, *key_args):
    r = on_sim(sim, *key_args, "sweep", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["plan"] == [] and s["unreachable"] == [] and s["problems"] == []


def _all_active(sim):
    for n in sim:
        for p in range(1, n.num_ports + 1):
            if n.peers[p] is not None:
                assert n.state[p] == PortState.ACTIVE, (n.name, p)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_sweep_with_mkey(on_sim, level):
    sim = protected(level)
    before = guards(sim)
    r = on_sim(sim, "--mkey", hex(KEY), "sweep")
    assert r.exit_code == 0, r.stderr
    _all_active(sim)
    assert guards(sim) == before  # the PortInfo Sets echoed M_Key, protect bits, lease
    assert violations(sim, "Switch2") == 0
    _converged(on_sim, sim, "--mkey", str(KEY))
    assert_no_key(r.stdout + r.stderr, KEY)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_sweep_with_a_key_file_of_per_node_keys(on_sim, level, tmp_path):
    nodes = ("Switch1", "Switch2", "Hca1", "Hca2")  # Hca1 is the SM's own port
    sim = protected(level, nodes=nodes, keys=KEYS)
    path = per_node_file(tmp_path, nodes)
    before = guards(sim)
    r = on_sim(sim, "--mkey-file", path, "sweep")
    assert r.exit_code == 0, r.stderr
    _all_active(sim)
    assert guards(sim) == before
    if level <= 1:
        assert all(violations(sim, n) == 0 for n in nodes)  # Gets pass: no key was ever wrong
    # at 2 and 3 the wrong keys probed count as violations, but the right key came after
    # them: no lease timer is left running to drop the protection later
    assert not any(n.lease_start for n in sim)
    _converged(on_sim, sim, "--mkey-file", path)
    # the keys also serve LID-routed SMPs once discovery has seen the LIDs
    with smagent.connect("sim", topology=sim, m_key_file=path) as s:
        s.discover()
        lid = sim.port_lid(("Switch2", 0))
        assert s.query("nodeinfo", str(lid)).node_guid == GUID["Switch2"]
        assert s.query("portinfo", str(lid), port=0).m_key == KEYS["Switch2"]  # the right key reads it
    assert_no_key(r.stdout + r.stderr, *KEYS.values())


def test_a_wrong_default_is_recovered_by_the_other_keys(on_sim, tmp_path):
    sim = protected(2, nodes=("Switch1", "Switch2"), keys=KEYS)
    path = key_file(tmp_path, f"{GUID['Switch1']:#x} {KEYS['Switch1']:#x}\n{GUID['Switch2']:#x} {KEYS['Switch2']:#x}\n")
    r = on_sim(sim, "--mkey", hex(WRONG), "--mkey-file", path, "sweep")
    assert r.exit_code == 0, r.stderr
    # Switch2 is behind two cables: each path costs one refused NodeInfo (x4 tries), then the
    # right key is found and learnt; nothing else is refused
    assert violations(sim, "Switch2") == 2 * 4 + 2 * 1  # 2 paths, default 4 tries; Switch1's key once each
    _converged(on_sim, sim, "--mkey", hex(WRONG), "--mkey-file", path)


@pytest.mark.parametrize("level", [0, 1])
@pytest.mark.parametrize("given", [None, WRONG])
def test_levels_0_and_1_without_the_key_refuse_the_sets(on_sim, level, given):
    sim = protected(level)
    before = guards(sim)
    args = ["--mkey", hex(given)] if given else []
    r = on_sim(sim, *args, "sweep")
    assert r.exit_code == 3
    out = r.stdout + r.stderr
    assert "unreachable" not in r.stderr  # discovery worked: level 0/1 answer Gets
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors and all("Switch2" in line for line in errors), errors  # only Switch2 failed
    assert any("Switch2 port 0: PortInfo Set failed" in line for line in errors)
    assert all("if the node is M_Key-protected, the key was refused (protected SMAs drop SMPs with a wrong M_Key)"
               in line for line in errors)
    assert_no_key(out, KEY, WRONG)
    # nothing else broke: the rest of the fabric is up, Switch2 untouched
    sw2 = sim.node("Switch2")
    assert guards(sim) == before and violations(sim, "Switch2") > 0
    assert set(sw2.lft) == {LFT_NO_PORT} and sw2.pi[0].lid == 0
    for name in ("Hca1", "Hca3"):
        assert sim.node(name).state[1] == PortState.ACTIVE
    assert sim.node("Switch1").state[1] == sim.node("Switch1").state[2] == PortState.ACTIVE
    lft1 = sim.node("Switch1").lft
    for name in ("Hca1", "Hca3", "Hca2", "Hca4"):  # Switch1 routes every host, Switch2's too
        assert lft1[sim.port_lid((name, 1))] != LFT_NO_PORT
    # the JSON form of the failure keeps the key out too
    r = on_sim(sim, *args, "sweep", "--json")
    assert r.exit_code == 3 and json.loads(r.stdout)["problems"]
    assert_no_key(r.stdout + r.stderr, KEY, WRONG)


@pytest.mark.parametrize("given", [None, WRONG])
def test_level_1_reads_mkey_as_0_without_the_key(on_sim, given):
    sim = protected(1)
    args = ["--mkey", hex(given)] if given else []
    r = on_sim(sim, *args, "query", "portinfo", "0,1,3", "--port", "0", "--json")
    assert r.exit_code == 0
    value = json.loads(r.stdout)["value"]
    assert value["m_key"] == "<not displayed>" and value["m_key_protect_bits"] == 1
    r = on_sim(sim, *args, "query", "portinfo", "0,1,3", "--port", "0", "--json", "--show-keys")
    assert json.loads(r.stdout)["value"]["m_key"] == 0  # level 1: read as 0 without the key
    assert_no_key(r.stdout + r.stderr, KEY)
    with smagent.connect("sim", topology=sim, m_key=KEY) as s:
        assert s.query("portinfo", "0,1,3", port=0).m_key == KEY


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("given", [None, WRONG])
def test_levels_2_and_3_without_the_key_leave_the_node_unreachable(on_sim, level, given):
    sim = protected(level)
    args = ["--mkey", hex(given)] if given else []
    for cmd in (["discover"], ["sweep"]):
        r = on_sim(sim, *args, *cmd)
        assert r.exit_code == 3, (cmd, r.stderr)
        unreachable = [line for line in r.stderr.splitlines() if line.startswith("warning: unreachable:")]
        assert unreachable == [
            f"warning: unreachable: DR 0,1,{p} (behind Switch1 port {p}): no response: the node did not answer; "
            "if its port is M_Key-protected the key was refused (protected SMAs drop SMPs with a wrong M_Key)"
            for p in (3, 5)]
        assert_no_key(r.stdout + r.stderr, KEY, WRONG)
    assert violations(sim, "Switch2") > 0
    # the rest of the fabric came up; Switch2 and its hosts were never touched
    assert sim.node("Hca3").state[1] == PortState.ACTIVE
    assert set(sim.node("Switch2").lft) == {LFT_NO_PORT}
    assert sim.node("Hca2").state[1] == PortState.INIT


def test_unreachable_local_port_names_the_mkey(on_sim):
    sim = protected(2, nodes=("Hca1",))
    r = on_sim(sim, "discover")
    assert r.exit_code == 3 and "(the local port): no response: the node did not answer" in r.stderr
    assert "M_Key-protected" in r.stderr
    assert_no_key(r.stdout + r.stderr, KEY)


def test_net_file_caps_protect_a_node(cli, tmp_path):
    text = TWO_SW.read_text().replace(
        'Switch\t8 "Switch2"\n',
        f'Switch\t8 "Switch2"\n# smagent: cap m_key={KEY:#x}\n# smagent: cap m_key_protect_bits=2\n')
    net = tmp_path / "prot.net"
    net.write_text(text)
    r = cli("--topology", net, "sweep")
    assert r.exit_code == 3 and "DR 0,1,3 (behind Switch1 port 3): no response" in r.stderr
    assert_no_key(r.stdout + r.stderr, KEY)
    r = cli("--topology", net, "--mkey", hex(KEY), "sweep")
    assert r.exit_code == 0, r.stderr
    assert_no_key(r.stdout + r.stderr, KEY)


# -- the lease ---------------------------------------------------------------------------------------------------
def test_lease_expiry_lets_a_new_sm_in(on_sim):
    """An SM with the key configured the fabric, then vanished. A new SM without the
    key is refused (a violation starts the lease); once the lease has run out the
    protection is gone, Gets pass, and its sweep finds nothing to change."""
    sim = protected(2, lease=60)
    now = [1000.0]
    sim.clock = lambda: now[0]
    assert on_sim(sim, "--mkey", hex(KEY), "sweep").exit_code == 0
    now[0] += 3600  # the old SM is gone; no SMP reaches Switch2 for an hour: nothing expires
    assert sim.node("Switch2").pi[0].m_key_protect_bits == 2
    r = on_sim(sim, "sweep")
    assert r.exit_code == 3 and "DR 0,1,3 (behind Switch1 port 3): no response" in r.stderr
    assert sim.node("Switch2").pi[0].m_key_violations > 0
    now[0] += 59
    assert on_sim(sim, "discover").exit_code == 3  # still inside the lease
    now[0] += 2
    r = on_sim(sim, "sweep")
    assert r.exit_code == 0, r.stderr
    assert_no_key(r.stdout + r.stderr, KEY)
    pi = sim.node("Switch2").pi[0]
    assert (pi.m_key_protect_bits, pi.m_key) == (0, KEY)  # the key stays; only the protection dropped
    _all_active(sim)
    _converged(on_sim, sim)


@pytest.mark.parametrize("level", [0, 2])
def test_sim_trap_repress_is_key_checked(level):
    """A TrapRepress is checked like a Set: a wrong key is a violation (and starts the
    lease); either way the SMA consumes it without an answer."""
    sim = protected(level, lease=10)
    t = SimTransport(sim)
    assert not _ask(t, Method.TRAP_REPRESS, AttrID.NOTICE, "0,1,3", m_key=WRONG).ok
    assert violations(sim, "Switch2") == 1
    assert not _ask(t, Method.TRAP_REPRESS, AttrID.NOTICE, "0,1,3", m_key=KEY).ok
    assert violations(sim, "Switch2") == 1


@pytest.mark.parametrize("target", ["0,1,3", "0,1,5"])  # Switch2, by both cables
def test_query_by_path_finds_the_key_in_the_file(on_sim, tmp_path, target):
    """A query by DR path, where no discovery ran: the default key goes first, then each
    key of the file; the one that answers is used (and never printed)."""
    sim = protected(2, nodes=("Switch2",), keys={"Switch2": KEYS["Switch2"]})
    r = on_sim(sim, "--mkey-file", per_node_file(tmp_path, ["Switch1", "Switch2"]),
            "query", "nodeinfo", target, "--json")
    assert r.exit_code == 0, r.output
    assert_no_key(r.output, *KEYS.values())
    # without the file the node stays silent
    r = on_sim(sim, "query", "nodeinfo", target)
    assert r.exit_code == 3


@pytest.mark.parametrize("value, says", [("0xZZ99887766", "not a number"), ("0x1199887766554433221", "64 bits"),
                                         ("99887766xyz", "not a number")])
def test_a_mistyped_mkey_is_named_not_echoed(cli, value, says):
    """The issue's case: most of a real key was in the error."""
    for args in (["--mkey", value, "discover"], ["--mkey", value, "discover", "--json"]):
        r = cli(*args)
        assert r.exit_code == 2 and "--mkey" in r.stderr and says in r.stderr
        assert "99887766" not in r.output + r.stderr, r.output + r.stderr


def test_parse_key_never_quotes():
    for bad in ("0xZZ99887766", "1" * 30, "0xq", "-5"):
        with pytest.raises(mkeys.BadInput) as e:
            mkeys.parse_key(bad, "--sm-key")
        assert str(e.value).startswith("--sm-key: ") and bad not in str(e.value)
    assert mkeys.parse_key(" 0x10 ", "k") == 16 and mkeys.parse_key("17", "k") == 17


@pytest.mark.parametrize("text, says", [
    ("0x1122334455667788\n0x8877665544332211\n", "expected one key, found 2 non-comment lines (lines 1, 2)"),
    ("# only a comment\n", "expected one key, found 0"),
    ("\n0xZZ11223344556677 # typo\n", ":2: not a number"),
])
def test_key_file_is_read_whole_and_never_quoted(tmp_path, text, says):
    f = tmp_path / "sm.key"
    f.write_text(text)
    with pytest.raises(mkeys.BadInput) as e:
        mkeys.load_key_file(f, "--sm-key-file")
    assert says in str(e.value) and str(f) in str(e.value)
    for secret in ("1122334455667788", "8877665544332211", "ZZ11223344556677"):
        assert secret.lower() not in str(e.value).lower()
    f.write_text("# the SM_Key\n  0x1122334455667788  # ours\n\n")
    assert mkeys.load_key_file(f, "--sm-key-file") == 0x1122334455667788


@pytest.mark.parametrize("level", [2, 3])
def test_daemon_repair_with_per_node_keys_stays_incremental(level):
    """fat_tree_2(4), a different M_Key on every switch, the SM on H0 (L0 port 1): cutting
    L0-S0 sends S0's DR path through L0-S1-L1-S0, a path discovery never walked. The
    repair tells the key chain who is behind it, so its SMPs carry S0's key and the repair
    stays incremental, far below a full sweep's SMPs."""
    from smagent.model import topogen
    from smagent.sm.daemon import Daemon, DaemonOptions
    fabric = topogen.fat_tree_2(4)
    switches = [n.name for n in fabric.switches()]
    keys = {name: 0x5A00000000000000 + i + 1 for i, name in enumerate(switches)}
    sim = SimFabric.from_fabric(fabric, node_caps={n: {"m_key": keys[n], "m_key_protect_bits": level}
                                                   for n in switches})
    t = SimTransport(sim)
    t.keys = mkeys.KeyChain(0, {sim.node(n).guid: keys[n] for n in switches})
    t.serve()
    now = [1000.0]
    d = Daemon(t, DaemonOptions(sweep_interval=0), clock=lambda: now[0])
    d.start()
    full = d.last_sweep["smps"]
    s0 = d.topo.nodes[sim.node("S0").guid]
    assert s0.path == (0, 1, 3)
    sim.unlink("L0", 3)
    for _ in range(4):
        now[0] += 0.5
        d.step(max_wait=0)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"], d.last_sweep
    assert d.known is not None and d.known.topology.nodes[s0.guid].path == (0, 1, 4, 2, 3)
    assert d.last_sweep["problems"] == 0 and d.last_sweep["smps"] < full / 10, (d.last_sweep["smps"], full)


@pytest.mark.parametrize("args", [["query", "portinfo", "0,1,3", "--port", "0"], ["query", "pkeys", "0,1,3"]])
def test_a_get_timeout_after_a_given_key_names_the_mkey(on_sim, args):
    """Level 3 drops a Get with a wrong M_Key: a query that gave a key says so."""
    sim = protected(3)
    r = on_sim(sim, "--mkey", hex(WRONG), "--retries", "0", *args)
    assert r.exit_code == 3 and "no response after 1 tries" in r.stderr
    assert "M_Key-protected (levels 2 and 3 drop Gets too), the key sent was refused" in r.stderr
    assert_no_key(r.stdout + r.stderr, KEY, WRONG)
    r = on_sim(sim, "--retries", "0", "query", "nodeinfo", "0,1,3")  # no key given: a lost link as likely
    assert r.exit_code == 3 and "M_Key" not in r.stderr


def test_trap_repress_carries_the_trap_sources_key():
    """A protected switch's trap (128, a cable cut) is repressed with that switch's M_Key,
    not the trap's 0: delivered to the simulator's SMAs, no TrapRepress is a violation."""
    from smagent.model import topogen
    from smagent.sm.daemon import Daemon, DaemonOptions
    fabric = topogen.fat_tree_2(4)
    switches = [n.name for n in fabric.switches()]
    keys = {name: 0x5A00000000000000 + i + 1 for i, name in enumerate(switches)}
    sim = SimFabric.from_fabric(fabric, node_caps={n: {"m_key": keys[n], "m_key_protect_bits": 1}
                                                   for n in switches})
    t = SimTransport(sim)
    t.keys = mkeys.KeyChain(0, {sim.node(n).guid: keys[n] for n in switches})
    t.serve()
    now = [1000.0]
    d = Daemon(t, DaemonOptions(sweep_interval=0), clock=lambda: now[0])
    d.start()
    t.outbox.clear()
    sim.unlink("L0", 3)
    for _ in range(4):
        now[0] += 0.5
        d.step(max_wait=0)
    reps = [(raw, to) for raw, to in t.outbox if raw[3] == Method.TRAP_REPRESS]
    assert len(reps) == 2 and d.counters.traps == 2
    for raw, to in reps:
        t._answer(raw, to)  # to the switch that trapped: consumed, key-checked
    assert [violations(sim, n) for n in switches] == [0] * len(switches)
