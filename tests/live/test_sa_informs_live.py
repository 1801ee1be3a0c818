"""Event subscriptions on ibsim, answered by OpenSM 3.3's SA and by ours (`smagent
--transport umad run`), field by field: the same InformInfo Sets (`smagent sa subscribe`)
from several hosts, each answer or refusal, and the InformInfoRecords `saquery -I`
(OpenSM's client) reads, at most two at a time (under umad2sim a table of three loses the
third record's tail: docs/PITFALLS.md). SubscriberEnum aside: OpenSM sets every Enum to 0
(its own comment calls it a hack), ours numbers the records as they come, so that
SubscriberGID and Enum name one (IBA 15.2.5.13). Only traps a static fabric never raises
(128, 144) are subscribed to: a Report sent to a client that has exited would reach
whatever process takes its slot next."""
from __future__ import annotations

import re

from ibsim_harness import run_smagent
from smagent.model import netfile, topogen
from sa_harness import SA_MARKS, assert_same, lid_map, opensm_then_ours, records, saquery
from sm_harness import procs  # noqa: F401 (the fixture)

pytestmark = SA_MARKS


def answers(sim) -> dict:
    """Each answer as `smagent sa` decodes it (or the exit and last line of a refusal)."""
    text = sim.run(["smpquery", "nodeinfo", str(lid_map(sim)[("H5", 1)])]).stdout
    h5 = "0x%016x" % int(re.search(r"PortGuid:\.*(0x[0-9a-f]+)", text).group(1), 16)

    def ask(host, *args):
        r = run_smagent(["--transport", "umad", "sa", "subscribe", *args, "--json"], env=dict(sim.env, SIM_HOST=host),
                        cwd=sim.cwd, check=False)
        if r.returncode:
            return r.returncode, r.stderr.strip().splitlines()[-1]
        return r.json()["items"]

    def table():
        return [{k: v for k, v in r.items() if k != "SubscriberEnum"} for r in records(saquery(sim, "-I").stdout)]

    out = {
        "trap 144": ask("H3", "144"),
        "trap 144 again": ask("H3", "144"),
        "QPN 0 (kept: the source QP)": ask("H4", "144", "--qpn", "0"),
        "two subscriptions, newest first": table(),
        "unsubscribe": ask("H3", "144", "--unsubscribe"),
        "unsubscribe again": ask("H3", "144", "--unsubscribe"),
        "unsubscribe naming QPN 0": ask("H4", "144", "--unsubscribe", "--qpn", "0"),
        "unsubscribe naming the source QP": ask("H4", "144", "--unsubscribe"),
        "a port's traps": ask("H4", "128", "--gid", h5),
        "a GID of no port": ask("H4", "128", "--gid", "0x00000000deadbeef"),
        "LIDs 1-3": ask("H5", "128", "--lids", "1-3"),
    }
    out["the port's and the LIDs'"] = table()
    out |= {
        "LIDs 5-2": ask("H5", "129", "--lids", "5-2"),
        "LIDs from 0x8000": ask("H5", "130", "--lids", "0x8000"),
        "a security trap without the SM_Key": ask("H6", "256"),
    }
    return out


def test_subscriptions_answer_like_opensm(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want, got = opensm_then_ours(sim, tmp_path, procs, answers)
    # what the comparison rests on: OpenSM took QPN 0, refused these, showed two records
    assert isinstance(want["QPN 0 (kept: the source QP)"], list) and isinstance(want["LIDs 5-2"], list)
    assert not any(isinstance(want[k], list) for k in ("unsubscribe naming QPN 0", "a GID of no port",
                                                        "LIDs from 0x8000", "a security trap without the SM_Key"))
    assert len(want["two subscriptions, newest first"]) == len(want["the port's and the LIDs'"]) == 2
    assert_same(got, want)
