"""Living with another SM (ibsim + OpenSM): a MASTER OpenSM on Hca2 makes
`smagent sweep` refuse (exit 4, a refusal for safety, naming the SM: GUID, LID, priority, state) and send no
Set; `--force` proceeds.

How ibsim presents it: ibsim attaches OpenSM to the node named by SIM_HOST. When OpenSM
binds ("osm_opensm_bind: Setting IS_SM on port ..." in its log), umad2sim sets IsSM
(CapabilityMask bit 1) in that port's PortInfo, so every other client sees it by a
plain PortInfo Get; before that the bit is clear. A SubnGet(SMInfo) directed to that
port is forwarded by ibsim to OpenSM, which answers with its GUID, priority and state.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from smagent.model import netfile, topogen

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

HCA2_FROM_HCA1 = "0,1,3,1"  # Hca1 -> Switch1 (port 3) -> Switch2 (port 1) -> Hca2
IS_SM = 0x2


class OpenSM:
    """OpenSM running (no -o: it stays up) on the ibsim node `host` (None: no SIM_HOST, the
    node every client without one gets, i.e. smagent's); killed by process group."""

    def __init__(self, sim: IbSim, host: str | None, workdir):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / "opensm.log"
        self.env = sim.opensm_env(self.dir, **({"SIM_HOST": host} if host else {}))
        self.proc = None

    def __enter__(self):
        # -s 0: no periodic sweeps (a refusing smagent must find the fabric as OpenSM left it);
        # -d 2: flush the log after every message, so "SUBNET UP" is visible at once
        self.proc = subprocess.Popen([OPENSM, "-f", str(self.log), "-s", "0", "-d", "2"], env=self.env,
                                     cwd=self.dir, stdin=subprocess.DEVNULL, stdout=open(self.dir / "stdout", "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while "SUBNET UP" not in self._log():
                if self.proc.poll() is not None:
                    raise RuntimeError(f"opensm exited {self.proc.returncode}: {self._log()[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"opensm: no 'SUBNET UP' within 60 s; log {self.log}")
                time.sleep(0.1)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __exit__(self, *exc):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


def _capmask(sim, path, port):
    out = sim.run(["smpquery", "-D", "portinfo", path, str(port)]).stdout
    return int(re.search(r"^CapMask:\.+(0x[0-9a-f]+)", out, re.M).group(1), 16)


def _state(sim):
    """What a Set would change: every switch's LFT, every port's LID (ibnetdiscover)."""
    disc = sim.run(["ibnetdiscover", "-g"]).stdout
    routes = [sim.run(["ibroute", "-D", p]).stdout for p in ("0,1", "0,1,3")]
    local = sim.run(["smpquery", "-D", "portinfo", "0", "1"]).stdout
    return disc.split("\n", 3)[-1], routes, re.sub(r"^(Mkey|MkeyViolations).*$", "", local, flags=re.M)


def test_refuses_with_master_opensm_then_force(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))  # Hca1 first: smagent runs there
    sim = ibsim(net)
    assert not _capmask(sim, HCA2_FROM_HCA1, 1) & IS_SM, "IsSM set before any SM ran"
    with OpenSM(sim, "Hca2", tmp_path / "osm"):
        assert _capmask(sim, HCA2_FROM_HCA1, 1) & IS_SM, "OpenSM's port does not show IsSM"
        assert not _capmask(sim, "0", 1) & IS_SM
        sminfo = sim.run(["sminfo"]).stdout  # the witness: LID-routed to the SM LID
        m = re.search(r"sm lid (\d+) sm guid (0x[0-9a-f]+).*priority (\d+) state 3 SMINFO_MASTER", sminfo)
        assert m, sminfo
        lid, guid, prio = int(m.group(1)), int(m.group(2), 16), int(m.group(3))
        assert guid == 0x100004  # Hca2 port 1

        before = _state(sim)
        for args in (["sweep"], ["sweep", "--dry-run"]):
            r = sim.smagent(*args, check=False)
            assert r.returncode == 4, (args, r.returncode, r.stdout, r.stderr)  # SafetyRefusal (issue 11 item 1)
            err = r.stderr
            assert "another subnet manager is MASTER" in err, err
            assert f"GUID {guid:#018x}" in err and f"LID {lid}" in err, err
            assert f"priority {prio}" in err and "state MASTER" in err and "Hca2" in err, err
            assert "--force" in err
        assert _state(sim) == before, "a refused sweep changed the fabric"

        r = sim.smagent("sweep", "--force", "--json", check=False)
        assert r.returncode == 0, (r.stdout, r.stderr)
        s = json.loads(r.stdout)
        assert s["problems"] == [] and s["unreachable"] == []
        assert any("--force" in n and f"{guid:#018x}" in n for n in s["notes"]), s["notes"]
        # the witness has teeth: the forced sweep did change what it compares
        # (every port's MasterSMLID now names smagent's port, not OpenSM's)
        assert _state(sim) != before
        local = sim.run(["smpquery", "-D", "portinfo", "0", "1"]).stdout
        assert re.search(r"^SMLid:\.+(\d+)$", local, re.M).group(1) != str(lid), local


def test_refuses_with_master_opensm_on_its_own_port(ibsim, tmp_path):
    """Issue 11 item 1: OpenSM MASTER on the same node and port as smagent (neither has
    SIM_HOST). The local port shows IsSM and SMInfo to DR path 0 reaches OpenSM: the
    sweep refuses (exit 4, naming it) and the fabric is unchanged."""
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    with OpenSM(sim, None, tmp_path / "osm"):
        assert _capmask(sim, "0", 1) & IS_SM, "the local port does not show OpenSM's IsSM"
        m = re.search(r"sm lid (\d+) sm guid (0x[0-9a-f]+).*state 3 SMINFO_MASTER", sim.run(["sminfo"]).stdout)
        assert m
        lid, guid = int(m.group(1)), int(m.group(2), 16)
        before = _state(sim)
        for args in (["sweep"], ["sweep", "--dry-run"]):
            r = sim.smagent(*args, check=False)
            assert r.returncode == 4, (args, r.returncode, r.stdout, r.stderr)
            assert "another subnet manager is MASTER" in r.stderr, r.stderr
            assert f"GUID {guid:#018x}" in r.stderr and f"LID {lid}" in r.stderr and "Hca1 port 1" in r.stderr
        assert _state(sim) == before, "a refused sweep changed the fabric"


def test_table_writes_refuse_master_opensm_on_its_own_port(ibsim, tmp_path):
    """The house issue: `lft set` / `mft set` under OpenSM MASTER on smagent's own port
    (the transport does not own the SM port) are refused like the sweep (exit 4, naming
    the SM) and change nothing; `--force` writes."""
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    with OpenSM(sim, None, tmp_path / "osm"):
        assert _capmask(sim, "0", 1) & IS_SM, "the local port does not show OpenSM's IsSM"
        m = re.search(r"sm lid (\d+) sm guid (0x[0-9a-f]+).*state 3 SMINFO_MASTER", sim.run(["sminfo"]).stdout)
        assert m
        guid = int(m.group(2), 16)
        lid, port = next((int(a, 16), int(b)) for a, b in
                         re.findall(r"^(0x[0-9a-f]+) (\d+) ", sim.run(["ibroute", "-D", "0,1"]).stdout, re.M)
                         if int(b) != 0)
        new = 6 if port != 6 else 7
        before = _state(sim)
        for args in (["lft", "set", "0,1", str(lid), str(new)], ["mft", "set", "0,1", "0xc00b", "1"]):
            r = sim.smagent(*args, "--json", check=False)
            assert r.returncode == 4, (args, r.returncode, r.stdout, r.stderr)
            assert "a subnet manager is MASTER" in r.stderr and "--force" in r.stderr, r.stderr
            assert json.loads(r.stdout)["sm"]["guid"] == f"{guid:#018x}", r.stdout
        assert _state(sim) == before, "a refused table write changed the fabric"
        r = sim.smagent("lft", "set", "0,1", str(lid), str(new), "--force", "--allow-defects", check=False)
        assert r.returncode in (0, 1) and "warning: a subnet manager is MASTER" in r.stderr, (r.stdout, r.stderr)
        assert re.search(rf"^{lid:#06x} {new:03d} ", sim.run(["ibroute", "-D", "0,1"]).stdout, re.M)
