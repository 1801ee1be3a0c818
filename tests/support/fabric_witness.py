"""What infiniband-diags say about a fabric ibsim runs: the independent check of a
bring-up (used by the live tests and by bench/lossy_vs_opensm.py).

    report = witness(sim)   # after `Error ... 0` on every node: the check itself must not be lossy
    report.no_lid, report.not_active, report.unreachable  # each empty on a healthy fabric

* ports and their LIDs and states: ``iblinkinfo -l`` (a directed-route walk of its own):
  every cabled port, the LID of its node (a switch: port 0's), its logical state;
* forwarding: ``ibroute LID`` of every switch, then every (source, destination) pair
  of LIDs is walked hop by hop through those tables and the cabling iblinkinfo showed,
  as a packet would go; a pair that loops, meets a port with no cable or no entry, or
  leaves the fabric is unreachable.
"""
from __future__ import annotations

import dataclasses
import re

# 0x...0 "   name"   LID  PORT[  ] ==( 4X 2.5 Gbps Active/  LinkUp)==>  0x...  LID  PORT[ ] "peer" ...
_LINE = re.compile(r'^(0x[0-9a-f]+)\s+"\s*(.*?)"\s+(\d+)\s+(\d+)\[[^\]]*\]\s+==\((.*?)\)==>\s*(.*)$')
_STATE = re.compile(r"(\w+)/\s*\w+\s*$")
_PEER = re.compile(r'^(0x[0-9a-f]+)\s+(\d+)\s+(\d+)\[')
_ROUTE = re.compile(r"^(0x[0-9a-f]+) (\d+) :", re.M)


@dataclasses.dataclass
class Witness:
    ports: dict  # (guid, port) -> {"name", "lid", "state", "peer": (guid, port) or None}
    lids: dict  # LID -> (guid, port): who owns it (a switch: port 0)
    lfts: dict  # switch guid -> {lid: port}
    no_lid: list  # "name port p" of cabled ports whose node has no LID
    not_active: list  # "name port p: State" of cabled ports not Active
    unreachable: list  # (source LID, destination LID) pairs a packet cannot cross

    def ok(self) -> bool:
        return not (self.no_lid or self.not_active or self.unreachable)

    def summary(self) -> dict:
        return {"ports": len(self.ports), "no_lid": len(self.no_lid), "not_active": len(self.not_active),
                "unreachable_pairs": len(self.unreachable)}


def read_links(text: str) -> dict:
    """``iblinkinfo -l`` output -> {(guid, port): {"name", "lid", "state", "peer"}} of
    cabled ports (the ``==( ... )==>`` lines with a peer)."""
    ports = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        guid, name, lid, port, link, rest = m.groups()
        peer = _PEER.match(rest.strip())
        if peer is None:  # a port with nothing at the far end
            continue
        st = _STATE.search(link)
        ports[(int(guid, 16), int(port))] = {
            "name": name, "lid": int(lid), "state": st.group(1) if st else link.strip(),
            "peer": (int(peer.group(1), 16), int(peer.group(3)))}
    return ports


def walk(lfts: dict, ports: dict, lids: dict, src: int, dst: int) -> bool:
    """Can a packet from LID ``src`` reach LID ``dst`` through the tables (``lfts``, by
    switch) and cables (``ports``)? ``lids``: LID -> (guid, port), a switch's port 0."""
    node, port = lids[src]
    out = None if node in lfts else port  # a CA port sends into its cable
    for _hop in range(64):
        if out is None:  # at a switch: its table decides
            out = lfts[node].get(dst)
            if out is None:
                return False
            if out == 0:
                return lids[dst] == (node, 0)
        info = ports.get((node, out))
        if info is None:
            return False
        node, port = info["peer"]
        if node not in lfts:  # arrived at a CA port: delivered if it owns dst
            return (node, port) == lids[dst]
        out = None
    return False  # a loop


def witness(sim) -> Witness:
    """Run iblinkinfo and ibroute against ``sim`` (an ibsim_harness.IbSim) and check."""
    ports = read_links(sim.run(["iblinkinfo", "-l"]).stdout)
    lids: dict = {}
    for (g, p), info in sorted(ports.items()):
        if info["lid"]:
            lids.setdefault(info["lid"], (g, p))
    lfts: dict = {}  # ibroute answers only for a switch
    for lid, (g, _p) in sorted(lids.items()):
        if g in lfts:
            continue
        r = sim.run(["ibroute", str(lid)], check=False)
        if r.returncode == 0 and "Unicast lids" in r.stdout:
            lfts[g] = {int(x, 16): int(port) for x, port in _ROUTE.findall(r.stdout)}
    lids = {lid: ((g, 0) if g in lfts else (g, p)) for lid, (g, p) in lids.items()}
    no_lid = sorted(f"{i['name']} port {p}" for (g, p), i in ports.items() if not i["lid"])
    not_active = sorted(f"{i['name']} port {p}: {i['state']}" for (g, p), i in ports.items()
                        if i["state"] != "Active")
    unreachable = [(a, b) for a in sorted(lids) for b in sorted(lids)
                   if a != b and not walk(lfts, ports, lids, a, b)]
    return Witness(ports, lids, lfts, no_lid, not_active, unreachable)
