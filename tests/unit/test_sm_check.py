"""The other-SM check of a sweep (issue 11 item 1): a MASTER SM on smagent's own port
(OpenSM on the same HCA port) is refused like any other, before the first Set; the
local port is skipped only when the transport itself is the SM there."""
import pytest

from mad.attributes import SMState
from smagent import sweep
from smagent.model import topogen
from smagent.transport.sim import SimTransport


def _other_sm_on_local_port(local=None, state=SMState.MASTER):
    t = SimTransport(topogen.two_switch(), local=local, attach_sm=False)
    t.sim.attach_sm(t.local, guid=0xABCD, priority=7, state=state)
    return t


@pytest.mark.parametrize("local", [None, "Switch1"])
def test_master_on_the_local_port_is_refused_before_any_set(local):
    t = _other_sm_on_local_port(local)
    assert not t.owns_sm_port
    with pytest.raises(sweep.OtherMasterSM) as e:
        sweep.sweep(t, sweep.SweepOptions())
    msg = str(e.value)
    assert "another subnet manager is MASTER" in msg and "SM GUID 0x000000000000abcd" in msg, msg
    assert "priority 7" in msg and "state MASTER" in msg and "--force" in msg
    assert t.local[0] in msg  # names the node it sits on
    assert (e.value.guid, e.value.priority) == (0xABCD, 7) and e.value.node.startswith(t.local[0])
    assert t.stats.sets_sent() == []


def test_force_proceeds_past_a_master_on_the_local_port():
    t = _other_sm_on_local_port()
    r = sweep.sweep(t, sweep.SweepOptions(force=True))
    assert r.problems == [] and r.activations > 0
    assert any(n.startswith("--force: proceeding") and "0x000000000000abcd" in n for n in r.notes), r.notes


def test_a_standby_on_the_local_port_is_a_note():
    t = _other_sm_on_local_port(state=SMState.STANDBY)
    r = sweep.sweep(t, sweep.SweepOptions())
    assert any(n.startswith("other SM present") and "state STANDBY" in n for n in r.notes), r.notes


def test_the_transports_own_sm_is_not_another():
    t = SimTransport(topogen.two_switch())  # attaches its SM on the local port
    assert t.owns_sm_port
    t.sim.attach_sm(t.local, state=SMState.MASTER)  # as `smagent run` would report itself
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == [] and not any("SM" in n for n in r.notes), r.notes


# -- the same check on every table write (the house issue: one master-SM check) -------------------
def _swept_then_master_on_local_port(owns: bool):
    """A fabric swept by this transport (every MasterSMLID names our port), then an SM
    on our own port that answers MASTER: OpenSM on this HCA (``owns`` False), or the
    transport's own SM (`smagent run`, ``owns`` True)."""
    from smagent import api
    t = SimTransport(topogen.two_switch(), attach_sm=owns)
    assert sweep.sweep(t, sweep.SweepOptions()).problems == []
    t.sim.attach_sm(t.local, guid=0xABCD, priority=7, state=SMState.MASTER)
    assert t.owns_sm_port == owns
    return t, api.Session(t)


def _sets(t) -> int:
    return sum(v for k, v in t.stats.snapshot()["by_kind"].items() if k.startswith("SubnSet"))


def _lft_set(s, **kw):  # into a port without a cable: allowed, the edit check is not what these test
    return s.lft_set("Switch1", 6, 4 if s.lft_show("Switch1").table[6] != 4 else 5, allow_defects=True, **kw)


def _lft_load(s, **kw):
    """Switch1's LID 6 moved to another port, loaded from a dump."""
    dump = s.lft_dump()
    port = 4 if s.lft_show("Switch1").table[6] != 4 else 5
    head, sep, rest = dump.partition("0x0006 ")
    return s.lft_load(head + sep + f"{port:03d}" + rest[3:], allow_defects=True, **kw)


@pytest.mark.parametrize("write", [
    _lft_set,
    lambda s, **kw: s.mft_set("Switch1", 0xC00B, [1], allow_defects=True, **kw),
    _lft_load,
], ids=["lft_set", "mft_set", "lft_load"])
def test_table_writes_refuse_a_master_on_the_local_port(write):
    """`lft set` / `mft set` / load under OpenSM MASTER on smagent's own port: refused
    (exit 4) before the first Set, as the sweep refuses; a dry run warns; --force writes."""
    t, s = _swept_then_master_on_local_port(owns=False)
    before = _sets(t)
    with pytest.raises(sweep.OtherMasterSM) as e:
        write(s)
    assert e.value.exit_code == 4 and (e.value.guid, e.value.priority) == (0xABCD, 7)
    assert "a subnet manager is MASTER" in str(e.value) and "--force" in str(e.value)
    assert _sets(t) == before  # refused before the first Set
    assert any("MASTER" in n for n in write(s, dry_run=True).notes) and _sets(t) == before
    forced = write(s, force=True)
    assert forced.ok and _sets(t) > before and any("MASTER" in n for n in forced.notes)


def test_table_writes_pass_the_transports_own_sm():
    t, s = _swept_then_master_on_local_port(owns=True)
    r = _lft_set(s)
    assert r.ok and r.sets_sent["lft_blocks"] == 1 and not any("MASTER" in n for n in r.notes), r.notes
