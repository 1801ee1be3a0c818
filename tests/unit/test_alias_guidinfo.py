"""Alias GUIDs reach the ports (in the in-process simulator, whose ports take GUIDInfo
Sets as real ones do): a GUIDInfoRecord Set or Delete the running SM's SA answers is
written into the port's GUIDInfo block by the repair that follows (`SaService.follow`,
`smagent.linkconf.guids`), through the one write path: the block it overwrites is in
the backup, the Set in the journal, `lft restore` puts it back. A port that refuses the
Set (ibsim 0.10's SMA: `guid_info_set=0`) is noted once, never a problem that makes the
daemon sweep again."""
import json
import math
import logging

import pytest

from mad import sa
from mad.header import Method
from mad.sa_records import GUIDInfoRecord
from smagent import api, linkconf as links
from smagent.fdb import journal
from smagent.model import topogen
from smagent.sm import timers
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sweep.options import SweepOptions
from smagent.transport.address import Address
from smagent.transport.sim import SimTransport

ALIAS = 0x0002C90300ABCD01


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _daemon(tmp_path, **caps):
    t = SimTransport(**caps)
    t.serve()
    opts = DaemonOptions(sweep=SweepOptions(state_dir=str(tmp_path / "state")))
    d = Daemon(t, opts, clock=Clock())
    d.start()
    return t, d


def _ca_port(t, d):
    """(sim node, port, LID) of a CA port other than the SM's."""
    sub = d.sa.agent.subnet
    node, port = next((n, p) for n in sorted(sub.nodes.values(), key=lambda n: n.guid) if not n.is_switch
                      for p in n.lid_ports() if n.port_guid(p) != d.sm.guid)
    sim = next(n for n in t.sim.nodes.values() if n.guid == node.guid)
    return sim, port, sub.base_lid(node, port)


def _ask(t, d, method, lid, guids, *indexes):
    rec = GUIDInfoRecord(lid=lid, block_num=0, guids=(list(guids) + [0] * 8)[:8])
    q = sa.request(method, rec, component_mask=GUIDInfoRecord.mask("lid", "block_num", *(f"guids[{i}]" for i in indexes)),
                   transaction_id=7)
    t.outbox.clear()
    t.deliver(q.encode(), Address.gsi(lid))
    d.step(max_wait=0)  # answered, then the repair that follows
    ((raw, _to),) = [(r, a) for r, a in t.outbox if r[1] == sa.SA_CLASS]
    return sa.SaMad.decode(raw)


def test_a_set_alias_reaches_the_port_and_a_delete_clears_it(tmp_path):
    t, d = _daemon(tmp_path)
    sim, port, lid = _ca_port(t, d)
    own = sim.port_guids[port]
    sweeps = d.counters.sweeps
    m = _ask(t, d, Method.SET, lid, [0, ALIAS], 1)
    assert m.status == 0 and m.record(GUIDInfoRecord).guids[:2] == [own, ALIAS]
    assert sim.guids[port][:3] == [own, ALIAS, 0]  # written by the repair that followed
    assert d.counters.sweeps == sweeps + 1 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    m = _ask(t, d, Method.DELETE, lid, [], 1)
    assert m.status == 0 and sim.guids[port][:2] == [own, 0]
    # both Sets journalled, with the block each overwrote
    units = [u for f in sorted((tmp_path / "state" / journal.JOURNALS_DIR).glob("apply-*.journal"))
             for rec in map(json.loads, f.read_text().splitlines()) if rec["event"] == "begin"
             for u in rec["blocks"] if u.get("table") == "guids"]
    assert sorted((u["port"], u["block"], u["old"][1], u["new"][1]) for u in units) == sorted(
        [(port, 0, "0x0000000000000000", f"0x{ALIAS:016x}"), (port, 0, f"0x{ALIAS:016x}", "0x0000000000000000")])
    # a full sweep finds the port as the SA holds it: nothing to write
    d.duties.sweep("test")
    assert d.last_sweep["problems"] == 0 and sim.guids[port][1] == 0


def test_a_port_refusing_the_set_is_noted_once(tmp_path, caplog):
    t, d = _daemon(tmp_path, guid_info_set=0)
    sim, port, lid = _ca_port(t, d)
    with caplog.at_level(logging.WARNING, logger="smagent.sm"):
        assert _ask(t, d, Method.SET, lid, [0, ALIAS], 1).status == 0  # the SA holds it all the same
        assert sim.guids[port][1] == 0 and d.last_sweep["problems"] == 0
        assert d.sa.agent.aliases.refused == {sim.port_guids[port]}
        assert d.timers.at(timers.REPAIR) == math.inf  # no sweep again for it
        sweeps = d.counters.sweeps
        assert _ask(t, d, Method.SET, lid, [0, 0, ALIAS + 1], 2).status == 0
        assert d.counters.sweeps == sweeps  # the port is not asked again: no repair for it
        d.duties.sweep("test")
    assert d.last_sweep["problems"] == 0
    assert [r.message for r in caplog.records if "GUIDInfo" in r.message] == [
        f"alias GUIDs: 1 port(s) refuse SubnSet(GUIDInfo) (e.g. port GUID 0x{sim.port_guids[port]:016x}): "
        "their alias GUIDs are the SA's alone; not asked again"]


@pytest.fixture()
def session(tmp_path):
    state = str(tmp_path / "state")
    s = api.Session(SimTransport(topogen.two_switch()), state_dir=state)
    assert s.sweep(state_dir=state).problems == []
    ca = next(n for n in s.transport.sim.nodes.values() if not n.is_switch)
    return s, state, ca


def test_sweep_backs_up_the_blocks_it_overwrites_and_restore_puts_them_back(session):
    s, state, ca = session
    own = ca.port_guids[1]
    blocks = {0: (own, ALIAS) + (0,) * 6, 2: (0, 0, 0, ALIAS + 2) + (0,) * 4}
    r = s.sweep(state_dir=state, alias_guids={own: blocks})
    assert r.problems == [] and r.summary()["sets"]["guids"] == 2
    assert ca.guids[1][:2] == [own, ALIAS] and ca.guids[1][19] == ALIAS + 2
    saved = [u for sw in json.loads(open(r.backup_file).read())["switches"].values() for u in sw.get("links", ())
             if u["table"] == "guids"]
    assert sorted((u["port"], u["modifier"], u["value"]) for u in saved) == [
        (1, 0, [f"0x{own:016x}"] + ["0x0000000000000000"] * 7), (1, 2, ["0x0000000000000000"] * 8)]
    assert s.sweep(state_dir=state, alias_guids={own: blocks}).link_changes == []  # held: nothing to write
    res = s.lft_restore(r.backup_file)
    assert res.ok, res.problems
    assert ca.guids[1][:2] == [own, 0] and ca.guids[1][19] == 0


def test_guid_block_zero_keeps_the_ports_own_guid(session):
    """GUID 0 of block 0 is read only: whatever the SA says there, the port's own stays."""
    s, state, ca = session
    own = ca.port_guids[1]
    r = s.sweep(state_dir=state, alias_guids={own: {0: (ALIAS + 9, ALIAS) + (0,) * 6}})
    (c,) = r.link_changes
    assert c.new.guids[:2] == [own, ALIAS] and r.problems == []


def test_guids_tables_as_json():
    from mad.attributes import GUIDInfo
    t = GUIDInfo(guids=[1 << 63, 2, 0, 0, 0, 0, 0, 0])
    assert links.table_from_json("guids", links.table_json("guids", t)) == t
    for bad in ([1] * 8, ["0x1"] * 7, ["0xzz"] * 8, ["0x" + "f" * 17] * 8):
        with pytest.raises(ValueError, match="guids"):
            links.table_from_json("guids", bad)
    links.check_modifier("guids", 31)
    with pytest.raises(ValueError):
        links.check_modifier("guids", 32)


def test_a_plan_lists_guid_blocks_and_diff_leaves_them_out(session):
    """`plan --json` records of GUIDInfo (one per block, not grouped); `diff` against such a
    plan compares what snapshots read, which alias GUIDs (the SA's) are not."""
    from smagent.verify import drift
    s, state, ca = session
    own = ca.port_guids[1]
    r = s.sweep(dry_run=True, alias_guids={own: {0: (own, ALIAS) + (0,) * 6}})
    for detail in (True, False):
        (rec,) = [x for x in r.plan_records(detail=detail) if x["table"] == "GUIDInfo"]
        assert (rec["port"], rec["block"], rec["new"][1], rec["action"]) == (1, 0, f"0x{ALIAS:016x}", "update")
    assert ca.guids[1][1] == 0  # a dry run
    assert drift.plan_entries({"plan": [rec]}, r.topology, "plan.json") == {}
