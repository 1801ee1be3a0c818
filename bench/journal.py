"""What checking the previous apply journal costs a sweep (`Journal.pending`), after the
apply of a bring-up of a 3-level fat tree of 36-port switches (11,664 hosts, 1,620
switches, 13,284 LIDs: 208 LFT blocks per switch, 336,960 blocks in all).

    python bench/journal.py                        # k=36, this tree's smagent
    python bench/journal.py --against /work/main   # the same with another tree's smagent (before/after)
    python bench/journal.py --k 16 --repeat 3

The journal is written by the real `Journal` the way `smagent.fdb.apply.Apply` writes it:
one begin record with every block (old None: a bring-up writes above LinearFDBTop), the
confirmed blocks in chunks of JOURNAL_CHUNK (flushed per chunk, one fsync after the last,
where `Journal.sync` exists), then done. Timed (best of --repeat):

* ``pending(live)``: what the next sweep does, on STATE/apply.journal;
* ``pending(finished file)``: the finished journal wherever it now is (moved into
  journals/ by done, or still in place): a finished journal left in place;
* ``pending(interrupted)``: the same journal without its done record (read whole: the
  interrupted apply is needed, for reference).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=36, help="switch radix of the 3-level fat tree (default 36)")
    ap.add_argument("--repeat", type=int, default=5, help="timings per case, the best is reported (default 5)")
    ap.add_argument("--against", metavar="DIR", help="import smagent from DIR instead of this tree")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    return ap.parse_args()


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    a = _args()
    sys.path.insert(0, a.against or str(Path(__file__).resolve().parent.parent))
    from smagent.fdb import lft as linear
    from smagent.fdb.apply import JOURNAL_CHUNK
    from smagent.fdb.journal import Journal

    switches = 5 * a.k * a.k // 4
    lids = a.k ** 3 // 4 + switches
    blocks = (lids + 1 + 63) // 64
    changes = [linear.BlockChange(0x0002C90000000000 + s, f"S{s}", (0, 1, 2, 3), b, None, bytes([s % 250]) * 64)
               for s in range(switches) for b in range(blocks)]
    tmp = Path(tempfile.mkdtemp(prefix="smagent-journal-bench-"))
    try:
        live = tmp / "state" / "apply.journal"
        j = Journal(live)
        t0 = time.perf_counter()
        j.begin(changes)
        chunked = "sync" in Journal.__dict__  # flushed per chunk, fsynced once (as Apply writes it)
        for i in range(0, len(changes), JOURNAL_CHUNK):
            if chunked:
                j.written_many(changes[i:i + JOURNAL_CHUNK], sync=False)
            else:
                j.written_many(changes[i:i + JOURNAL_CHUNK])
        if chunked:
            j.sync()
        j.done()
        write_s = time.perf_counter() - t0
        finished = live if live.exists() else max((live.parent / "journals").glob("*.journal"))
        size = finished.stat().st_size
        interrupted = tmp / "interrupted.journal"
        with open(finished, "rb") as src, open(interrupted, "wb") as dst:
            lines = src.read().splitlines(keepends=True)
            assert json.loads(lines[-1])["event"] == "done"
            dst.writelines(lines[:-1])
        t_live, p_live = _best(lambda: Journal.pending(live), a.repeat)
        t_fin, p_fin = _best(lambda: Journal.pending(finished), a.repeat)
        t_int, p_int = _best(lambda: Journal.pending(interrupted), max(1, min(a.repeat, 2)))
        assert p_live is None and p_fin is None and len(p_int.plan) == len(changes)
        res = {"smagent": sys.modules["smagent"].__file__, "switches": switches, "lids": lids,
               "lft_blocks": len(changes), "journal_bytes": size, "journal_moved": finished != live,
               "write_s": round(write_s, 3), "pending_live_s": t_live, "pending_finished_file_s": t_fin,
               "pending_interrupted_s": round(t_int, 3)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"smagent from {res['smagent']}")
    print(f"{switches} switches x {blocks} LFT blocks = {len(changes)} blocks; journal {size / 2**20:.1f} MiB, "
          f"written in {write_s:.2f} s, {'moved to journals/' if res['journal_moved'] else 'left in place'} by done")
    print(f"pending(live apply.journal)      {t_live * 1e3:10.3f} ms")
    print(f"pending(finished journal file)   {t_fin * 1e3:10.3f} ms")
    print(f"pending(interrupted, read whole) {t_int * 1e3:10.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
