"""Does the serving thread's tuning (a 1 ms switch interval, small young GC passes, no full
pass: `smagent.sm.serving`) earn its keep? The latency of a PathRecord Get answered by the
serving thread while the daemon's thread computes and allocates, as routing does, with the
tuning and with Python's defaults.  Run: python3 bench/serving_tuning.py"""
import gc
import statistics
import subprocess
import sys
import time

ROUNDS = 200


def run(tuned: bool) -> str:
    from mad import sa
    from mad.header import Method
    from mad.sa_records import PathRecord
    from smagent.sm import serving
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.address import Address
    from smagent.transport.sim import SimTransport
    if not tuned:
        serving.SWITCH_INTERVAL_S, serving.SERVING_GC_THRESHOLD = sys.getswitchinterval(), gc.get_threshold()
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions())
    d.start()
    lids = sorted(d.sa.agent.subnet.lids)
    src = Address.gsi(d.sa.agent.subnet.sm_lid)
    lat = []
    with d.busy.serving():
        for i in range(ROUNDS):
            raw = sa.request(Method.GET, PathRecord(slid=lids[0], dlid=lids[-1]),
                             component_mask=PathRecord.mask("slid", "dlid"), transaction_id=i).encode()
            t.outbox.clear()
            t0 = time.perf_counter()
            t.deliver(raw, src)
            junk: list = []
            while not t.outbox:
                junk.append([{} for _ in range(50)])
                if len(junk) > 2000:
                    junk.clear()
            lat.append(time.perf_counter() - t0)
    lat.sort()
    return (f"{'tuned' if tuned else 'default'}: median {1e3 * statistics.median(lat):.1f} ms, "
            f"p95 {1e3 * lat[int(0.95 * len(lat))]:.1f} ms, max {1e3 * lat[-1]:.1f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(run(sys.argv[1] == "tuned"))
    else:
        for mode in ("tuned", "default", "tuned", "default"):  # each in its own process
            subprocess.run([sys.executable, __file__, mode], check=True)
