"""The SM state machine (IBA 14.4), pure: rank, the decision after discovery, polling,
the SubnSet(SMInfo) controls and their legality, SM_Key disclosure."""
import pytest

from mad.attributes import SMInfo, SMState
from smagent.sm.statemachine import (
    DEFAULT_SM_KEY, INVALID_VALUE_STATUS, Action, Control, Peer, StateMachine, outranks, reveal_sm_key,
)

ME = 0x20


def sm(priority=5, **kw) -> StateMachine:
    return StateMachine(ME, priority, **kw)


def info(state, guid=0x10, priority=5, key=DEFAULT_SM_KEY):
    return SMInfo(guid=guid, sm_key=key, act_count=0, priority=priority, sm_state=int(state))


@pytest.mark.parametrize("a,b,want", [((6, 0x99), (5, 0x01), True), ((5, 0x01), (5, 0x99), True),
                                      ((5, 0x99), (5, 0x01), False), ((4, 0x01), (5, 0x99), False),
                                      ((5, 0x10), (5, 0x10), False)])
def test_rank_is_priority_then_lower_guid(a, b, want):
    assert outranks(*a, *b) is want


def test_alone_means_master():
    m = sm()
    assert m.state == SMState.DISCOVERING
    assert m.discovered([]) == Action.SWEEP and m.state == SMState.MASTER and m.master is None


def test_a_running_master_keeps_the_subnet_even_if_we_outrank_it():
    m = sm(priority=15)
    low = Peer(0x10, 1, SMState.MASTER)
    assert m.discovered([low]) == Action.POLL and m.state == SMState.STANDBY and m.master is low


@pytest.mark.parametrize("peer_state", [SMState.STANDBY, SMState.DISCOVERING])
def test_a_higher_sm_not_master_makes_us_standby_a_lower_one_does_not(peer_state):
    m = sm(priority=5)
    assert m.discovered([Peer(0x30, 6, peer_state)]) == Action.POLL and m.state == SMState.STANDBY
    m2 = sm(priority=5)
    assert m2.discovered([Peer(0x30, 5, peer_state), Peer(0x10, 4, peer_state)]) == Action.SWEEP
    assert m2.state == SMState.MASTER  # same priority, higher GUID: we win


def test_not_active_peers_are_ignored():
    m = sm(priority=0)
    assert m.discovered([Peer(0x01, 15, SMState.NOT_ACTIVE)]) == Action.SWEEP


def test_master_hands_over_only_to_a_higher_standby():
    m = sm(priority=5)
    m.discovered([])
    assert m.check_peers([Peer(0x30, 9, SMState.DISCOVERING)]) == (Action.NONE, None)
    assert m.check_peers([Peer(0x30, 4, SMState.STANDBY)]) == (Action.NONE, None)
    a, b = Peer(0x30, 9, SMState.STANDBY), Peer(0x31, 12, SMState.STANDBY)
    assert m.check_peers([a, b]) == (Action.HAND_OVER, b)
    m.handed_over(b)
    assert m.state == SMState.STANDBY and m.master is b
    assert m.check_peers([a]) == (Action.NONE, None)  # not MASTER any more


def test_polling_counts_failures_and_gives_up_after_the_retries():
    m = sm(poll_retries=2)
    m.discovered([Peer(0x10, 5, SMState.MASTER)])
    assert m.poll_result(None) == Action.POLL and m.poll_failures == 1
    assert m.poll_result(info(SMState.MASTER)) == Action.POLL and m.poll_failures == 0  # alive again
    assert m.poll_result(None) == Action.POLL
    assert m.poll_result(None) == Action.POLL
    assert m.poll_result(None) == Action.DISCOVER  # more than 2 retries unanswered
    assert m.state == SMState.DISCOVERING and m.master is None


def test_a_polled_master_turned_lower_standby_is_no_longer_alive():
    m = sm(priority=5, poll_retries=0)
    m.discovered([Peer(0x10, 6, SMState.STANDBY)])
    assert m.poll_result(info(SMState.STANDBY, priority=6)) == Action.POLL  # higher standby: keep polling
    assert m.poll_result(info(SMState.STANDBY, priority=1)) == Action.DISCOVER


def test_handover_in_standby_makes_us_master():
    m = sm()
    m.discovered([Peer(0x10, 1, SMState.MASTER)])
    remote = info(SMState.MASTER)
    assert m.check_set(Control.HANDOVER, remote) == 0
    assert m.on_set(Control.HANDOVER, remote) == Action.TAKE_OVER and m.state == SMState.MASTER


@pytest.mark.parametrize("control,sender", [(Control.ACKNOWLEDGE, SMState.MASTER),
                                            (Control.HANDOVER, SMState.STANDBY),
                                            (Control.DISABLE, SMState.DISCOVERING), (0, SMState.MASTER),
                                            (6, SMState.MASTER)])
def test_illegal_controls(control, sender):
    m = sm()
    m.discovered([Peer(0x10, 1, SMState.MASTER)])
    assert m.check_set(control, info(sender)) == INVALID_VALUE_STATUS


def test_controls_by_state():
    master = sm()
    master.discovered([])
    assert master.check_set(Control.ACKNOWLEDGE, info(SMState.STANDBY)) == 0
    assert master.check_set(Control.DISABLE, info(SMState.MASTER)) == INVALID_VALUE_STATUS
    assert master.on_set(Control.HANDOVER, info(SMState.MASTER)) == Action.SWEEP  # the other master lets go
    standby = sm()
    standby.discovered([Peer(0x10, 1, SMState.MASTER)])
    assert standby.on_set(Control.DISCOVER, info(SMState.MASTER)) == Action.DISCOVER
    assert standby.state == SMState.DISCOVERING
    off = sm()
    off.discovered([Peer(0x10, 1, SMState.MASTER)])
    assert off.on_set(Control.DISABLE, info(SMState.MASTER)) == Action.NONE and off.state == SMState.NOT_ACTIVE
    assert off.check_set(Control.STANDBY, info(SMState.MASTER)) == 0
    sender = Peer(0x10, 1, SMState.MASTER)
    assert off.on_set(Control.STANDBY, info(SMState.MASTER), sender) == Action.POLL
    assert off.state == SMState.STANDBY and off.master is sender
    assert [t.new for t in off.transitions] == [SMState.STANDBY, SMState.NOT_ACTIVE, SMState.STANDBY]


def test_sminfo_and_key_disclosure():
    m = sm(priority=9, sm_key=0xABC)
    v = m.sminfo(0x1_0000_0005)
    assert (v.guid, v.priority, v.sm_state, v.sm_key, v.act_count) == (ME, 9, SMState.DISCOVERING, 0xABC, 5)
    assert m.sminfo(1, reveal_key=False).sm_key == 0
    assert m.sminfo(1, state=SMState.STANDBY).sm_state == SMState.STANDBY


@pytest.mark.parametrize("request_key,port_mkey,bits,request_mkey,want", [
    (0, 0, 0, 0, False),          # no M_Key on our port: nobody is authenticated by it (OpenSM reveals here)
    (0x77, 0, 0, 0, False),       # a wrong key in the request proves nothing
    (0xABC, 0, 0, 0, True),       # the requester showed our key: nothing it does not know
    (0, 0x55, 0, 0x55, False),    # protection bits 0: anyone may read that M_Key
    (0, 0x55, 1, 0x55, True),     # protected M_Key matched (IBA 14.2.4 authentication)
    (0, 0x55, 2, 0x66, False),
])
def test_a_secret_key_goes_only_to_a_requester_that_proves_it(request_key, port_mkey, bits, request_mkey, want):
    assert reveal_sm_key(0xABC, request_key, port_mkey, bits, request_mkey) is want


@pytest.mark.parametrize("key", [0, DEFAULT_SM_KEY])
def test_public_keys_are_returned_to_everyone(key):
    assert reveal_sm_key(key, 0, 0, 0, 0) and reveal_sm_key(key, 0x99, 0x55, 2, 0x66)


@pytest.mark.parametrize("control", list(Control))
@pytest.mark.parametrize("state", [SMState.STANDBY, SMState.MASTER, SMState.DISCOVERING])
def test_a_set_with_a_wrong_key_is_refused_whatever_it_asks(control, state):
    m = sm(sm_key=0x99)
    m.state = int(state)
    sender = SMState.STANDBY if control == Control.ACKNOWLEDGE else SMState.MASTER
    for key in (0, 1, 0x98):
        assert m.set_verdict(control, info(sender, guid=0xDEAD, key=key)) == (INVALID_VALUE_STATUS, "wrong SM_Key")
    assert m.set_verdict(control, None) == (INVALID_VALUE_STATUS, "no SMInfo in the request")
    status, why = m.set_verdict(control, info(sender, key=0x99))  # the right key: legality decides
    assert (status == 0) == (why == "")


def test_a_set_must_come_from_the_port_of_the_sm_it_names():
    m = sm()
    m.discovered([Peer(0x10, 9, SMState.MASTER)])
    disable = info(SMState.MASTER, guid=0x10)
    assert m.set_verdict(Control.DISABLE, disable, 0x10, sender_known=True) == (0, "")
    assert m.set_verdict(Control.DISABLE, disable, 0x77, sender_known=True) == (
        INVALID_VALUE_STATUS, "sent from port 0x0000000000000077, not from the SM it names")
    assert m.set_verdict(Control.DISABLE, disable, None, sender_known=True)[1] == \
        "sent from an unknown port, not from the SM it names"
    assert m.set_verdict(Control.DISABLE, disable, None) == (0, "")  # no topology yet: the key decides


def test_is_peer_same_or_hidden_key():
    m = sm(sm_key=0x99)
    assert m.is_peer(0x99) and m.is_peer(0) and not m.is_peer(1) and not m.is_peer(0x98)
    assert m.new_stranger(0x10) and not m.new_stranger(0x10) and m.new_stranger(0x11)  # warned once each


def test_an_sm_with_another_key_is_neither_master_nor_standby_for_us():
    m = sm(priority=9, sm_key=0x99)
    assert m.discovered([Peer(0x10, 0, SMState.MASTER, sm_key=1), Peer(0x11, 15, SMState.STANDBY, sm_key=1)]) \
        == Action.SWEEP and m.state == SMState.MASTER
    assert m.check_peers([Peer(0x11, 15, SMState.STANDBY, sm_key=1), Peer(0x10, 15, SMState.MASTER, sm_key=7)]) \
        == (Action.NONE, None)
    hidden = Peer(0x12, 15, SMState.STANDBY)  # key hidden (0): a peer, we cannot tell
    assert m.check_peers([hidden]) == (Action.HAND_OVER, hidden)


def test_a_master_yields_to_a_higher_master_not_to_a_lower_one():
    m = sm(priority=5)
    m.discovered([])
    assert m.check_peers([Peer(0x30, 4, SMState.MASTER)]) == (Action.NONE, None)
    assert m.check_peers([Peer(0x30, 5, SMState.MASTER)]) == (Action.NONE, None)  # same priority, higher GUID
    higher = Peer(0x10, 5, SMState.MASTER)
    assert m.check_peers([higher]) == (Action.HAND_OVER, higher)
    m.handed_over(higher)
    assert m.state == SMState.STANDBY and m.poll_result(info(SMState.MASTER)) == Action.POLL


def test_priority_range():
    with pytest.raises(ValueError, match="0..15"):
        StateMachine(1, 16)
