"""Alias GUIDs and ClassPortInfo on ibsim, OpenSM 3.3.23's SA and ours side by side: hosts
register alias GUIDs on their own ports (`smagent sa alias`: GUIDInfoRecord Set and Delete,
as an SR-IOV virtual function does), `saquery GIR` shows them, PathRecords answer by the
alias GID until it is deleted; the refusals are the same. ClassPortInfo's capability bits
are OpenSM's but for the two this SA does not claim (IsNotice, IsFullPortInfoRecord).
ibsim's SMA answers GUIDInfo Get only: the repair after the first alias tries the
GUIDInfo Set, is refused, notes it once and carries on with no problem (no resweep)."""
from __future__ import annotations

import re

from ibsim_harness import run_smagent
from smagent.model import netfile, topogen
from smagent.sa.agent import CAP_MASK2, CAP2_QOS
from sa_harness import SA_MARKS, assert_same, lid_map, opensm_then_ours, records, saquery
from sm_harness import daemon_status, procs  # noqa: F401 (the fixture)

pytestmark = SA_MARKS

ALIAS = "0x0002c90300aa0001"
NOT_CLAIMED = (1 << 1, 1 << 6)  # CapabilityMask IsNotice, CapabilityMask2 IsFullPortInfoRecord


def collect(sim) -> dict:
    lids = lid_map(sim)

    def ask(host, *args):
        r = run_smagent(["--transport", "umad", "sa", *args, "--json"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                        check=False)
        if r.returncode:
            return r.returncode, r.stderr.strip().splitlines()[-1]
        return [{k: v for k, v in it.items() if k not in ("lid", "slid", "dlid")} for it in r.json()["items"]]

    def gir(host):
        text = saquery(sim, "GIR", f"{lids[(host, 1)]}/0").stdout
        return [{k: v for k, v in rec.items() if k.lower() != "lid"} for rec in records(text)]

    h2 = _port_guid(sim, lids[("H2", 1)])
    (cpi,) = ask("H2", "classportinfo")
    return {
        "cpi": (cpi["capability_mask"], cpi["capability_mask2"]),
        "path to an alias not registered": ask("H2", "paths", h2, ALIAS),
        "register at index 1": ask("H3", "alias", "1", ALIAS),
        "register at index 2, the SM's choice": ask("H3", "alias", "2"),
        "another port's alias": ask("H4", "alias", "1", ALIAS),
        "the port's own GUID at index 3": ask("H4", "alias", "3", _port_guid(sim, lids[("H4", 1)])),
        "a block past GUIDCap": ask("H3", "alias", "255"),
        "GIR": gir("H3"),
        "path to the alias": ask("H2", "paths", h2, ALIAS),
        "delete index 1": ask("H3", "alias", "1", "--delete"),
        "path after the delete": ask("H2", "paths", h2, ALIAS),
        "GIR after the delete": gir("H3"),
    }


def _port_guid(sim, lid: int) -> str:
    text = sim.run(["smpquery", "nodeinfo", str(lid)]).stdout
    return "0x" + re.search(r"PortGuid:\.*0x([0-9a-f]+)", text).group(1).rjust(16, "0")


def test_alias_guids_and_class_port_info_like_opensm(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want, got = opensm_then_ours(sim, tmp_path, procs, collect)
    assert want["cpi"] == (0x2602, 0xB5E8), want["cpi"]  # OpenSM 3.3.23's, multicast and MultiPath on, no QoS
    assert got.pop("cpi") == (want.pop("cpi")[0] & ~NOT_CLAIMED[0], 0xB5E8 & ~NOT_CLAIMED[1]) \
        and CAP_MASK2 & ~CAP2_QOS == 0xB5E8 & ~NOT_CLAIMED[1]
    assert isinstance(want["path to the alias"], list) and len(want["path to the alias"]) == 1
    assert want["path to an alias not registered"] == want["path after the delete"]
    assert_same(got, want)
    # the Set ibsim refuses: said once, never a problem, never asked again
    refused = [line for line in (tmp_path / "run.log").read_text().splitlines() if "refuse SubnSet(GUIDInfo)" in line]
    assert len(refused) == 1, refused
    last = daemon_status(sim, tmp_path / "state")["last_sweep"]
    assert last["ok"] and last["problems"] == 0 and last["why"] == "alias GUIDs changed", last
