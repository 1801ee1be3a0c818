"""verify's `Snapshot` as a view of the subnet model (`Snapshot.of`, issue 38 item 2): the
facts are the model's, verify's own (RFTs, unread switches, what did not answer) beside."""
import dataclasses

from mad import forwarding as fw
from smagent import sweep as sweepmod, verify
from smagent.model import topogen
from smagent.model.subnet import Subnet
from smagent.transport.sim import SimTransport
from smagent.verify.model import Snapshot


def _swept():
    t = SimTransport(topogen.two_switch())
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == [] and r.known is not None
    return t, r


def _facts(snap: Snapshot):
    return ({g: dataclasses.astuple(s) for g, s in snap.switches.items()}, snap.ca_ports, snap.links,
            snap.mcast_read, snap.port_info.keys(), snap.enforce_cap)


def test_the_model_a_sweep_leaves_viewed_is_what_verify_reads_back():
    t, r = _swept()
    read = verify.collect(t, links=False)
    assert _facts(Snapshot.of(r.known)) == _facts(read)
    assert all(s.active == {p for g, p in read.links if g == s.guid} for s in read.switches.values())
    assert verify.check(Snapshot.of(r.known)).ok


def test_each_lft_is_cut_or_padded_to_the_blocks_a_reader_reads():
    _t, r = _swept()
    topo = r.known.topology
    sw = next(n for n in topo.switches())
    size = (sw.switch_info.linear_fdb_top // fw.LFT_BLOCK_SIZE + 1) * fw.LFT_BLOCK_SIZE
    short = Snapshot.of(Subnet.build(topo, {(sw.guid, 0): bytes([1]) * fw.LFT_BLOCK_SIZE}))
    assert short.switches[sw.guid].lft == bytes([1]) * fw.LFT_BLOCK_SIZE + bytes([255]) * (size - fw.LFT_BLOCK_SIZE)
    past = size // fw.LFT_BLOCK_SIZE + 1  # a block above LinearFDBTop's is not read: not in the view
    long = Snapshot.of(Subnet.build(topo, {(sw.guid, past): bytes([2]) * fw.LFT_BLOCK_SIZE}))
    assert long.switches[sw.guid].lft == bytes([255]) * size


def test_verifys_own_facts_stand_beside_the_models():
    _t, r = _swept()
    topo = r.known.topology
    a, b = sorted(n.guid for n in topo.switches())
    units = {(a, 0, 0): [0] * 2 + [0b1010] + [0] * 29}  # MLID 0xC002 out of ports 1 and 3
    snap = Snapshot.of(Subnet.build(topo, {}, units), {b: ((4, 0, 1),)}, unread={b}, mft_unread={a},
                       unreached=[{"where": "x"}])
    assert snap.switches[a].mft == {fw.mft_mlid(0, 2): frozenset({1, 3})}
    assert (snap.switches[a].read, snap.switches[a].mft_read) == (True, False)
    assert (snap.switches[b].read, snap.switches[b].mft_read, snap.switches[b].rft) == (False, False, ((4, 0, 1),))
    assert snap.mcast_read and snap.unreached == [{"where": "x"}]
    assert not Snapshot.of(r.known, mcast=False).mcast_read
