"""Credit loops: a cycle in the channel dependency graph the unicast walk built from the
routes of data traffic."""
from __future__ import annotations

from smagent.cycles import find_cycle  # noqa: F401 - verify's public name
from smagent.verify.model import _Defects, _Net


def _check_cdg(net: _Net, deps: dict, D: _Defects) -> None:
    cycle = find_cycle(deps)
    if not cycle:
        return
    hops = []
    for k, c in enumerate(cycle):
        nxt = cycle[(k + 1) % len(cycle)]
        hops.append({"switch": net.names[c >> 8], "port": c & 0xFF, "dlid": deps[c][nxt]})
    text = " -> ".join(f"{h['switch']}[{h['port']}]" for h in hops) + f" -> {hops[0]['switch']}[{hops[0]['port']}]"
    D.add("cdg_cycle", {"channels": len(cycle), "cycle": hops},
          f"channel dependency cycle of {len(cycle)} channels: {text} (dependencies from routes "
          f"to LIDs {', '.join(str(h['dlid']) for h in hops)})", cycle=hops)
