"""The other-SM check of a sweep (issue 11 item 1): a MASTER SM on smagent's own port
(OpenSM on the same HCA port) is refused like any other, before the first Set; the
local port is skipped only when the transport itself is the SM there."""
import pytest

from mad.attributes import SMState
from smagent import sweep, topogen
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
