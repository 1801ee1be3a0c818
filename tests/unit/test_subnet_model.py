"""The subnet model (`smagent.model.subnet.Subnet`): what a sweep leaves, its LFTs held
once (whole tables, the known blocks a view), its functional updates, and the running SM
holding one model that its SA answers from and its repairs fork (issue 38 item 2)."""
from mad.attributes import PortState
from mad.forwarding import LFT_BLOCK_SIZE
from smagent import sweep as sweepmod
from smagent.model import topogen
from smagent.model.subnet import NO_PORT, Subnet
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.transport.sim import SimTransport


def _swept():
    t = SimTransport(topogen.two_switch())
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == [] and r.known is not None
    return t, r


def _held(topo):
    """What a topology holds, by identity: the node objects, their PortInfos and
    SwitchInfo, and the cables."""
    return ({g: (n, dict(n.ports), n.switch_info) for g, n in topo.nodes.items()}, dict(topo.links))


def test_a_sweep_leaves_the_model_with_its_tables_as_written():
    _t, r = _swept()
    m = r.known
    assert m.topology is r.topology and m.nodes.keys() == r.topology.nodes.keys()
    written = dict(r.lft_current)
    written.update(((c.switch, c.block), bytes(c.new)) for c in r.lft_changes)
    assert dict(m.lft_blocks) == written and len(m.lft_blocks) == len(written)
    for (sw, b), blk in written.items():
        assert m.lft[sw][b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE] == blk == m.lft_block(sw, b)
    sw = next(iter(m.lft))
    assert m.lft_block(sw, len(m.lft[sw]) // LFT_BLOCK_SIZE) is None  # past the table's end: unknown
    assert {lid for lid, (g, _p) in m.lids.items()} == {n.lid(p) for n in m.nodes.values() for p in n.lid_ports()}
    assert m.lmc == r.lid_plan.lmc and m.sm_lid == r.lid_plan.master_lid


def test_a_plan_against_the_model_leaves_it_as_it_was():
    """A sweep changes the topology it plans on (PortInfo, SwitchInfo as the Sets answer):
    against a model it plans on a fork, so the model handed in stays as it was."""
    t, r = _swept()
    m = r.known
    before = _held(m.topology)
    again = sweepmod.sweep(t, sweepmod.SweepOptions(known=m))
    assert again.problems == [] and again.known is not None
    assert again.topology is not m.topology and _held(m.topology) == before


def test_fork_and_functional_updates_leave_the_original_alone():
    _t, r = _swept()
    m = r.known
    before = _held(m.topology)
    lid = next(iter(m.lids))
    fork = m.fork()
    g, p = m.lids[lid]
    node = fork.topology.nodes[g]
    node.ports[p] = node.ports[p].replace(lid=lid + 1000)
    assert _held(m.topology) == before and m.lids[lid] == (g, p)
    assert fork.lids[lid + 1000] == (g, p) and lid not in fork.lids  # worked out of the patched topology
    sw = next(iter(m.lft))
    blocks = len(m.lft[sw]) // LFT_BLOCK_SIZE
    new = bytes(range(LFT_BLOCK_SIZE))
    grown = m.with_tables({(sw, 0): new, (sw, blocks + 1): new})
    assert grown.lft_block(sw, 0) == grown.lft_block(sw, blocks + 1) == new
    assert grown.lft_block(sw, blocks) is None and (sw, blocks) not in grown.lft_blocks  # the gap is unknown
    assert grown.lft[sw][blocks * LFT_BLOCK_SIZE] == NO_PORT
    assert m.lft_block(sw, 0) != new and len(m.lft[sw]) == blocks * LFT_BLOCK_SIZE
    dropped = m.evolve(lft_unknown=m.lft_unknown | {(sw, 0)})
    assert (sw, 0) not in dropped.lft_blocks and (sw, 0) in m.lft_blocks
    assert len(dropped.lft_blocks) == len(m.lft_blocks) - 1


def test_a_model_built_from_discovery_knows_no_table():
    t, r = _swept()
    m = Subnet.build(r.topology.fork())
    assert not m.lft and not m.lft_blocks and not m.mft and m.lids


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_daemon_holds_one_model_which_its_sa_answers_from_and_repairs_replace():
    t = SimTransport()
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    first = d.shared.subnet
    assert first is not None and first is d.sa.agent.subnet and d.known is first
    assert d.topo is first.topology
    before = _held(first.topology)
    t.sim.unlink("L1", 2)
    end = clock.now + 1
    while clock.now < end:
        clock.now += 0.5
        d.step(max_wait=0)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"]
    now = d.shared.subnet
    assert now is not first and now is d.sa.agent.subnet and d.known is now
    assert _held(first.topology) == before  # the repair patched a fork: the old model is as it was
    h2 = next(n for n in first.nodes.values() if n.description.startswith("H2"))
    assert h2.guid in first.nodes and h2.guid not in now.nodes  # the host whose only cable was cut
    assert first.nodes[h2.guid].ports[1].port_state == PortState.ACTIVE
