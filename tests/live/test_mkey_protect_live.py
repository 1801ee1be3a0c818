"""M_Key protection on ibsim. ibsim models no M_Key: it enforces nothing and keeps none of
the M_Key fields a PortInfo Set writes (docs/PITFALLS.md, "ibsim's SMA"). A sweep with
protection options must still run there: it brings the fabric up, every end port's
PortInfo Set carries the key, the protect bits and the lease together (read back from the
sweep's own capture), and the ports read with smpquery show what ibsim holds."""
import re
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from mad import smp as smpcodec
from mad.attributes import AttrID, PortInfo
from mad.header import Method
from smagent.config import mkeys
from smagent.model import netfile, topogen
from smagent.transport.pcap import read_capture

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

KEY = 0x5EC2E7C0FFEE0042


def _smpquery(sim, path: str, port: int) -> dict:
    out = sim.run(["smpquery", "-D", "portinfo", path, str(port)]).stdout
    return {name: re.search(rf"^{name}:\.+(\S+)$", out, re.M).group(1)
            for name in ("ProtectBits", "MkeyLeasePeriod", "LinkState", "Lid")}


def test_a_sweep_with_protection_runs_on_ibsim(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    cap = tmp_path / "sweep.pcap"
    r = sim.smagent("--mkey", hex(KEY), "sweep", "--mkey-protect", "2", "--mkey-lease", "30", record=cap)
    assert r.returncode == 0, r.stderr
    assert hex(KEY)[2:] not in (r.stdout + r.stderr).lower()
    keyed = []
    for rec in read_capture(cap):
        smp = smpcodec.decode(rec.mad)
        if smp.method == Method.SET and smp.attribute_id == AttrID.PORT_INFO and smp.attribute(PortInfo).m_key:
            pi = smp.attribute(PortInfo)
            keyed.append((smp.target(), pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period))
    # the 2 switches' port 0 and the 4 CA ports: key, bits and lease in the same Set
    assert len({t for t, *_ in keyed}) == 6 and {tuple(k[1:]) for k in keyed} == {(KEY, 2, 30)}
    held = mkeys.load_guid2mkey(Path(sim.env["SMAGENT_STATE_DIR"]) / "guid2mkey")
    assert set(held.keys.values()) == {KEY} and len(held.keys) == 6
    # as ibsim holds them: the fabric is up; the M_Key fields keep ibsim's own values
    for path, port in [("0,1", 0), ("0,1,3", 0), ("0", 1)]:
        got = _smpquery(sim, path, port)
        assert got["LinkState"] == "Active" and int(got["Lid"]) > 0, (path, got)
        assert (got["ProtectBits"], got["MkeyLeasePeriod"]) == ("0", "4089"), got  # ibsim kept none of them
