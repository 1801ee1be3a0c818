"""A live routing run: smagent sweeps an ibsim fabric (`start`), `verify --json` on it,
and `ibroute` output parsed into LFTs."""
import json
import re
from ibsim_harness import IbSim
from smagent.model import netfile


def start(tmp_path, fabric, name):
    net = tmp_path / f"{name}.net"
    net.write_text(netfile.dumps(fabric))
    return IbSim(net, tmp_path / f"run-{name}", extra_args=netfile.ibsim_size_args(fabric))


def verify_json(sim):
    r = sim.smagent("verify", "--json", check=False)
    assert r.returncode in (0, 1), f"verify -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.returncode, json.loads(r.stdout)


def _parse_lfts(text: str) -> dict[int, dict[int, int]]:
    tables, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"Unicast lids .* guid 0x([0-9a-f]+)", line)
        if m:
            cur = tables.setdefault(int(m.group(1), 16), {})
            continue
        m = re.match(r"0x([0-9a-f]+) (\d+) ", line)
        if m and cur is not None:
            cur[int(m.group(1), 16)] = int(m.group(2))
    return tables
