"""`smagent --transport umad run` on ibsim sets PortInfo.ClientReregister once per CA port
when it becomes MASTER, and never again in the same mastership (smagent.sm.reregister).

ibsim's CA ports advertise no IsClientReregistrationSupported (CapabilityMask bit 25: its
hcaport template is 0x0040c048), so by default neither OpenSM nor smagent sends them the
bit; `--client-reregister all` sends it to every CA port, which ibsim accepts and reads back
0. The witness is the daemon's own capture (`--record`): every MAD it sent and received."""
import collections

import pytest

from ibsim_harness import ibsim_available, skip_reason
from mad import smp as smpcodec
from mad.attributes import AttrID, PortInfo
from mad.header import Method
from sm_harness import Daemon, procs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen

from smagent.transport import pcap
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def rereg_sets(capture) -> tuple[collections.Counter, list[int]]:
    """The SubnSet(PortInfo) with ClientReregister we sent, by (DR path, port), and the bit
    as each answer read it back."""
    sent: collections.Counter = collections.Counter()
    tids, back = set(), []
    for rec in pcap.read_capture(capture):
        smp = smpcodec.decode(rec.mad)
        if smp.attribute_id != AttrID.PORT_INFO:
            continue
        if smp.method == Method.SET and smp.attribute(PortInfo).client_reregister:
            sent[(tuple(smp.initial_path[1:smp.hop_count + 1]), smp.attribute_modifier & 0xFF)] += 1
            tids.add(smp.transaction_id & 0xFFFFFFFF)
        elif smp.method == Method.GET_RESP and smp.transaction_id & 0xFFFFFFFF in tids:
            back.append(smp.attribute(PortInfo).client_reregister)
    return sent, back


def test_client_reregister_once_per_ca_port_on_becoming_master(tmp_path, ibsim, procs):
    fabric = topogen.fat_tree_2(4)
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    ca_ports = sum(len(fabric.connected_ports(n)) for n in fabric.cas())

    # the default (capable): ibsim's CA ports do not advertise the bit, so none is sent
    cap1 = tmp_path / "capable.pcap"
    d = Daemon(sim, "--record", str(cap1), "--sweep-interval", "0.5")
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER" and s["counters"]["light_sweeps"] >= 2, what="MASTER, light sweeps")
    assert d.stop() == 0
    assert rereg_sets(cap1) == (collections.Counter(), [])

    # --client-reregister all: once per CA port on becoming MASTER (again: a new mastership),
    # never on the light sweeps that follow; each port reads the bit back 0
    cap2 = tmp_path / "all.pcap"
    d = Daemon(sim, "--record", str(cap2), "--client-reregister", "all", "--sweep-interval", "0.5")
    procs.append(d)
    s = d.wait(lambda s: s["state"] == "MASTER" and s["counters"]["light_sweeps"] >= 3, what="MASTER, light sweeps")
    assert s["counters"]["client_reregisters"] == ca_ports
    assert d.stop() == 0
    sent, back = rereg_sets(cap2)
    assert len(sent) == ca_ports and set(sent.values()) == {1}
    assert back == [0] * ca_ports
    assert "client reregister: PortInfo.ClientReregister set on %d end port(s)" % ca_ports in d.logtext()
