"""What a drain costs in SMPs (`Session.drain`, issue 40 item 1) on the in-process simulator:
all of them, the LFT and MFT Sets, and the proof's read-back (every SMP sent after the last
table Set: what `smagent.sweep.drain.prove` reads). The fabric is swept first (not counted).

    python bench/drain_cost.py                 # ft3 k=10 (250 hosts), drain A0, the default engine
    python bench/drain_cost.py 36 648          # ft3 k=36 cut to 648 hosts (396 switches)
    python bench/drain_cost.py 10 250 L0 updn  # K HOSTS TARGET ENGINE
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import smagent  # noqa: E402
from mad.smp import attribute_name  # noqa: E402
from smagent.model import netfile, topogen  # noqa: E402

TABLE_SETS = (0x19, 0x1B)  # LinearForwardingTable, MulticastForwardingTable


def main(k: int, hosts: int | None, target: str, routing: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        net = os.path.join(tmp, "ft3.net")
        netfile.save(topogen.fat_tree_3(k, hosts=hosts), net)
        with smagent.connect("sim", topology=net) as s:
            assert s.sweep(routing=routing).problems == []
            sent: list = []
            s.transport.on_send = lambda req: sent.append((req.smp.method, req.smp.attribute_id))
            t0 = time.monotonic()
            r = s.drain([target], routing=routing)
            seconds = time.monotonic() - t0
    last_set = max(i for i, (m, a) in enumerate(sent) if m == 0x02 and a in TABLE_SETS)
    proof = collections.Counter(attribute_name(a) for _m, a in sent[last_set + 1:])
    sets = collections.Counter(a for m, a in sent if m == 0x02 and a in TABLE_SETS)
    print(f"ft3 k={k} hosts={hosts or 'all'}: drain {target} ({routing or 'default engine'}): safe={r.safe}, {len(sent):,} SMPs in {seconds:.1f} s; "
          f"{sets[0x19]} LFT Sets, {sets[0x1B]} MFT Sets; proof {len(sent) - last_set - 1:,} SMPs "
          "(" + ", ".join(f"{name} {n:,}" for name, n in proof.most_common()) + ")")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 10, int(args[1]) if len(args) > 1 else None, args[2] if len(args) > 2 else "A0",
         args[3] if len(args) > 3 else None)
