"""PortInfo.ClientReregister when the daemon becomes MASTER (`smagent.sm.reregister`), on the
in-process simulator: one Set with the bit per capable end port on the first sweep of a
mastership, none on later sweeps of the same one, again after a STANDBY takes over or
receives a HANDOVER; the simulator's ports accept the bit and read it back 0, as real ports
do; nothing of it shows as drift in a later plan."""
from __future__ import annotations

import collections

import pytest

from mad import smp as smpcodec
from mad.attributes import CAP_IS_CLIENT_REREGISTRATION, AttrID, PortInfo, SMState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import sweep
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm.state import Control
from smagent.transport.base import Request
from smagent.transport.sim import SimTransport
from test_sm_daemon import Clock, _sent_from, _sminfo_set, run_for


def make(*, caps=1, **kw):
    t = SimTransport(client_reregister=caps)
    t.serve()
    clock = Clock()
    rereg: collections.Counter = collections.Counter()

    def on_send(r: Request) -> None:  # count the Sets carrying the bit, by port
        smp = r.smp
        if smp.method == Method.SET and smp.attribute_id == AttrID.PORT_INFO and \
                smp.attribute(PortInfo).client_reregister:
            node = t._ingress[0]
            for hop in smp.initial_path[1:smp.hop_count + 1]:  # the directed route, walked in the simulator
                node = node.peers[hop][0]
            rereg[(node.name, smp.attribute_modifier & 0xFF)] += 1
    t.on_send = on_send
    return t, Daemon(t, DaemonOptions(**kw), clock=clock), clock, rereg


def end_ports(sim, *, switches=True) -> set:
    """(node name, port) of every end port with a link (and switch port 0): what we expect."""
    out = set()
    for n in sim:
        if n.is_switch:
            if switches:
                out.add((n.name, 0))
        else:
            out |= {(n.name, p) for p in range(1, n.num_ports + 1) if n.peers[p]}
    return out


def test_the_simulated_port_accepts_the_bit_and_reads_it_back_zero():
    t = SimTransport(client_reregister=1)
    ca = t.sim.node("H1")
    assert ca.pi[1].capability_mask & CAP_IS_CLIENT_REREGISTRATION
    assert not SimTransport().sim.node("H1").pi[1].capability_mask & CAP_IS_CLIENT_REREGISTRATION  # ibsim's
    get = t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), portinfo_modifier(1)))).attribute(PortInfo)
    data = PortInfo.LAYOUT.replace(get, port_state=0, port_physical_state=0, client_reregister=1).encode()
    back = t.query(Request(smpcodec.dr(Method.SET, AttrID.PORT_INFO, (0,), portinfo_modifier(1), data)))
    assert back.status_word & 0x7FFF == 0 and back.attribute(PortInfo).client_reregister == 0


def test_once_per_capable_end_port_on_becoming_master_and_never_again():
    t, d, clock, rereg = make(sweep_interval=1)
    d.start()
    assert d.sm.state == SMState.MASTER
    want = end_ports(t.sim)
    assert rereg == collections.Counter({k: 1 for k in want})
    assert d.counters.client_reregisters == len(want)
    peer = t.sim.unlink("L1", 2)  # a repair, then light sweeps: the same mastership
    run_for(d, clock, 3)
    t.sim.link("L1", 2, *peer)
    run_for(d, clock, 3)
    assert d.counters.repairs >= 1 and d.counters.light_sweeps >= 2
    assert sum(rereg.values()) == len(want)  # nothing more
    assert sweep.plan(t, sweep.SweepOptions(force=True)).sets_planned == 0  # a one-shot bit: no drift


@pytest.mark.parametrize("mode,caps,switches,count", [("capable", 0, False, False), ("off", 1, False, False),
                                                      ("all", 0, False, True)])
def test_modes(mode, caps, switches, count):
    """ibsim's ports advertise no bit 25: `capable` sends them nothing, `all` every CA port
    (not switch port 0, which does not advertise it), `off` nothing at all."""
    t, d, _clock, rereg = make(caps=caps, client_reregister=mode)
    d.start()
    assert set(rereg) == (end_ports(t.sim, switches=switches) if count else set())
    assert all(v == 1 for v in rereg.values())


def test_again_after_a_standby_takes_over_a_silent_master():
    t, d, clock, rereg = make(priority=3, poll_interval=1, poll_retries=2)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    assert d.sm.state == SMState.STANDBY and not rereg  # a STANDBY sends nothing
    h5 = t.sim.node("H5")
    del h5.sm[1]  # the master dies
    h5.pi[1].capability_mask &= ~0x2
    run_for(d, clock, 5)
    assert d.sm.state == SMState.MASTER
    assert rereg == collections.Counter({k: 1 for k in end_ports(t.sim)})


def test_again_after_a_handover_received_in_standby():
    t, d, clock, rereg = make(priority=3)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    master = t.sim.node("H5").sm[1]
    t.deliver(smpcodec.encode(_sent_from(d, _sminfo_set(Control.HANDOVER, master.guid, SMState.MASTER), master.guid)))
    d.step(max_wait=0)
    assert d.sm.state == SMState.MASTER
    assert rereg == collections.Counter({k: 1 for k in end_ports(t.sim)})
