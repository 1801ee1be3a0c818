"""M_Key protection in a sweep (`SweepOptions.mkey_protection`, a `smagent.config.mkeys.Protection`),
as OpenSM's m_key, m_key_protection_level, m_key_lease_period and guid2mkey:

* before any SMP, STATE_DIR/guid2mkey (the keys this SM set) teaches the transport's key
  chain, so a restarted SM sends every SMP with the right key (no refused SMP); with one
  subnet key, that key is also the chain's default (discovery's first NodeInfo carries it);
* after discovery, a key a port shows (level 0 answers a Get with the M_Key) is learnt, so
  the Sets that replace it carry it;
* nodes that do not answer may be protected by a key this SM does not hold (its state
  directory was lost): the sweep waits out the lease (ours: the refused NodeInfos started
  every such port's lease timer, IBA 14.2.4.2) and discovers again, a bounded number of
  times, each with one log line;
* the plan gives every end port (a switch's port 0, every CA port) M_Key, M_KeyProtectBits
  and M_KeyLeasePeriod in the fields of its one PortInfo Set (`plan_fields`): all three in
  the same SubnSet (IBA C14-22, which OpenSM's release notes list as not met);
* guid2mkey is written (mode 0600, atomically) BEFORE the first Set that installs a key:
  a crash after the Set never leaves a key nobody kept;
* a Set that changed a key goes in a batch after the others to the same node (`key_last`),
  and the chain learns the new key from its response (`learn_set`).

Keys are secrets: nothing here logs or returns one.
"""
from __future__ import annotations

import logging
import os
import time

from mad import smp as smpcodec
from mad.attributes import AttrID, PortInfo
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery
from smagent.config import mkeys, files as paths
from smagent.sweep.state import SweepState
from smagent.sweep.tables import LiveTables
from smagent.transport.base import BETWEEN_ROUNDS_S, Request, SmpTimeout

log = logging.getLogger("smagent.sweep")

LEASE_ROUNDS = 64  # waits at most (each must find more nodes: one more layer of protected switches)


def protection(s: SweepState) -> mkeys.Protection | None:
    """The options' protection, else the desired state's (``mkey_protection:``)."""
    return s.opts.mkey_protection or getattr(s.opts.desired, "mkey_protection", None)


def prepare_keys(s: SweepState) -> None:
    """Read guid2mkey (whole: a bad line refuses the sweep, exit 2) and teach the key chain."""
    prot = protection(s)
    if prot is None:
        return
    if s.opts.state_dir:
        s.mkey_file = str(paths.StateDir(s.opts.state_dir).guid2mkey)
        s.assigned = mkeys.load_guid2mkey(s.mkey_file)
    keys = s.transport.keys
    keys.by_guid.update(s.assigned.keys)  # what this SM set last wins over a --mkey-file's guess
    if not prot.per_node and not keys.default:
        keys.default = prot.key
    for g, ps in s.assigned.paths.items():  # the node found down a path last time goes first
        if s.assigned.keys[g] != keys.default:  # (per-node keys, or a subnet key being replaced)
            for p in ps:
                keys.learn(path=p, key=s.assigned.keys[g])


_NO_ANSWER = discovery.NO_ANSWER.split(":", 1)[0]  # how discovery words a node that stayed silent


def _silent(topo: discovery.Topology) -> int:
    return sum(1 for d in topo.unreached if str(d.get("error", "")).startswith(_NO_ANSWER))


def _wait(s: SweepState, seconds: float) -> None:
    """Sleep, but let a running SM serve meanwhile (`Transport.between_rounds`: its
    control socket, other SMs' polls), as it does while a batch is in flight."""
    left = seconds
    while left > 0:
        step = min(BETWEEN_ROUNDS_S, left)
        time.sleep(step)
        left -= step
        if s.transport.between_rounds is not None:
            s.transport.between_rounds()


def discover(s: SweepState) -> discovery.Topology:
    """Discovery; with protection asked for, nodes that did not answer (the local port
    included) make it wait out the lease and discover again while that finds more nodes
    (never forever: each round must find more, at most `LEASE_ROUNDS`)."""
    prot = protection(s)
    if prot is None or s.opts.known is not None:
        with s.phase("discover"):
            return s.source.topology(s.transport)
    s.source = LiveTables()  # a walk handed over (`SweepOptions.discovered`) came before `prepare_keys`
    topo, found = None, -1
    for round_ in range(LEASE_ROUNDS + 1):
        if round_:
            silent = _silent(topo) if topo is not None else 1
            if not prot.lease:
                log.warning("M_Key: %d part(s) of the fabric do not answer and the lease is 0 (protection never "
                            "lapses): they stay unreachable without their key", silent)
                break
            log.warning("M_Key: %d part(s) of the fabric do not answer (protected by a key this SM does not "
                        "hold?); waiting out the M_Key lease (%d s) before discovering again", silent, prot.lease)
            s.r.notes.append(f"waited {prot.lease + 1} s for the M_Key lease of {silent} silent part(s) to run out")
            _wait(s, prot.lease + 1)  # the refused NodeInfos started the lease timers
        try:
            with s.phase("discover" if not round_ else f"discover_after_lease_{round_}"):
                topo = s.source.topology(s.transport)
        except SmpTimeout:
            if round_ == LEASE_ROUNDS:
                raise
            continue  # the local port itself is protected: topo stays as it was
        if not _silent(topo) or len(topo.nodes) <= found:
            break
        found = len(topo.nodes)
    if topo is None:  # the lease is 0: the local port's refusal stands
        raise SmpTimeout("the local port does not answer: it is M_Key-protected with a key this SM does not "
                         "hold, and the lease is 0")
    return topo


def _end_ports(n) -> list[int]:
    return [0] if n.is_switch else sorted(p for p in n.ports if p)


def learn_shown(s: SweepState) -> None:
    """A port that shows its M_Key (level 0, or the key we sent matched) holds that key:
    the chain learns it for the port's path, so the Sets that follow carry it."""
    if protection(s) is None:
        return
    keys = s.transport.keys
    for n in s.topo.nodes.values():
        for p in _end_ports(n):
            pi = n.ports.get(p)
            if pi is None or not pi.m_key or (p and p not in n.port_paths):
                continue
            path = n.path_to_port(p)
            if keys.for_path(path) != pi.m_key:
                keys.learn(path=path, lid=pi.lid, lmc=pi.lmc, guid=n.guid,
                           port_guid=None if n.is_switch else n.port_guids.get(p), key=pi.m_key)


def plan_fields(s: SweepState, n, port: int) -> dict:
    """The M_Key fields of ``port`` of ``n`` (an end port), or {}."""
    prot = protection(s)
    if prot is None or (n.is_switch and port != 0):
        return {}
    return prot.fields(n.guid)


def save_keys(s: SweepState) -> None:
    """guid2mkey, before the Sets that install the keys: every node the plan gives a key,
    and those not seen this time (kept for when they return)."""
    prot = protection(s)
    if prot is None:
        return
    planned = {c.guid: c.link["m_key"] for c in s.r.port_changes if "m_key" in c.link_diff}
    for g, k in planned.items():
        s.transport.keys.by_guid[g] = k  # a candidate if a Set's answer is lost (probes find it)
    table = mkeys.Assigned({**s.assigned.keys, **planned}, {**s.assigned.paths, **_paths_in(s.topo)})
    if not s.mkey_file or table == s.assigned:
        return
    os.makedirs(os.path.dirname(os.path.abspath(s.mkey_file)), exist_ok=True)
    mkeys.save_guid2mkey(s.mkey_file, table)
    s.assigned = table


def _paths_in(topo: discovery.Topology) -> dict[int, list[tuple[int, ...]]]:
    """Every DR path discovery asks a node's NodeInfo by: its own, and one through each
    switch port cabled to it (a switch behind two cables is asked down both)."""
    out: dict[int, set[tuple[int, ...]]] = {g: {n.path} for g, n in topo.nodes.items()}
    for (ga, pa), (gb, _pb) in topo.links.items():
        a = topo.nodes.get(ga)
        if a is not None and a.is_switch and gb in out:
            out[gb].add(a.path + (pa,))
    return {g: sorted(ps) for g, ps in out.items()}


def key_last(todo: list) -> tuple[list, list]:
    """(the Sets that keep the node's key, those that change it): a node's new key must
    not overtake the other Sets to it, which carry the old one."""
    return [c for c in todo if "m_key" not in c.link_diff], [c for c in todo if "m_key" in c.link_diff]


def relearn(s: SweepState, failed: list) -> None:
    """A key-changing Set whose answer was lost may have been applied: the port then
    refuses the old key (level 2 and 3 even a Get). Ask it once with the new key; if it
    answers, the Set took: learn the key, so the re-read that confirms the rest finds it."""
    todo = [c for c, _e in failed if "m_key" in c.link_diff]
    reqs = [Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port),
                                m_key=c.link["m_key"])) for c in todo]
    for c, rep in zip(todo, s.transport.execute(reqs, retries=0) if reqs else []):
        if rep.ok and rep.value(PortInfo).m_key == c.link["m_key"]:
            learn_set(s, c, rep.value(PortInfo))


def learn_set(s: SweepState, c, back) -> None:
    """A Set installed ``c.link``'s key (its answer ``back`` came): SMPs to the port carry it now."""
    n = s.topo.nodes[c.guid]
    s.transport.keys.learn(path=c.path, lid=back.lid, lmc=back.lmc, guid=c.guid,
                           port_guid=None if n.is_switch else n.port_guids.get(c.port), key=c.link["m_key"])
