"""The audit (issue 40.4, `smagent.sm.audit`) on the in-process simulator: an LFT entry and
a host's LID changed behind the daemon's back are read back by the light sweeps' audit
Gets, counted, and repaired; the idle daemon sends at most `audit_share` more SMPs."""
from __future__ import annotations

from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm import audit, metrics_server
from smagent.transport.sim import SimTransport


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(**kw):
    t = SimTransport()
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=2, **kw), clock=clock)
    d.start()
    return t, d, clock


def run_for(d, clock, seconds, step=0.5):
    end = clock.now + seconds
    while clock.now < end:
        clock.now += step
        d.step(max_wait=0)


def full_pass_seconds(d) -> float:
    """Light sweeps enough for every item at the daemon's share, in clock seconds."""
    per_sweep = d.opts.audit_share * len(d.t.sim.switches())
    return (len(audit.items(d.known)) / per_sweep + 2) * d.opts.sweep_interval


def test_a_tampered_lft_entry_is_found_counted_and_repaired():
    t, d, clock = make(audit_share=4.0)
    sim = t.sim
    lid = sim.port_lid(("H2", 1))
    lft = sim.lft("L3")
    good = lft[lid]
    lft[lid] = 0xFF  # behind the daemon's back: H2 black-holed at L3
    run_for(d, clock, full_pass_seconds(d))
    assert d.counters.drifts_found == 1 and d.counters.drifts_repaired == 1
    assert sim.lft("L3")[lid] == good
    assert "audit found drift: L3 LFT block" in d.last_sweep["why"] and d.last_sweep["lft_blocks"] == 1
    st = d.status()
    assert st["audit"]["drifts"] == 1 and "L3 LFT block 0" in st["audit"]["last"][0]
    text = metrics_server.status_text(st)
    assert "smagent_drift_repaired_total 1.0" in text


def test_a_hosts_lid_changed_behind_our_back_is_given_back():
    t, d, clock = make(audit_share=4.0)
    sim = t.sim
    h1, h2 = sim.port_lid(("H1", 1)), sim.port_lid(("H2", 1))
    sim.set_lid("H2", 1, h1)  # a host's PortInfo Set moved H2 onto H1's LID
    run_for(d, clock, full_pass_seconds(d))
    assert sim.port_lid(("H2", 1)) == h2
    assert d.counters.drifts_found == 1 and d.counters.drifts_repaired == 1
    assert d.last_sweep["incremental"] and d.last_sweep["portinfo"] >= 1


def test_the_idle_audit_stays_within_its_share():
    t, d, clock = make()  # the default share: 1 %
    switches = len(t.sim.switches())
    sent = t.stats.sent
    run_for(d, clock, 200 * 2, step=1.0)  # 200 light sweeps
    light = d.counters.light_sweeps * switches
    assert d.counters.light_sweeps == 200 and d.counters.sweeps == 1
    assert d.audit.reads == int(0.01 * light)
    assert t.stats.sent - sent == light + d.audit.reads


def test_no_audit_when_its_share_is_zero():
    t, d, clock = make(audit_share=0)
    run_for(d, clock, 20)
    assert d.audit.reads == 0


def test_a_foreign_mft_entry_is_found_and_not_claimed_repaired(caplog):
    """An MLID outside the configured groups is kept by the sweep (unless pruning): the
    audit says so instead of counting a repair."""
    t, d, clock = make(audit_share=4.0)
    sw = t.sim.node("L1")
    sw.mft[5] = 0b110  # MLID 0xc005 flooded to ports 1 and 2 behind our back
    run_for(d, clock, full_pass_seconds(d))
    assert d.counters.drifts_found == 1 and d.counters.drifts_repaired == 0
    assert "L1 MFT block 0 position 0 changed" in d.audit.last[0]
    assert sw.mft[5] == 0b110 and "the plan keeps it as found (not written back)" in caplog.text


def test_a_host_port_found_not_active_costs_a_full_sweep():
    from mad.attributes import PortState
    t, d, clock = make(audit_share=4.0)
    t.sim.set_port_state("H3", 1, PortState.ARMED)  # behind our back, no trap
    run_for(d, clock, full_pass_seconds(d))
    assert d.counters.drifts_found == 1 and d.counters.drifts_repaired == 1
    assert not d.last_sweep["incremental"] and t.sim.node("H3").state[1] == PortState.ACTIVE


def test_a_foreign_mft_entry_is_cleared_when_pruning():
    t, d, clock = make(audit_share=4.0)
    d.opts.sweep.prune_multicast = True
    sw = t.sim.node("L1")
    sw.mft[5] = 0b110
    run_for(d, clock, full_pass_seconds(d))
    assert d.counters.drifts_found == 1 and d.counters.drifts_repaired == 1
    assert sw.mft[5] == 0 and d.last_sweep["mft_blocks"] == 1


def test_the_item_list_is_built_once_per_known_state(monkeypatch):
    t, d, clock = make(audit_share=4.0)
    built = []
    real = audit.items
    monkeypatch.setattr(audit, "items", lambda known: built.append(known) or real(known))
    for _ in range(5):
        d.status()
    run_for(d, clock, 6)  # light sweeps, no sweep: the same known state, one list for all reads
    assert built == [d.known] and d.audit.reads > 0 and d.counters.sweeps == 1
    built.clear()
    d.duties.sweep("again")  # a new known state: the status counts it without the list
    for _ in range(5):
        assert d.status()["audit"]["items"] == len(real(d.known))
    assert built == []
    run_for(d, clock, 6)  # the audit reads: one new list
    assert built == [d.known] and d.counters.sweeps == 2
