"""An in-process InfiniBand fabric: every node's SMA, directed-route and LID-routed SMP
forwarding hop by hop, and a data-plane trace through the programmed tables.

It depends only on `mad` and the fabric model (never on the agent's logic), so it can
act as an independent witness of what the agent programmed.

    sim = SimFabric.load("fabric.net")          # or SimFabric.from_fabric(fabric, linear_fdb_cap=1024)
    resp = sim.handle(raw_smp, ("H1", 1))        # response bytes, or None when lost
    t = trace(sim, ("H1", 1), dlid=7)            # t.outcome, t.hops, t.dest
"""
from smagent.sim.dataplane import Trace, trace
from smagent.sim.fabric_sim import DEFAULT_TOPOLOGY, Drop, SimFabric
from smagent.sim.nodes import Dropped, Looped, SimConfigError, SimNode

__all__ = ["SimFabric", "SimNode", "Trace", "trace", "Drop", "Dropped", "Looped", "SimConfigError",
           "DEFAULT_TOPOLOGY"]
