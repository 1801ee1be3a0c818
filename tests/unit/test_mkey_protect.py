"""M_Key protection set by smagent (`--mkey-protect`, `smagent.config.mkeys.Protection`,
`smagent.sweep.protect`), on the in-process simulator, which enforces M_Keys and the lease
(IBA 14.2.4): every end port gets M_Key, M_KeyProtectBits and M_KeyLeasePeriod in one
SubnSet(PortInfo); another host without the key is refused; a restart with the state
directory sends no SMP with a wrong key; a restart without it waits out the lease and
recovers; the running SM repairs, hands over and reports trap 256 with protection on.

The fabric is fixtures/two-switch.net: the SM on Hca1 port 1, Hca1/Hca3 on Switch1,
Hca2/Hca4 on Switch2, Switch1 ports 3 and 5 cabled to Switch2 ports 3 and 5.
"""
import json
import logging
import os
import pathlib
import stat

import pytest

from mad import smp as smpcodec
from mad.attributes import AttrID, PortInfo, PortState, SMState
from mad.header import Method
from smagent.config import mkeys
from smagent.errors import BadInput
from smagent.sim import SimFabric
from smagent.sweep import protect
from smagent.transport import Request
from smagent.transport.sim import SimTransport

TWO_SW = pathlib.Path(__file__).parents[2] / "fixtures" / "two-switch.net"
KEY = 0x5EC2E7C0FFEE0042
OTHER = 0x0BADC0DE0BADC0DE
SECRET = b"a subnet secret of more than 16 bytes"


def key_forms(key: int) -> list[str]:
    return [f"{key:x}", f"{key:016x}", str(key)]


def assert_no_key(text: str, *keys: int) -> None:
    for k in keys:
        for form in key_forms(k):
            assert form not in text.lower(), "a key leaked"


def end_ports(sim):
    for n in sim:
        for p in ([0] if n.is_switch else range(1, n.num_ports + 1)):
            if n.is_switch or n.peers[p] is not None:
                yield n, p


def guards(sim) -> dict:
    return {(n.name, p): (n.pi[p].m_key, n.pi[p].m_key_protect_bits, n.pi[p].m_key_lease_period)
            for n, p in end_ports(sim)}


def violations(sim) -> dict:
    return {(n.name, p): n.pi[p].m_key_violations for n in sim for p in range(n.num_ports + 1)
            if n.pi[p].m_key_violations}


def all_active(sim) -> bool:
    return all(n.state[p] == PortState.ACTIVE for n in sim for p in range(1, n.num_ports + 1) if n.peers[p])


@pytest.fixture
def on_sim(cli, monkeypatch):
    """`on_sim(sim, *args)`: the CLI on the in-process simulator `sim` (every invocation
    shares it, as successive commands share a live fabric, each a new process)."""
    def run(sim: SimFabric, *args):
        monkeypatch.setattr(SimFabric, "load", classmethod(lambda cls, src=None, **kw: sim))
        return cli("--transport", "sim", "--topology", TWO_SW, *args)

    return run


@pytest.fixture
def portinfo_sets(monkeypatch):
    """Every SubnSet(PortInfo) the simulator is handed, decoded: [(target, PortInfo)]."""
    seen: list[tuple[str, PortInfo]] = []
    handle = SimFabric.handle

    def spy(self, raw, ingress, *a, **kw):
        smp = smpcodec.decode(raw)
        if smp.method == Method.SET and smp.attribute_id == AttrID.PORT_INFO:
            seen.append((f"{smp.target()} {smp.attribute_modifier}", smp.attribute(PortInfo)))
        return handle(self, raw, ingress, *a, **kw)

    monkeypatch.setattr(SimFabric, "handle", spy)
    return seen


@pytest.fixture
def secret_file(tmp_path):
    f = tmp_path / "mkey.secret"
    f.write_bytes(SECRET + b"\n")
    return str(f)


# -- the policy and the file -----------------------------------------------------------------------------------
def test_protection_is_checked_and_never_shows_its_key():
    p = mkeys.Protection(level=2, lease=30, key=KEY)
    assert p.fields(0x1234) == {"m_key": KEY, "m_key_protect_bits": 2, "m_key_lease_period": 30}
    assert_no_key(repr(p) + str(p), KEY)
    for bad, says in [(dict(level=4, key=KEY), "0, 1, 2 or 3"), (dict(lease=70000, key=KEY), "0 .. 65535"),
                      (dict(level=2), "needs a key"), (dict(secret=b"short"), "at least 16 bytes")]:
        with pytest.raises(BadInput, match=says):
            mkeys.Protection(**bad)


def test_per_node_keys_are_hmac_of_the_guid():
    import hashlib
    import hmac
    p = mkeys.Protection(secret=SECRET)
    want = int.from_bytes(hmac.new(SECRET, (0x200001).to_bytes(8, "big"), hashlib.sha256).digest()[:8], "big")
    assert p.key_of(0x200001) == want and p.key_of(0x200000) != want
    assert mkeys.Protection(secret=SECRET + b"x").key_of(0x200001) != want
    assert_no_key(repr(p), want)


def test_guid2mkey_round_trip_and_bad_lines(tmp_path):
    f = tmp_path / "guid2mkey"
    a = mkeys.Assigned({0x200000: KEY, 0x100000: OTHER}, {0x200000: [(0, 1), (0, 1, 3, 3)], 0x100000: [(0,)]})
    mkeys.save_guid2mkey(f, a)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert mkeys.load_guid2mkey(f) == a
    assert mkeys.load_guid2mkey(tmp_path / "absent") == mkeys.Assigned()
    f.write_text(f"0x200000 {KEY:#x} 0,1\n0x200001 {OTHER:x}zz 0,1,3\n")
    with pytest.raises(mkeys.MKeyFileError) as e:
        mkeys.load_guid2mkey(f)
    assert f"{f}:2:" in str(e.value)
    assert_no_key(str(e.value), KEY, OTHER)


# -- setting it ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [1, 2])
def test_every_end_port_gets_key_bits_and_lease_in_one_set(on_sim, portinfo_sets, tmp_path, level):
    sim = SimFabric.load(TWO_SW)
    state = tmp_path / "state"
    r = on_sim(sim, "--mkey", hex(KEY), "sweep", "--mkey-protect", str(level), "--mkey-lease", "30",
               "--state-dir", str(state))
    assert r.exit_code == 0, r.stderr
    assert set(guards(sim).values()) == {(KEY, level, 30)}
    assert all_active(sim) and violations(sim) == {}
    # IBA C14-22: the Set that installs the key carries the protect bits and the lease too
    installing = [(where, pi) for where, pi in portinfo_sets if pi.m_key == KEY]
    assert len(installing) >= len(guards(sim))
    assert all((pi.m_key_protect_bits, pi.m_key_lease_period) == (level, 30) for _w, pi in installing)
    assert not [w for w, pi in portinfo_sets if pi.m_key_protect_bits == level and pi.m_key != KEY]
    f = state / "guid2mkey"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert set(mkeys.load_guid2mkey(f).keys) == {n.guid for n in sim if n.is_switch or n.peers[1]}
    assert_no_key(r.stdout + r.stderr, KEY)
    # converged: a second sweep changes nothing, with no refused SMP
    r = on_sim(sim, "--mkey", hex(KEY), "sweep", "--mkey-protect", str(level), "--mkey-lease", "30",
               "--state-dir", str(state), "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["plan"] == [] and violations(sim) == {}


def test_plan_text_and_json_hide_the_key(on_sim, tmp_path):
    sim = SimFabric.load(TWO_SW)
    for extra in ([], ["--json"], ["--json", "--detail"]):
        r = on_sim(sim, "-v", "--mkey", hex(KEY), "sweep", "--mkey-protect", "2", "--dry-run", *extra)
        assert r.exit_code == 0, r.stderr
        assert "m_key_protect_bits" in r.stdout and "m_key" in r.stdout
        assert_no_key(r.stdout + r.stderr, KEY)
        if "--json" in extra:
            plan = json.loads(r.stdout)["plan"]
            hidden = {(c["old"], c["new"]) for c in plan if c.get("field") == "m_key"} if "--detail" in extra \
                else {tuple(c["fields"]["m_key"]) for c in plan if "m_key" in c.get("fields", {})}
            assert hidden == {("(not shown)", "(not shown)")}


def test_options_are_refused_before_any_smp(on_sim, tmp_path):
    sim = SimFabric.load(TWO_SW)
    for args, says in [(["--mkey-protect", "2"], "needs a key"), (["--mkey-lease", "5"], "go with --mkey-protect"),
                       (["--mkey-protect", "2", "--mkey-secret-file", str(tmp_path / "none")], "--mkey-secret-file")]:
        r = on_sim(sim, "sweep", *args)
        assert r.exit_code == 2 and says in r.stderr, r.stderr
    assert sim.counters["smps"] == 0


def _ask(t, method, path, m_key, port=0):
    (r,) = t.execute([Request(smpcodec.dr(method, AttrID.PORT_INFO, path, port, PortInfo() if method == Method.SET
                                          else None, m_key=m_key))], retries=0)
    return r


@pytest.mark.parametrize("level", [1, 2])
def test_another_host_without_the_key_is_refused(on_sim, level):
    sim = SimFabric.load(TWO_SW)
    assert on_sim(sim, "--mkey", hex(KEY), "sweep", "--mkey-protect", str(level)).exit_code == 0
    intruder = SimTransport(sim, "Hca2:1", attach_sm=False)  # another host, Switch2 one hop away
    get = _ask(intruder, Method.GET, (0, 1), OTHER)
    if level == 2:
        assert not get.ok  # refused: no answer at all
    else:
        assert get.ok and get.value(PortInfo).m_key == 0  # level 1: answered, the M_Key reads 0
    assert not _ask(intruder, Method.SET, (0, 1), OTHER).ok
    assert sim.node("Switch2").pi[0].m_key_violations == (2 if level == 2 else 1)
    assert set(guards(sim).values()) == {(KEY, level, mkeys.LEASE_DEFAULT)}  # nothing changed
    assert _ask(intruder, Method.GET, (0, 1), KEY).value(PortInfo).m_key == KEY  # the key opens it


# -- restarts -----------------------------------------------------------------------------------------------------
def test_restart_with_the_state_directory_sends_no_refused_smp(on_sim, tmp_path, secret_file):
    """Per-node keys at level 2: a restarted SM does not know who is behind each path
    until it asks, and a wrong key is refused: guid2mkey's paths give it the key first."""
    sim = SimFabric.load(TWO_SW)
    args = ["sweep", "--mkey-protect", "2", "--mkey-secret-file", secret_file, "--state-dir", str(tmp_path / "s")]
    assert on_sim(sim, *args).exit_code == 0
    p = mkeys.Protection(secret=SECRET)
    assert {k: v[0] == p.key_of(sim.node(k[0]).guid) for k, v in guards(sim).items()} == \
        {k: True for k in guards(sim)}
    assert len({v[0] for v in guards(sim).values()}) == len({n for n, _p in guards(sim)})  # one key per node
    sim.node("Switch2").state[1] = PortState.INIT  # something to do: Hca2's link re-trained
    sim.node("Hca2").state[1] = PortState.INIT
    r = on_sim(sim, *args)
    assert r.exit_code == 0, r.stderr
    assert violations(sim) == {} and all_active(sim)


@pytest.fixture
def fake_time(monkeypatch):
    """The simulator's lease clock, advanced by the sweep's waits (nothing really sleeps)."""
    now = [1000.0]
    waits: list[float] = []

    def sleep(s):
        waits.append(s)
        now[0] += s

    monkeypatch.setattr(protect.time, "sleep", sleep)
    return now, waits


def test_restart_without_the_state_directory_recovers_after_the_lease(on_sim, tmp_path, fake_time, caplog):
    now, waits = fake_time
    sim = SimFabric.load(TWO_SW)
    sim.clock = lambda: now[0]
    assert on_sim(sim, "sweep", "--mkey-protect", "2", "--mkey-secret-file", _secret(tmp_path, b"x" * 20),
                  "--mkey-lease", "40", "--state-dir", str(tmp_path / "lost")).exit_code == 0
    assert {v[1:] for v in guards(sim).values()} == {(2, 40)}
    now[0] += 3600
    # the state directory and the secret are gone: a new secret, a new directory
    caplog.set_level(logging.WARNING, "smagent.sweep")
    r = on_sim(sim, "sweep", "--mkey-protect", "2", "--mkey-secret-file", _secret(tmp_path, b"y" * 20),
               "--mkey-lease", "40", "--state-dir", str(tmp_path / "new"))
    assert r.exit_code == 0, r.stderr
    rounds = [n for n in caplog.messages if "waiting out the M_Key lease" in n]
    assert 1 <= len(rounds) <= 4 and sum(waits) == pytest.approx(41 * len(rounds))  # one per layer of nodes
    assert "waiting out the M_Key lease (40 s)" in caplog.text
    p = mkeys.Protection(secret=b"y" * 20)
    assert all(v == (p.key_of(sim.node(k[0]).guid), 2, 40) for k, v in guards(sim).items())
    assert all_active(sim)
    assert_no_key(r.stdout + r.stderr + caplog.text, *{v[0] for v in guards(sim).values()})


def _secret(tmp_path, data: bytes) -> str:
    f = tmp_path / f"secret-{data[:1].decode()}"
    f.write_bytes(data)
    return str(f)


def test_a_lease_of_0_is_not_waited_for_forever(on_sim, tmp_path, fake_time):
    now, waits = fake_time
    sim = SimFabric.load(TWO_SW, node_caps={"Switch2": {"m_key": OTHER, "m_key_protect_bits": 2,
                                                        "m_key_lease_period": 0}})
    sim.clock = lambda: now[0]
    r = on_sim(sim, "--mkey", hex(KEY), "sweep", "--mkey-protect", "2", "--mkey-lease", "0")
    assert r.exit_code == 3 and "DR 0,1,3" in r.stderr and waits == []
    assert_no_key(r.stdout + r.stderr, KEY, OTHER)


# -- the running SM -----------------------------------------------------------------------------------------------
def _daemon(tmp_path, protection, **kw):
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent import sweep as sweepmod
    t = SimTransport()
    t.serve()
    now = [1000.0]
    t.sim.clock = lambda: now[0]
    opts = DaemonOptions(state_dir=str(tmp_path / "state"), sweep=sweepmod.SweepOptions(mkey_protection=protection),
                         **kw)
    return t, Daemon(t, opts, clock=lambda: now[0]), now


def test_the_daemon_repairs_a_cut_with_protection_on(tmp_path):
    t, d, now = _daemon(tmp_path, mkeys.Protection(level=2, lease=60, secret=SECRET), sweep_interval=0)
    d.start()
    sim = t.sim
    assert {v[1:] for v in guards(sim).values()} == {(2, 60)} and violations(sim) == {}
    full = d.last_sweep["smps"]
    sw = sim.node("L1")
    port = next(p for p in range(1, sw.num_ports + 1) if sw.peers[p] and sw.peers[p][0].is_switch)
    sim.unlink("L1", port)
    for _ in range(4):
        now[0] += 0.5
        d.step(max_wait=0)
    assert d.counters.repairs == 1 and d.last_sweep["problems"] == 0, d.last_sweep
    assert d.last_sweep["smps"] < full and violations(sim) == {}


def test_the_daemon_hands_over_with_protection_on(tmp_path):
    t, d, now = _daemon(tmp_path, mkeys.Protection(level=2, lease=60, key=KEY), priority=3, poll_interval=1)
    t.keys.default = KEY
    d.start()
    assert d.sm.state == SMState.MASTER and {v[0] for v in guards(t.sim).values()} == {KEY}
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.STANDBY)
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3, 3, 1))))
    d.step(max_wait=0)
    assert t.sim.node("H5").sm[1].sm_state == SMState.MASTER  # our HANDOVER got through, keyed
    assert d.sm.state == SMState.STANDBY and d.counters.handovers_sent == 1
    for _ in range(6):
        now[0] += 0.5
        d.step(max_wait=0)
    assert d.counters.poll_failures == 0 and violations(t.sim) == {}


def test_trap_256_is_logged_without_the_key_and_counted(tmp_path, caplog):
    t, d, now = _daemon(tmp_path, mkeys.Protection(level=2, lease=60, key=KEY), sweep_interval=0)
    t.keys.default = KEY
    d.start()
    caplog.set_level(logging.INFO, "smagent.sm")
    victim = t.sim.node("H8").peers[1][0]  # H8's leaf switch, protected now
    intruder = SimTransport(t.sim, "H8:1", attach_sm=False)  # another host, with a LID
    lid = victim.pi[0].lid
    (r,) = intruder.execute([Request(smpcodec.lid_routed(Method.SET, AttrID.PORT_INFO, 0, PortInfo(), m_key=OTHER),
                                     dlid=lid)], retries=0)
    assert not r.ok
    now[0] += 0.1
    d.step(max_wait=0)
    assert d.counters.bad_m_keys == 1 and d.status()["counters"]["bad_m_keys"] == 1
    from smagent.commands import status_cmd
    assert "traps 1 (1 bad M_Key)" in "\n".join(status_cmd.lines(d.status()))
    line = next(r.getMessage() for r in caplog.records if "bad M_Key" in r.getMessage())
    h8 = t.sim.port_lid(("H8", 1))
    assert f"from LID {lid}: LID {h8} sent SubnSet(PORT_INFO" in line, line
    assert_no_key(caplog.text + json.dumps(d.status()), KEY, OTHER)


def test_a_lost_answer_to_the_set_that_changed_the_key_is_recovered(on_sim, monkeypatch, secret_file):
    """Switch2 applies the Set that installs its key but the answer is lost: the retry
    (old key) is refused, so the sweep asks once with the new key, learns it, and goes on."""
    sim = SimFabric.load(TWO_SW)
    new = mkeys.Protection(secret=SECRET).key_of(sim.node("Switch2").guid)
    handle = SimFabric.handle
    lost = []

    def lose_one_answer(self, raw, ingress, *a, **kw):
        out = handle(self, raw, ingress, *a, **kw)
        smp = smpcodec.decode(raw)
        if (not lost and smp.method == Method.SET and smp.attribute_id == AttrID.PORT_INFO
                and smp.target() == "DR 0,1,3" and smp.attribute(PortInfo).m_key == new):
            lost.append(smp)
            return None
        return out

    monkeypatch.setattr(SimFabric, "handle", lose_one_answer)
    r = on_sim(sim, "sweep", "--mkey-protect", "2", "--mkey-secret-file", secret_file, "--json")
    assert lost and r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["problems"] == []
    assert guards(sim)[("Switch2", 0)] == (new, 2, mkeys.LEASE_DEFAULT) and all_active(sim)


def test_a_desired_state_asks_for_protection(on_sim, tmp_path, secret_file):
    sim = SimFabric.load(TWO_SW)
    ds = tmp_path / "desired.yaml"
    ds.write_text(f"mkey_protection: {{level: 2, lease: 45, secret_file: {secret_file}}}\n")
    r = on_sim(sim, "apply", str(ds), "--state-dir", str(tmp_path / "s"))
    assert r.exit_code == 0, r.stderr
    p = mkeys.Protection(secret=SECRET)
    assert all(v == (p.key_of(sim.node(k[0]).guid), 2, 45) for k, v in guards(sim).items())
    key_file = tmp_path / "subnet.key"
    key_file.write_text(f"{KEY:#x}\n")
    for text, says in [("mkey_protection: {level: 2}", "exactly one of secret_file"),
                       (f"mkey_protection: {{level: 5, key_file: {key_file}}}", "0, 1, 2 or 3"),
                       (f"mkey_protection: {{key: {KEY:#x}}}", "unknown key(s) 'key'"),
                       (f"mkey_protection: {{key_file: {tmp_path / 'absent'}}}", "key_file")]:
        ds.write_text(text + "\n")
        r = on_sim(SimFabric.load(TWO_SW), "apply", str(ds))
        assert r.exit_code == 2 and says in r.stderr, r.stderr
        assert_no_key(r.stderr, KEY)


def test_guid2mkey_serves_as_the_key_file_of_other_commands(on_sim, tmp_path, secret_file):
    sim = SimFabric.load(TWO_SW)
    state = tmp_path / "s"
    assert on_sim(sim, "sweep", "--mkey-protect", "2", "--mkey-secret-file", secret_file,
                  "--state-dir", str(state)).exit_code == 0
    r = on_sim(sim, "--mkey-file", str(state / "guid2mkey"), "verify", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["ok"] is True
    assert violations(sim) == {}  # every SMP, discovery's first NodeInfos included, had the key
    assert on_sim(sim, "verify").exit_code == 3 and violations(sim)  # without it: refused, counted


def test_a_new_subnet_key_replaces_the_old_one_without_a_refused_smp(on_sim, tmp_path):
    sim = SimFabric.load(TWO_SW)
    state = str(tmp_path / "s")
    assert on_sim(sim, "--mkey", hex(OTHER), "sweep", "--mkey-protect", "2", "--state-dir", state).exit_code == 0
    r = on_sim(sim, "--mkey", hex(KEY), "sweep", "--mkey-protect", "2", "--state-dir", state)
    assert r.exit_code == 0, r.stderr
    assert set(guards(sim).values()) == {(KEY, 2, mkeys.LEASE_DEFAULT)} and violations(sim) == {}
    assert set(mkeys.load_guid2mkey(pathlib.Path(state) / "guid2mkey").keys.values()) == {KEY}
    assert_no_key(r.stdout + r.stderr, KEY, OTHER)


@pytest.mark.parametrize("args, says", [(["--mkey-protect", "2"], "needs a key"),
                                        (["--mkey-secret-file", "x"], "go with --mkey-protect"),
                                        (["--mkey-protect", "4"], "--mkey-protect")])
def test_run_refuses_bad_protection_options_before_starting(cli, tmp_path, args, says):
    r = cli("--transport", "sim", "--topology", TWO_SW, "run", "--state-dir", tmp_path / "s", *args)
    assert r.exit_code == 2 and says in r.stderr, r.stderr
