"""What the live tests of `smagent run` share: the daemon and OpenSM as processes on
ibsim (stopped by process group, ours only), the `procs` fixture that stops them, and
`sminfo` from a host as the witness of who is MASTER, the ibroute walk of every host
pair (`walk_all_pairs`), and the rogue host that sends SMInfo Gets and Sets (`rogue`)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
needs_opensm = pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")


def stop_group(proc: subprocess.Popen | None, sig=signal.SIGTERM) -> int:
    """Stop a process group we started (``sig``, then SIGKILL after 10 s); its exit code."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else 0
    os.killpg(proc.pid, sig)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(10)


class Daemon:
    """`smagent run` on ibsim; stopped with SIGTERM (then SIGKILL) by process group."""

    def __init__(self, sim, *args, host=None):
        self.sim, self.state = sim, sim.cwd / f"state-{host or 'default'}"
        self.env = dict(sim.env)
        if host:
            self.env["SIM_HOST"] = host
        self.log = sim.cwd / f"smagent-run-{host or 'default'}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir", str(self.state),
             "--log-file", str(self.log), *args], env=self.env, cwd=sim.cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=open(sim.cwd / "smagent-run.stderr", "ab"), start_new_session=True)

    def status(self) -> dict:
        r = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--json", "--state-dir", str(self.state)],
                           env=self.env, capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else {"state": None, "error": r.stderr}

    def wait(self, pred, timeout=20.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"smagent run exited {self.proc.returncode}: {self.logtext()[-3000:]}"
            s = self.status()
            if s.get("state") and pred(s):
                return s
            time.sleep(0.2)
        raise AssertionError(f"{what} not reached in {timeout} s; status {s}; log:\n{self.logtext()[-3000:]}")

    def logtext(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig=signal.SIGTERM) -> int:
        proc, self.proc = self.proc, None
        return stop_group(proc, sig)


class OpenSM:
    def __init__(self, sim, host, priority, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "opensm.conf"
        conf.write_text("sminfo_polling_timeout 1000\npolling_retry_number 2\n")
        self.log = workdir / "opensm.log"
        env = sim.opensm_env(workdir, SIM_HOST=host)
        self.proc = subprocess.Popen([OPENSM, "-F", str(conf), "-f", str(self.log), "-d", "2", "-p", str(priority)],
                                     env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                                     stdout=open(workdir / "stdout", "wb"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self):
        proc, self.proc = self.proc, None
        stop_group(proc)


@pytest.fixture
def procs():
    """Everything a test starts is stopped at teardown, ours only, by process group."""
    started = []
    yield started
    for p in reversed(started):
        p.stop()


def sminfo_at(sim, host) -> str:
    """SMInfo of the SM on `host`'s port, asked from that node (DR path 0)."""
    r = subprocess.run(["/usr/sbin/sminfo", "-D", "0"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                       capture_output=True, text=True, timeout=30)
    return r.stdout


def masters(sim, hosts) -> list[str]:
    return [h for h in hosts if "SMINFO_MASTER" in sminfo_at(sim, h)]


def converge(sim, d, ours, theirs, want_master, timeout=25.0, osm: OpenSM | None = None):
    """Wait until exactly `want_master` reports MASTER, then check it stays so (a failure
    shows our log, and ``osm``'s when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if masters(sim, [ours, theirs]) == [want_master]:
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"never exactly one MASTER on {want_master}: {sminfo_at(sim, ours)!r} "
                             f"{sminfo_at(sim, theirs)!r}; log:\n{d.logtext()[-3000:]}"
                             + (f"\nOpenSM's log:\n{osm.log.read_text(errors='replace')[-3000:]}" if osm else ""))
    for _ in range(5):  # and at every sample after
        assert masters(sim, [ours, theirs]) == [want_master]
        time.sleep(0.3)


def wiring(sim):
    """From ibnetdiscover: {(switch LID, port): (peer LID, peer is a switch)} and the CA LIDs."""
    links, cas, lid = {}, set(), None
    for line in sim.run(["ibnetdiscover"]).stdout.splitlines():
        m = re.match(r'^Switch\s.*#.*\slid (\d+)', line)
        if m:
            lid = int(m.group(1))
            continue
        if line.startswith(("Ca", "Hca")):
            lid = None
            continue
        m = re.match(r'^\[(\d+)\]\s+"([SH])-\w+"\[\d+\].*#.*\slid (\d+)', line)
        if m and lid is not None:
            links[(lid, int(m.group(1)))] = (int(m.group(3)), m.group(2) == "S")
            if m.group(2) == "H":
                cas.add(int(m.group(3)))
    return links, sorted(cas)


def routes(sim, switches) -> dict:
    """Every switch's LFT as ibroute dumps it: {switch LID: {LID: port}}."""
    out = {}
    for sw in switches:
        text = sim.run(["ibroute", "-n", str(sw)]).stdout
        out[sw] = {int(a, 16): int(b) for a, b in re.findall(r"^(0x[0-9a-f]+) (\d+)", text, re.M)}
    return out


def walk_all_pairs(sim, skip=()):
    """An ibroute walk: from every CA's switch, follow the LFTs to every other CA's LID.
    ``skip``: switch LIDs whose tables are not read (a drained switch: no route leads to
    it, nor to its own LID); a walk that reaches one fails."""
    links, cas = wiring(sim)
    switches = sorted({s for s, _p in links} - set(skip))
    lft = routes(sim, switches)
    lft.update({s: {} for s in skip})
    home = {peer: s for (s, _p), (peer, is_sw) in links.items() if not is_sw}
    bad = []
    for src in cas:
        for dst in cas:
            if src == dst:
                continue
            cur, ok = home[src], False
            for _hop in range(64):
                port = lft[cur].get(dst)
                peer = links.get((cur, port))
                if peer is None:
                    break
                if not peer[1]:
                    ok = peer[0] == dst
                    break
                cur = peer[0]
            if not ok:
                bad.append((src, dst))
    assert not bad, f"{len(bad)} host pairs unreachable, e.g. {bad[:5]}"
    r = sim.run(["ibtracert", str(cas[0]), str(cas[-1])], check=False)  # and the diags' own tracer agrees
    assert r.returncode == 0, r.stdout + r.stderr
    return switches, lft


# SubnSet/SubnGet(SMInfo) from the rogue host to the SM port with GUID argv[1], by DR
# (discovered from there); prints one JSON line per answer: [MAD status, its SMInfo]
ROGUE_SCRIPT = r"""
import json, sys
from mad import smp as smpcodec
from mad.attributes import AttrID, SMInfo
from mad.header import Method
from smagent import discovery
from smagent.transport.base import Request
from smagent.transport.umad import UmadTransport

target = int(sys.argv[1], 0)
with UmadTransport(timeout_ms=500, retries=1) as t:
    node, port = discovery.discover(t).by_guid(target)
    path = node.path_to_port(port)
    for spec in json.loads(sys.argv[2]):
        method = Method.SET if spec["set"] else Method.GET
        value = SMInfo(guid=spec["guid"], sm_key=spec["key"], act_count=0, priority=15, sm_state=3)
        r = t.execute([Request(smpcodec.dr(method, AttrID.SM_INFO, path, spec["control"], value))], retries=0)[0]
        if r.raw is None:  # no answer
            print(json.dumps([None, None]))
            continue
        got = smpcodec.attribute_of(r.raw, SMInfo)
        print(json.dumps([smpcodec.status_of(r.raw) & 0x7FFF,
                          {"key": got.sm_key, "state": got.sm_state, "guid": got.guid}]))
"""


def rogue(sim, target_guid: int, requests: list[dict], host: str = "H3") -> list:
    env = dict(sim.env, SIM_HOST=host)
    r = subprocess.run([sys.executable, "-c", ROGUE_SCRIPT, hex(target_guid), json.dumps(requests)], env=env,
                       cwd=sim.cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def daemon_status(sim, state) -> dict:
    """`smagent status --json` of the daemon whose state directory is ``state`` ({} if none answers)."""
    r = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--json", "--state-dir", str(state)],
                       env=sim.env, capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def wait_status(proc, sim, state, log, pred, what, timeout=30.0) -> dict:
    """The status once ``pred`` holds, while the daemon ``proc`` lives (its ``log`` in the failure)."""
    deadline = time.monotonic() + timeout
    s: dict = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"smagent run exited {proc.returncode}: {log.read_text()[-2000:]}"
        s = daemon_status(sim, state)
        if s.get("state") and pred(s):
            return s
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached: {s}; log:\n{log.read_text()[-2000:] if log.exists() else ''}")
