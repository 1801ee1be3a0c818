"""What the live SA tests share: OpenSM's and saquery's paths and the marks that need them,
our processes (`Proc`), saquery and its dump parsed (`records`), the LIDs under the running
SM (`lid_map`), and `smagent run` started until its SA answers (`start_sa`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import stop_group

OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
SAQUERY = shutil.which("saquery", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
SA_MARKS = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None or SAQUERY is None, reason="opensm and infiniband-diags needed")]

class Proc:
    """A process group we started, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, args, env, cwd, log):
        self.proc = subprocess.Popen(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=open(log, "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self):
        proc, self.proc = self.proc, None
        stop_group(proc)


def saquery(sim, *args, check=True):
    r = subprocess.run([SAQUERY, *map(str, args)], env=sim.env, cwd=sim.cwd, capture_output=True, text=True,
                       timeout=30)
    if check:
        assert r.returncode == 0, f"saquery {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return r


def records(text: str) -> list[dict[str, str]]:
    """saquery's dump: one dict per record ("Name....value" lines; a table's rows, "SL: 0| 1|
    ..." or a row of P_Keys, joined under their label, "table" for unlabelled rows)."""
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.rstrip().endswith("dump:") and not line.startswith("\t"):
            out.append({})
            continue
        m = re.match(r"^\t\t(\S[^.]*?)\.{2,}(.*)$", line) or re.match(r"^\t\t(\w[\w ]*?)\s*:(.*\|.*)$", line)
        row = re.match(r"^\t\t(0x[0-9a-f]{4}(?: 0x[0-9a-f]{4})*)\s*$", line)
        if m or row:
            if not out:
                out.append({})
            key, value = (m.group(1).strip(), m.group(2).strip()) if m else ("table", row.group(1))
            rec = out[-1]
            rec[key] = f"{rec[key]} {value}" if key in rec and (row or "|" in value) else value
    return out


class LidMap(dict):
    """(node description, port) -> base LID (a switch: port 0); ``lmc``: base LID -> LMC."""

    def __init__(self):
        super().__init__()
        self.lmc: dict[int, int] = {}


def lid_map(sim) -> LidMap:
    """The LIDs under the running SM, from ibnetdiscover."""
    text = sim.run(["ibnetdiscover"]).stdout
    out = LidMap()
    desc = None
    for line in text.splitlines():
        m = re.match(r'^Switch\s.*#\s+"([^"]+)".*\slid (\d+)', line)
        if m:
            out[(m.group(1), 0)] = int(m.group(2))
            desc = None
            continue
        m = re.match(r'^(?:Ca|Hca)\s.*#\s+"([^"]+)"', line)
        if m:
            desc = m.group(1)
            continue
        m = re.match(r"^\[(\d+)\]\(\w+\)\s.*#\s+lid (\d+) lmc (\d+)", line)
        if m and desc is not None:
            out[(desc, int(m.group(1)))] = int(m.group(2))
            out.lmc[int(m.group(2))] = int(m.group(3))
    return out


def wait_for_sa(sim, what, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.proc.poll() is None, f"{what} exited {proc.proc.returncode}"
        if saquery(sim, "-c", check=False).returncode == 0 and saquery(sim, "SMIR", check=False).returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"the SA of {what} did not answer in {seconds} s")



def start_sa(sim, tmp_path, procs, *args) -> Proc:
    """`smagent run` (with ``args``) on the fabric's SM port, its state and logs under
    ``tmp_path``, stopped at teardown (``procs``), once its SA answers."""
    ours = Proc([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                 str(tmp_path / "state"), "--log-file", str(tmp_path / "run.log"), *map(str, args)], sim.env, sim.cwd,
                tmp_path / "run.out")
    procs.append(ours)
    wait_for_sa(sim, "smagent run", ours)
    return ours


def opensm_then_ours(sim, tmp_path, procs, collect, opensm_args=(), smagent_args=()) -> tuple:
    """(OpenSM's answers, ours) on one fabric: `collect(sim)` under OpenSM 3.3 (with
    ``opensm_args``), then, OpenSM stopped, under `smagent run` (``smagent_args``)."""
    osm_dir = tmp_path / "opensm"
    osm = Proc([OPENSM, *map(str, opensm_args), "-f", str(osm_dir / "opensm.log")], sim.opensm_env(osm_dir), osm_dir,
               osm_dir / "stdout")
    procs.append(osm)
    wait_for_sa(sim, "OpenSM", osm)
    want = collect(sim)
    osm.stop()
    start_sa(sim, tmp_path, procs, *smagent_args)
    return want, collect(sim)


def assert_same(got: dict, want: dict) -> None:
    """Every answer OpenSM gave, ours the same (the differences listed otherwise)."""
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, "\n".join(f"{k}:\n  smagent {g}\n  OpenSM  {w}" for k, (g, w) in wrong.items())


LID_FIELDS = {"lid", "LID", "EndPortLid", "base_lid", "master_sm_base_lid", "dlid", "slid", "FromLID", "ToLID"}


DIFFERENT_ON_PURPOSE = {"Capability mask", "Capability mask 2", "ActCount"}


def _junk(rec: dict[str, str]) -> bool:
    """A record saquery made up past OpenSM's last one: it counts records by the bytes it
    got, and OpenSM writes whole MADs (docs/PITFALLS.md, records counted by length)."""
    lids = [v for k, v in rec.items() if k in LID_FIELDS]
    return bool(lids) and all(v in ("0", "0x0") for v in lids)
