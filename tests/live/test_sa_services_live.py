"""ServiceRecords on ibsim, answered by OpenSM 3.3's SA and by ours (`smagent --transport
umad run`), field by field: the same registrations, replacements and deletes sent from
several hosts with `smagent sa service-register` / `service-delete`, the newest
registration as `smagent sa services` reads it, the expiry of a lease, and `saquery -S`
(OpenSM's client) once one registration is left. Only what fits one MAD is compared:
under umad2sim OpenSM's table arrives cut to its first record, and our later segments
lose their last 32 bytes (docs/PITFALLS.md)."""
from __future__ import annotations

import time

from ibsim_harness import run_smagent
from smagent.model import netfile, topogen
from sa_harness import SA_MARKS, assert_same, opensm_then_ours, records, saquery
from sm_harness import procs  # noqa: F401 (the fixture)

pytestmark = SA_MARKS


def answers(sim) -> dict:
    """Each answer as `smagent sa` decodes it (or the exit and last line of a refusal)."""
    def ask(host, *args):
        r = run_smagent(["--transport", "umad", "sa", *args, "--json"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                        check=False)
        if r.returncode:
            return r.returncode, r.stderr.strip().splitlines()[-1]
        return r.json()["items"]

    out = {
        "no P_Key: answered 0xFFFF": ask("H3", "service-register", "svcA", "0x1000"),
        "a lease": ask("H3", "service-register", "svcB", "0x2000", "--lease", "100"),
        "the same ID from another port": ask("H4", "service-register", "svcA", "0x1000", "--p-key", "0xffff"),
        "a partition not held": ask("H4", "service-register", "svcC", "0x3000", "--p-key", "0x8001"),
        "the default partition, limited": ask("H4", "service-register", "svcD", "0x3000", "--p-key", "0x7fff"),
        "replaced": ask("H3", "service-register", "svcB2", "0x2000", "--lease", "200"),
    }
    out["newest first"] = ask("H5", "services")[:1]
    out |= {
        "delete by the P_Key sent (0)": ask("H3", "service-delete", "svcA", "0x1000"),
        "delete again": ask("H3", "service-delete", "svcA", "0x1000"),
        "delete without the P_Key registered": ask("H4", "service-delete", "svcA", "0x1000"),
        "delete, another name": ask("H4", "service-delete", "other", "0x1000", "--p-key", "0xffff"),
        "delete the replaced": ask("H3", "service-delete", "x", "0x2000"),
        "a one-second lease": ask("H6", "service-register", "svcE", "0x5000", "--lease", "1"),
    }
    time.sleep(3)  # OpenSM looks at its leases each second
    out["left after the lease"] = ask("H5", "services")
    out["saquery -S"] = records(saquery(sim, "-S").stdout)  # svcD alone: one MAD
    return out


def test_services_answer_like_opensm(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want, got = opensm_then_ours(sim, tmp_path, procs, answers)
    # what the comparison rests on: OpenSM refused one, deleted by RID, expired the lease
    assert not isinstance(want["a partition not held"], list) and not isinstance(want["delete again"], list)
    assert [r["service_name"] for r in want["left after the lease"]] == ["svcD"]
    assert want["no P_Key: answered 0xFFFF"][0]["service_p_key"] == 0xFFFF
    assert [r["ServiceName"] for r in want["saquery -S"]] == ["svcD"]
    assert_same(got, want)
