#!/usr/bin/env python3
"""How many switches hold the IPoIB broadcast group's MLID (0xC000) under `smagent run`
(in-process simulator, a 3-level fat tree): before any join, after three hosts on
different leaves joined, after one of them left. The joins decide the tree (issue 36
item 4): 0, then the switches between the members. Before that change the broadcast MLID
reached every host port whatever the joins (25 of 45 switches on fat_tree_3(6)).

    PYTHONPATH=. python bench/mcast_join_trees.py [K]     # fat_tree_3(K), K=6: 45 switches
"""
from __future__ import annotations

import sys

from mad import sa
from mad.header import Method
from mad.sa_records import MCMemberRecord
from smagent.model import topogen
from smagent.sa.groups import ipoib_broadcast_mgid
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.transport.address import Address
from smagent.transport.sim import SimTransport


def main(k: int) -> None:
    t = SimTransport(topogen.fat_tree_3(k))
    t.serve()
    d = Daemon(t, DaemonOptions(), clock=lambda: 1000.0)
    d.start()
    a = d.sa.agent
    switches = list(t.sim.switches())

    def holders() -> int:
        return sum(1 for n in switches if n.mft and n.mft[0])  # entry 0: MLID 0xC000

    def ask(method, port, tid):
        rec = MCMemberRecord(mgid=ipoib_broadcast_mgid(), port_gid=a._recs.gid(*port), join_state=1)
        q = sa.request(method, rec, component_mask=MCMemberRecord.mask("mgid", "port_gid", "join_state"),
                       transaction_id=tid)
        t.deliver(q.encode(), Address.gsi(1))
        d.step(max_wait=0)

    hosts = [(n, n.lid_ports()[0]) for n in sorted((n for n in a.subnet.nodes.values() if not n.is_switch),
                                                     key=lambda n: n.guid)]
    print(f"fat_tree_3({k}): {len(switches)} switches, {len(hosts)} hosts")
    print(f"before any join: {holders()} switches hold the broadcast MLID")
    picks = [hosts[1], hosts[len(hosts) // 2], hosts[-1]]
    for i, port in enumerate(picks):
        ask(Method.SET, port, i + 1)
    print(f"after 3 joins:   {holders()}")
    ask(Method.DELETE, picks[0], 9)
    print(f"after 1 leave:   {holders()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
