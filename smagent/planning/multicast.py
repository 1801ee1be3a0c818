"""Multicast groups: where they come from, the tree each one gets, and the MFT it needs.

A group is an MLID and its member ports. Each group gets one spanning tree over the
switches: a BFS tree from a root switch chosen deterministically (the switch with the
smallest largest distance to the members' switches; ties: smallest sum of distances,
then lowest GUID), pruned to the branches that lead to members. Every switch on the
tree gets an MFT entry for the MLID holding its ports toward tree neighbours plus its
member ports. The ingress port is never special-cased: a switch never sends a packet
back out the port it came in on, whatever the mask says (IBA 18.2.4.3.3; the seed:
"if the bit corresponding to the port that the packet was received on is set to one,
the packet is not forwarded through that port"), so one mask serves every sender and
each member gets exactly one copy (a tree has no cycles).

Group file (``smagent sweep --mcast-groups FILE``), one statement per line::

    # comments start with '#', anywhere on a line; blank lines are ignored
    # MLID  MEMBER...
    0xC000  all                                   # every CA port (the IPoIB broadcast group)
    0xC001  0x0002c903000a1b2d 0x0002c903000a1b31  # port GUIDs
    0xC002  0x0002c90300001234                     # a switch GUID: that switch's port 0
    # default-multicast SWITCH_GUID PRIMARY NOT_PRIMARY
    default-multicast 0x0002c90300001234 1 2

* MLID: hex (0x...) or decimal, 0xC000..0xFFFE, and inside every switch's
  MulticastFDBCap (0xC000 + cap - 1); each MLID once per file.
* MEMBER: a CA port GUID, a switch GUID (= its management port 0), or ``all``.
  Members must be in the fabric and hang off a switch.
* ``default-multicast``: SwitchInfo.DefaultMulticastPrimaryPort and
  DefaultMulticastNotPrimaryPort of one switch (ports 0..NumPorts, or 255 = none).
  Without it a sweep leaves both as the switch holds them: they only matter for MLIDs
  with no MFT entry (or above the table), which no group we program uses, and an SM
  has no good generic value for them (a wrong one floods or black-holes multicast the
  operator may have configured on purpose).

Errors name ``file:line``. Without a file the fabric gets one group: 0xC000 (the
IPoIB broadcast MLID OpenSM uses) with every CA port as a member. A file replaces
that default; write ``0xC000 all`` in it to keep it.
"""
from __future__ import annotations

import collections
import dataclasses
import re

from mad import forwarding as fw
from smagent.errors import BadInput

DEFAULT_MLID = 0xC000
ALL = "all"
NO_PORT = 255


class GroupFileError(BadInput):
    """A group file (or a group) that cannot be used; `problems` lists every one."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems), problems)


@dataclasses.dataclass(frozen=True)
class Group:
    mlid: int
    members: tuple  # port GUIDs, and/or the string "all"
    where: str = "default"  # "file:line" for people

    @property
    def label(self) -> str:
        return f"group 0x{self.mlid:04x} ({self.where})"


@dataclasses.dataclass(frozen=True)
class DefaultMulticast:
    switch: int  # switch GUID
    primary: int
    not_primary: int
    where: str


@dataclasses.dataclass
class GroupSpec:
    groups: list[Group]
    defaults: list[DefaultMulticast] = dataclasses.field(default_factory=list)
    source: str | None = None


_NUM = re.compile(r"^(0[xX][0-9a-fA-F]+|\d+)$")


def _num(tok: str) -> int | None:
    return int(tok, 0) if _NUM.match(tok) else None


def parse_groups(text: str, source: str = "<groups>") -> GroupSpec:
    """Parse a group file; every problem is collected and raised as one GroupFileError."""
    problems: list[str] = []
    groups: list[Group] = []
    defaults: list[DefaultMulticast] = []
    seen_mlid: dict[int, int] = {}
    seen_default: dict[int, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        where = f"{source}:{n}"
        toks = raw.split("#", 1)[0].split()
        if not toks:
            continue
        if toks[0].lower() == "default-multicast":
            vals = [v for v in map(_num, toks[1:]) if v is not None]
            if len(toks) != 4 or len(vals) != 3:
                problems.append(f"{where}: expected 'default-multicast SWITCH_GUID PRIMARY NOT_PRIMARY' "
                                f"(numbers, hex with 0x), got {raw.strip()!r}")
                continue
            guid, pri, npri = vals
            bad = [f"{what} {v}" for what, v in (("primary port", pri), ("not-primary port", npri))
                   if not 0 <= v <= NO_PORT]
            if bad:
                problems.append(f"{where}: {', '.join(bad)}: a port is 0..254, or 255 for none")
                continue
            if guid in seen_default:
                problems.append(f"{where}: default-multicast for 0x{guid:016x} again (first at line "
                                f"{seen_default[guid]})")
                continue
            seen_default[guid] = n
            defaults.append(DefaultMulticast(guid, pri, npri, where))
            continue
        mlid = _num(toks[0])
        if mlid is None:
            problems.append(f"{where}: expected 'MLID MEMBER...' or 'default-multicast ...', "
                            f"got {toks[0]!r} (an MLID is 0xC000..0xFFFE)")
            continue
        if not fw.MULTICAST_LID_MIN <= mlid <= fw.MULTICAST_LID_MAX:
            problems.append(f"{where}: MLID 0x{mlid:x} is not a multicast LID (0xc000..0xfffe)")
            continue
        if mlid in seen_mlid:
            problems.append(f"{where}: MLID 0x{mlid:04x} appears again (first at line {seen_mlid[mlid]})")
            continue
        seen_mlid[mlid] = n
        members: list = []
        ok = True
        for tok in toks[1:]:
            m: int | str | None
            if tok.lower() == ALL:
                m = ALL
            else:
                m = _num(tok)
                if m is None or not 0 < m <= 0xFFFFFFFFFFFFFFFF:
                    problems.append(f"{where}: member {tok!r} is not a port GUID (hex 0x..., 64 bits) or 'all'")
                    ok = False
                    continue
            if m in members:
                what = "'all'" if m == ALL else f"0x{m:016x}"
                problems.append(f"{where}: member {what} listed twice in group 0x{mlid:04x}")
                ok = False
                continue
            members.append(m)
        if not toks[1:]:
            problems.append(f"{where}: group 0x{mlid:04x} has no members")
            ok = False
        if ok:
            groups.append(Group(mlid, tuple(members), where))
    if problems:
        raise GroupFileError(problems)
    if not groups and not defaults:
        raise GroupFileError([f"{source}: no groups (expected lines 'MLID MEMBER...')"])
    return GroupSpec(groups, defaults, source)


def load_groups(path) -> GroupSpec:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GroupFileError([f"{path}: cannot read the group file: {e.strerror or e}"]) from None
    except UnicodeDecodeError as e:
        raise GroupFileError([f"{path}: not a text file ({e.reason})"]) from None
    return parse_groups(text, str(path))


def default_spec() -> GroupSpec:
    return GroupSpec([Group(DEFAULT_MLID, (ALL,), "default IPoIB broadcast group")])


# -- the fabric side ----------------------------------------------------------------------
def switch_adjacency(topo) -> dict[int, list[tuple[int, int, int]]]:
    """switch -> sorted [(port, neighbour switch, neighbour's port)] for switch-switch links."""
    sw = {n.guid for n in topo.switches()}
    adj: dict[int, list[tuple[int, int, int]]] = {g: [] for g in sw}
    for (g, p), (g2, p2) in topo.links.items():
        if g in sw and g2 in sw:
            adj[g].append((p, g2, p2))
    for v in adj.values():
        v.sort()
    return adj


def ca_ports(topo) -> dict[int, tuple[int, int]]:
    """CA port GUID -> (switch, switch port) it is cabled to (CA ports on a switch only)."""
    out = {}
    for n in topo.cas():
        for p in n.lid_ports():
            pg = n.port_guids.get(p)
            peer = topo.links.get((n.guid, p))
            if pg is None or peer is None or not topo.nodes[peer[0]].is_switch:
                continue
            out[pg] = peer
    return out


def _bfs(adj, start) -> dict[int, int]:
    dist = {start: 0}
    q = collections.deque([start])
    while q:
        x = q.popleft()
        for _p, y, _q in adj[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                q.append(y)
    return dist


def choose_root(adj, member_switches) -> int:
    """The switch minimizing (max distance, sum of distances, GUID) to the member switches,
    among the switches that reach all of them. Callers check connectivity first.

    One breadth-first search from all members at once: each switch holds the set of
    members whose search has reached it (a bit per member in an int), and each level a
    switch takes its neighbours' sets. A member newly in the set at level L is at
    distance L; the set is full at the switch's largest distance. (A search per member
    costs members x links: 648 x 58,000 on the 11,664-host tree.)"""
    members = sorted(member_switches)
    full = (1 << len(members)) - 1
    reach = {g: 0 for g in adj}
    for k, m in enumerate(members):
        reach[m] |= 1 << k
    total = dict.fromkeys(adj, 0)
    far = {g: 0 for g in adj if reach[g] == full}
    level = 0
    while True:
        level += 1
        grown = {}
        for g, ports in adj.items():
            r = reach[g]
            if r == full:
                continue
            got = r
            for _p, y, _q in ports:
                got |= reach[y]
            if got != r:
                grown[g] = got
        if not grown:
            break
        for g, got in grown.items():
            total[g] += level * (got & ~reach[g]).bit_count()
            reach[g] = got
            if got == full:
                far[g] = level
    if not far:
        raise ValueError("no switch reaches every member switch")  # callers check connectivity first
    return min((d, total[g], g) for g, d in far.items())[2]


def spanning_tree(adj, root: int, member_switches) -> dict[int, set[int]]:
    """BFS tree from `root` (ports in ascending order, so deterministic), pruned to the
    branches that reach a member switch: switch -> ports toward its tree neighbours.
    Both ends of a tree edge name the same cable (parallel links: the lowest port)."""
    parent: dict[int, tuple[int, int, int]] = {}  # child -> (parent, parent's port, child's port)
    seen = {root}
    q = collections.deque([root])
    while q:
        x = q.popleft()
        for p, y, yp in adj[x]:
            if y not in seen:
                seen.add(y)
                parent[y] = (x, p, yp)
                q.append(y)
    on = {root}
    edges = []  # children whose edge to their parent is on the tree
    for m in sorted(member_switches):
        x = m
        while x not in on:
            on.add(x)
            edges.append(x)
            x = parent[x][0]
    ports: dict[int, set[int]] = {s: set() for s in on}
    for x in edges:
        px, pp, cp = parent[x]
        ports[x].add(cp)
        ports[px].add(pp)
    return ports


@dataclasses.dataclass
class GroupTree:
    """One group's spanning tree: its root switch, member ports and each switch's MFT ports."""
    group: Group
    root: int
    members: list[tuple[int, int]]  # (switch, port) of every member
    ports: dict[int, frozenset[int]]  # switch -> MFT ports for this MLID


@dataclasses.dataclass
class MulticastPlan:
    """The multicast a sweep programs: a tree per group, the MFT entries every switch
    should hold ({switch: {mlid: ports}}) and the default multicast ports."""
    trees: list[GroupTree]
    desired: dict[int, dict[int, frozenset[int]]]  # switch -> {mlid: ports}
    defaults: dict[int, tuple[int, int]]  # switch -> (primary, not primary), from the file
    notes: list[str] = dataclasses.field(default_factory=list)

    def mlids(self) -> list[int]:
        return sorted(t.group.mlid for t in self.trees)


def plan(topo, spec: GroupSpec | None = None) -> MulticastPlan:
    """Trees and desired MFT entries for `spec` (None: the default group) on `topo`.

    A group file's problems raise GroupFileError naming file:line. For the default group
    a fabric whose switches cannot hold MLID 0xC000 gets a note and no multicast."""
    is_default = spec is None
    spec = spec or default_spec()
    problems: list[str] = []
    switches = {n.guid: n for n in topo.switches()}
    adj = switch_adjacency(topo)
    cas = ca_ports(topo)
    all_members = sorted(cas)
    trees: list[GroupTree] = []
    desired: dict[int, dict[int, frozenset[int]]] = {}
    notes: list[str] = []

    no_cap = [n for n in switches.values() if n.switch_info is None]
    for g in spec.groups:
        for n in sorted(switches.values(), key=lambda n: n.guid):
            si = n.switch_info
            cap = si.multicast_fdb_cap if si is not None else 0
            if g.mlid - fw.MULTICAST_LID_MIN >= cap:
                limit = (f"MulticastFDBCap {cap}: MLIDs 0xc000..0x{fw.MULTICAST_LID_MIN + cap - 1:04x}"
                         if cap else "MulticastFDBCap 0: no multicast forwarding table")
                problems.append(f"{g.where}: MLID 0x{g.mlid:04x} is beyond switch {n.description} "
                                f"(0x{n.guid:016x})'s {limit}")
                break
    if no_cap:
        problems.append(f"switch {no_cap[0].description}: SwitchInfo was not read; cannot program multicast")
    if problems and is_default:
        return MulticastPlan([], {}, {}, [f"multicast not programmed: {p}" for p in problems])

    for g in spec.groups:
        members: list[tuple[int, int]] = []
        for m in g.members:
            if m == ALL:
                members += [cas[pg] for pg in all_members]
            elif m in cas:
                members.append(cas[m])
            elif m in switches:
                members.append((m, 0))
            else:
                node = next((n for n in topo.nodes.values() if m in n.port_guids.values()), None)
                if node is None:
                    problems.append(f"{g.where}: member 0x{m:016x} is not a port GUID of this fabric")
                else:
                    problems.append(f"{g.where}: member 0x{m:016x} ({node.description}) is not cabled to a switch")
        members = sorted(set(members))
        if not members:
            if is_default:
                notes.append("multicast: no CA port hangs off a switch; no group to program")
            else:
                problems.append(f"{g.where}: group 0x{g.mlid:04x} has no member in this fabric")
            continue
        msw = {s for s, _p in members}
        reach = _bfs(adj, min(msw))
        cut = sorted(msw - set(reach))
        if cut:
            problems.append(f"{g.where}: group 0x{g.mlid:04x}: member switches {switches[min(msw)].description} and "
                            f"{switches[cut[0]].description} have no switch path between them")
            continue
        root = choose_root(adj, msw)
        tree = spanning_tree(adj, root, msw)
        for s, p in members:
            tree.setdefault(s, set()).add(p)
        ports = {s: frozenset(ps) for s, ps in tree.items() if ps}
        trees.append(GroupTree(g, root, members, ports))
        for s, ps in ports.items():
            desired.setdefault(s, {})[g.mlid] = ps

    defaults: dict[int, tuple[int, int]] = {}
    for d in spec.defaults:
        n = switches.get(d.switch)
        if n is None:
            what = topo.nodes.get(d.switch)
            problems.append(f"{d.where}: 0x{d.switch:016x} is " + (f"{what.description!r}, not a switch" if what
                                                                    else "not a switch of this fabric"))
            continue
        bad = [p for p in (d.primary, d.not_primary) if p != NO_PORT and p > n.num_ports]
        if bad:
            problems.append(f"{d.where}: port {bad[0]} does not exist on {n.description}: ports 0..{n.num_ports}, "
                            f"or 255 for none")
            continue
        defaults[d.switch] = (d.primary, d.not_primary)
    if problems:
        raise GroupFileError(problems)
    return MulticastPlan(trees, desired, defaults, notes)
