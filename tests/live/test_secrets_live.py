"""Issue 30's "no key fragment appears in any output": every command that takes a key
(--mkey, --mkey-file, --sm-key, --sm-key-file), given good and bad values, and the daemon
running with a secret SM_Key (asked by `sminfo` with MADs in hex, by `smagent query
sminfo` from another host, by `smagent status`, refused as a second daemon) leave no
run of 4 or more hex digits of a key in their stdout, stderr, log files or state files.

The keys are chosen so that no 4-digit run of theirs is in what the fabric shows anyway
(GUIDs, LIDs, times are checked for too: a test that cannot fail is worth nothing)."""
import re
import subprocess

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

M_KEY = 0x5EC2E7A1B9D4F386  # --mkey
FILE_KEY = 0x7F3A9C51E2D8B6A4  # --mkey-file
SM_KEY = 0xC3FFE7B2A49D58E1  # --sm-key / --sm-key-file
KEYS = (M_KEY, FILE_KEY, SM_KEY)


def fragments(key: int) -> set[str]:
    """Every run of 4 or more hex digits of the key (hex; a shorter run is any number)."""
    h = f"{key:016x}"
    return {h[i:j] for i in range(16) for j in range(i + 4, 17)}


def leaked(text: str) -> list[str]:
    """The 4-digit runs of any key in `text`, compared without case, spaces or separators
    (a hex dump splits bytes with spaces, dots or colons)."""
    flat = re.sub(r"[\s.:_-]", "", text.lower())
    return sorted({f for k in KEYS for f in fragments(k) if len(f) == 4 and f in flat})


def test_no_key_fragment_in_any_output(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net, console=True)
    outputs: dict[str, str] = {}

    def run(name, *args, env=None, want=0):
        r = subprocess.run(["python3", "-m", "smagent.cli", "--transport", "umad", *map(str, args)],
                           env=env or sim.env, cwd=sim.cwd, capture_output=True, text=True, timeout=120)
        assert r.returncode == want, f"{name}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        outputs[name] = r.stdout + r.stderr
        return r

    good_mkeys = tmp_path / "mkeys.txt"
    good_mkeys.write_text(f"default {FILE_KEY:#x}\n")
    bad_mkeys = tmp_path / "mkeys-bad.txt"
    bad_mkeys.write_text(f"default {FILE_KEY:#x}\n0xZZ02c9 {FILE_KEY:x}\nzz{FILE_KEY:x}\n")
    good_smkey = tmp_path / "sm.key"
    good_smkey.write_text(f"{SM_KEY:#x}\n")
    bad_smkey = tmp_path / "sm-bad.key"
    bad_smkey.write_text(f"{SM_KEY:#x}\n0xZZ{SM_KEY:x}\n")

    # the M_Key options, bad and good (the fabric has no M_Key: any key is answered)
    run("--mkey mistyped", "--mkey", f"0xZZ{M_KEY:x}"[:-2], "query", "nodeinfo", "0,1", want=2)
    run("--mkey too long", "--mkey", f"0x1{M_KEY:x}", "query", "nodeinfo", "0,1", want=2)
    run("--mkey good", "-vv", "--mkey", hex(M_KEY), "query", "portinfo", "0,1", "--port", "1")
    run("--mkey good, json", "--mkey", hex(M_KEY), "query", "portinfo", "0,1", "--port", "1", "--json")
    run("--mkey-file bad", "--mkey-file", bad_mkeys, "discover", want=2)
    run("--mkey-file good", "-v", "--mkey-file", good_mkeys, "--mkey", hex(M_KEY), "sweep", "--dry-run")
    # the SM_Key options, refused before the daemon starts
    state = tmp_path / "state-refused"
    run("--sm-key mistyped", "run", "--state-dir", state, "--sm-key", f"0xZZ{SM_KEY:x}"[:-2], want=2)
    run("--sm-key-file bad", "run", "--state-dir", state, "--sm-key-file", bad_smkey, want=2)
    run("--sm-key and --sm-key-file", "run", "--state-dir", state, "--sm-key-file", good_smkey,
        "--sm-key", hex(SM_KEY), want=2)

    # the daemon with a secret SM_Key, asked by everyone
    d = Daemon(sim, "-v", "--sm-key-file", str(good_smkey), "--sweep-interval", "1")
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and s["counters"]["light_sweeps"] >= 1,
           what="MASTER and a light sweep")
    for host in ("H0", "H3"):
        r = subprocess.run(["/usr/sbin/sminfo", "-d", "-d", "-D", "0"] if host == "H0" else ["/usr/sbin/sminfo"],
                           env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd, capture_output=True, text=True,
                           timeout=30)
        assert "SMINFO_MASTER" in r.stdout, r.stdout + r.stderr
        outputs[f"sminfo from {host}"] = r.stdout + r.stderr
    run("query sminfo from H3", "query", "sminfo", "1", "--show-keys", env=dict(sim.env, SIM_HOST="H3"))
    run("query sminfo json", "query", "sminfo", "1", "--json", env=dict(sim.env, SIM_HOST="H3"))
    run("--mkey-file good, verify", "--mkey-file", good_mkeys, "verify")
    run("--mkey good, LID-routed", "-vv", "--mkey", hex(M_KEY), "query", "portinfo", "1", "--port", "1")
    run("status", "status", "--state-dir", d.state)
    run("status json", "status", "--json", "--state-dir", d.state)
    # a second daemon on the same port, with the key on the command line: refused
    run("second daemon", "run", "--state-dir", tmp_path / "state-second", "--sm-key", hex(SM_KEY),
        "--log-file", tmp_path / "second.log", want=4)
    assert d.stop() == 0
    for f in [d.log, sim.cwd / "smagent-run.stderr", tmp_path / "second.log", *sorted(d.state.rglob("*"))]:
        if f.is_file():
            outputs[str(f)] = f.read_text(errors="replace")

    assert "sm key" in outputs["query sminfo from H3"].lower().replace("_", " ")  # the field is there, as 0
    assert len(outputs) >= 20 and all(v for k, v in outputs.items() if not k.startswith("/")), outputs.keys()
    bad = {name: leaked(text) for name, text in outputs.items() if leaked(text)}
    assert not bad, bad
    # the witness: the check finds a key where one is (a 4-digit run in a dump of GUIDs and LIDs)
    assert leaked(f"guid 0x0002c9{M_KEY:x}"[:-5]) and leaked(f"{SM_KEY:X}"[3:7]) and not leaked("0x0002c90300000001")
