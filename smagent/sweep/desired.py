"""Desired state as a file: what the fabric should hold, in YAML or JSON.

    routing: auto                # as --routing: auto | minhop | updn[:GUID,...] | ftree[:fallback=E] | dfsssp | file:PATH
    root: [Spine1]               # updn only: its root switches (else it chooses and says which)
    lmc: 0
    lid_file: guid2lid           # optional: keep LIDs across runs (OpenSM's format)
    lft:                         # static entries; they override routing
      - {switch: Switch1, lid: 5, port: 3}
      - {switch: "0,1", lid: 6, port: 2}
    multicast:                   # groups; members are CA ports, or all (every CA port)
      - {mlid: 0xC001, members: [Hca1, 0x0000000000100004, "0,1,3", 7]}
    multicast_prune: false       # true: remove MFT entries of MLIDs not listed (default: keep them)
    switches:                    # SwitchInfo components a master SM owns
      Switch1: {linear_fdb_top: 200, default_port: 0}
    links:                       # link configuration (smagent.linkconf); defaults are OpenSM's
      subnet_prefix: 0xfe80000000000000
      max_mtu: 4096              # bytes
      max_vls: 8                 # data VLs: 1, 2, 4, 8 or 15
      sl2vl: "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7"
      vlarb_high: "0:4,1:0"      # OpenSM's syntax
      qos: auto                  # SL2VL/VLArb: auto (default) repairs unusable tables only;
                                 # true writes them everywhere (opensm -Q); false leaves them
    partitions_file: /etc/opensm/partitions.conf   # OpenSM's grammar (smagent.config.partitions), or:
    partitions:                  # the same, structured
      - {name: storage, pkey: 0x8001, ipoib: true, mtu: 4, members: [ALL_CAS, "0x0002c90300000001=full"]}
    qos_policy: /etc/smagent/qos-policy.conf   # OpenSM's qos-policy.conf and qos_* tables (smagent.config.qospolicy)
    mkey_protection:             # as --mkey-protect (smagent.config.mkeys.Protection); keys only in files
      level: 2                   # M_KeyProtectBits 0-3
      lease: 60                  # M_KeyLeasePeriod, seconds (0: never lapses)
      secret_file: /etc/smagent/mkey.secret   # per-node keys (HMAC-SHA256), or
      # key_file: /etc/smagent/mkey           # one key for the subnet (one line, as --sm-key-file)

Switches and members are targets in the CLI's syntax (`smagent.discovery.targets`, one lookup:
`targets.find_node`): a LID (the node holding it now), a DR path ("0,1,3"), a node or
port GUID, a node description (quoted to force it, e.g. '"5"'); members also ``all``.
A CA named by node GUID or description joins with every port, by port GUID, LID or DR
path with that port. `load()` checks the shape of the
file; `resolve()` checks it against a discovered fabric (unknown switch, LID out of
range, a port the switch lacks, an MLID outside 0xC000-0xFFFE, ...). Both collect every
problem and raise one DesiredStateError listing them all, before anything is sent.
"""
from __future__ import annotations

from typing import Any

import dataclasses
import json
import os

from mad import forwarding as fw
from mad.errors import MadError
from smagent.planning import multicast
from smagent.discovery import targets
from smagent import routing as routingmod
from smagent.errors import BadInput

KEYS = {"routing", "root", "lmc", "lid_file", "lft", "multicast", "multicast_prune", "switches", "links",
        "partitions", "partitions_file", "mkey_protection", "qos_policy"}
SWITCH_KEYS = {"linear_fdb_top", "default_port", "default_multicast_primary_port",
               "default_multicast_not_primary_port", "life_time_value"}


class DesiredStateError(BadInput):
    def __init__(self, source: str, problems: list[str]):
        super().__init__(f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}:\n  "
                         + "\n  ".join(problems), problems)


@dataclasses.dataclass
class DesiredState:
    source: str = "DesiredState built in code"  # where it came from, for messages: the file
    routing: routingmod.RoutingSpec = routingmod.DEFAULT  # parsed by routing.parse_spec
    root: list = dataclasses.field(default_factory=list)
    lmc: int = 0
    lid_file: str | None = None
    lft: list = dataclasses.field(default_factory=list)  # [(switch ref, lid, port)]
    multicast: list = dataclasses.field(default_factory=list)  # [(mlid, [member refs])]
    switches: dict = dataclasses.field(default_factory=dict)  # switch ref -> {component: value}
    multicast_prune: bool = False  # remove MFT entries of MLIDs outside `multicast`
    links: object = None  # links.LinkOptions, when the file has a links section
    partitions: object = None  # partitions.PartitionConfig: `partitions:` or `partitions_file:`
    mkey_protection: object = None  # mkeys.Protection: `mkey_protection:`
    qos_policy: object = None  # qospolicy.QosPolicy: `qos_policy:` (a file's path)
    given: frozenset = frozenset()  # the top-level keys the document named

    def __post_init__(self) -> None:
        if isinstance(self.routing, str):  # built in code as a script writes it: the CLI's parser
            self.routing = routingmod.parse_spec(self.routing)

    def sets(self, key: str) -> bool:
        """Whether this desired state decides ``key`` (routing, lmc, lid_file, ...): the
        document named it, or it differs from the default (a DesiredState built in code)."""
        default = next(f.default for f in dataclasses.fields(self) if f.name == key)
        return key in self.given or getattr(self, key) != default


@dataclasses.dataclass
class Resolved:
    """The desired state with names turned into GUIDs of a discovered fabric."""
    static_lft: dict  # switch guid -> {lid: port}
    groups: dict  # mlid -> set of (ca guid, port), or multicast.ALL: every CA port
    switch_settings: dict  # switch guid -> {component: value}
    roots: list = dataclasses.field(default_factory=list)  # updn root switch GUIDs, in the file's order


def _int(v):
    if isinstance(v, bool):
        raise ValueError
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return int(v, 0)
    raise ValueError


def load(path) -> DesiredState:
    """Read and shape-check a desired-state file (YAML, or JSON by extension)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise DesiredStateError(path, [f"cannot read: {e.strerror}"]) from None
    try:
        if path.endswith(".json"):
            doc = json.loads(text)
        else:
            import yaml
            doc = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - json and yaml raise their own families
        raise DesiredStateError(path, [f"not valid {'JSON' if path.endswith('.json') else 'YAML'}: {e}"]) from None
    return parse(doc, path)


def parse(doc, source: str = "<desired state>") -> DesiredState:
    problems: list[str] = []
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise DesiredStateError(source, ["the top level must be a mapping"])
    ds = DesiredState(source, given=frozenset(doc))
    for k in sorted(set(doc) - KEYS):
        problems.append(f"unknown key {k!r} (known: {', '.join(sorted(KEYS))})")
    if "routing" in doc:
        r = doc["routing"]
        try:
            ds.routing = routingmod.parse_spec(r)  # the CLI's parser: the same engines, names and errors
        except routingmod.RoutingError as err:
            problems.append(f"routing: {r!r} is not a routing spec: {err}")
    if "root" in doc:
        roots = doc["root"] if isinstance(doc["root"], list) else [doc["root"]]
        ds.root = [_ref(x) for x in roots]
        if ds.routing.engine != "updn" or ds.routing.roots:
            problems.append(f"root: roots are for routing: updn (routing is {str(ds.routing)!r})")
    if "lmc" in doc:
        try:
            lmc = _int(doc["lmc"])
        except ValueError:
            lmc = None
        if lmc is None or fw.lmc_problem(lmc):
            problems.append(f"{fw.lmc_problem(doc['lmc'], 'lmc:')}")
        else:
            ds.lmc = lmc
    if "multicast_prune" in doc:
        if not isinstance(doc["multicast_prune"], bool):
            problems.append(f"multicast_prune: {doc['multicast_prune']!r} is not true or false")
        else:
            ds.multicast_prune = doc["multicast_prune"]
    if doc.get("lid_file") is not None:
        ds.lid_file = str(doc["lid_file"])
    _parse_lft(doc, ds, problems)
    _parse_multicast(doc, ds, problems)
    sw = doc.get("switches") or {}
    if not isinstance(sw, dict):
        problems.append("switches: expected a mapping of switch -> settings")
        sw = {}
    for name, settings in sw.items():
        where = f"switches[{name!r}]"
        if not isinstance(settings, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        good = {}
        for k, v in settings.items():
            if k not in SWITCH_KEYS:
                problems.append(f"{where}: unknown component {k!r} (settable: {', '.join(sorted(SWITCH_KEYS))})")
                continue
            try:
                good[k] = _int(v)
            except ValueError:
                problems.append(f"{where}.{k}: {v!r} is not a number")
        ds.switches[_ref(name)] = good
    if doc.get("links") is not None:
        from smagent import linkconf as links
        try:
            ds.links = links.options_from_mapping(doc["links"])
        except links.LinkConfigError as e:
            problems += str(e).split("; ")
    _parse_partitions(doc, ds, problems)
    _parse_mkey_protection(doc.get("mkey_protection"), ds, problems)
    _parse_qos_policy(doc.get("qos_policy"), ds, problems)
    if problems:
        raise DesiredStateError(source, problems)
    return ds


MKEY_PROTECTION_KEYS = {"level", "lease", "secret_file", "key_file"}


def _parse_mkey_protection(m, ds: DesiredState, problems: list[str]) -> None:
    """`mkey_protection: {level, lease, secret_file | key_file}`: the files are read now
    (before any SMP); a key is never written in the document itself, nor quoted."""
    if m is None:
        return
    from smagent.config import mkeys
    if not isinstance(m, dict):
        problems.append("mkey_protection: expected a mapping (level, lease, secret_file or key_file)")
        return
    bad = sorted(set(m) - MKEY_PROTECTION_KEYS)
    if bad:
        problems.append(f"mkey_protection: unknown key(s) {', '.join(map(repr, bad))} "
                        f"(known: {', '.join(sorted(MKEY_PROTECTION_KEYS))})")
        return
    if (m.get("secret_file") is None) == (m.get("key_file") is None):
        problems.append("mkey_protection: give exactly one of secret_file (a key per node) and key_file "
                        "(one key for the subnet)")
        return
    try:
        secret = mkeys.load_secret(m["secret_file"]) if m.get("secret_file") is not None else None
        key = mkeys.load_key_file(m["key_file"], "mkey_protection.key_file") if secret is None else 0
        ds.mkey_protection = mkeys.Protection(level=m.get("level", 2), lease=m.get("lease", mkeys.LEASE_DEFAULT),
                                              key=key, secret=secret)
    except BadInput as e:
        problems.append(f"mkey_protection: {e}")


def _parse_qos_policy(path, ds: DesiredState, problems: list[str]) -> None:
    """`qos_policy: FILE`: the QoS policy file (`smagent.config.qospolicy`), read now."""
    if path is None:
        return
    from smagent.config import qospolicy
    if not isinstance(path, str):
        problems.append("qos_policy: expected the path of a QoS policy file")
        return
    try:
        ds.qos_policy = qospolicy.load(path)
    except qospolicy.QosPolicyError as e:
        problems += [f"qos_policy {path}: {p}" for p in e.problems]


def _parse_partitions(doc, ds: DesiredState, problems: list[str]) -> None:
    """`partitions:` (structured) or `partitions_file:` (OpenSM's partitions.conf)."""
    from smagent.config import partitions
    if doc.get("partitions") is not None and doc.get("partitions_file") is not None:
        problems.append("partitions and partitions_file exclude each other")
        return
    try:
        if doc.get("partitions") is not None:
            ds.partitions = partitions.from_mapping(doc["partitions"])
        elif doc.get("partitions_file") is not None:
            if not isinstance(doc["partitions_file"], str):
                raise partitions.PartitionError("partitions_file", ["expected a path"])
            ds.partitions = partitions.load(doc["partitions_file"])
    except partitions.PartitionError as e:
        where = "partitions" if doc.get("partitions") is not None else f"partitions_file {doc['partitions_file']}"
        problems += [p if p.startswith("partitions[") else f"{where}: {p}" for p in e.problems]


def _parse_lft(doc, ds: DesiredState, problems: list[str]) -> None:
    """`lft:` static entries, each {switch, lid, port}."""
    for i, e in enumerate(doc.get("lft") or [], 1):
        where = f"lft[{i}]"
        if not isinstance(e, dict) or set(e) - {"switch", "lid", "port"} or not {"switch", "lid", "port"} <= set(e):
            problems.append(f"{where}: expected {{switch, lid, port}}, got {e!r}")
            continue
        try:
            lid = _int(e["lid"])
            if not 1 <= lid <= fw.UNICAST_LID_MAX:
                raise ValueError
        except ValueError:
            problems.append(f"{where}: lid {e['lid']!r} is not a unicast LID (1..0xBFFF)")
            continue
        try:
            port = _int(e["port"])
            if not 0 <= port <= 255:
                raise ValueError
        except ValueError:
            problems.append(f"{where}: port {e['port']!r} is not 0..254 (or 255 for none)")
            continue
        ds.lft.append((_ref(e["switch"]), lid, port))


def _parse_multicast(doc, ds: DesiredState, problems: list[str]) -> None:
    """`multicast:` groups, each {mlid, members}; an MLID once."""
    seen_mlids = set()
    for i, g in enumerate(doc.get("multicast") or [], 1):
        where = f"multicast[{i}]"
        if not isinstance(g, dict) or "mlid" not in g or not isinstance(g.get("members", []), list):
            problems.append(f"{where}: expected {{mlid, members: [...]}}, got {g!r}")
            continue
        try:
            mlid = _int(g["mlid"])
            if not fw.MULTICAST_LID_MIN <= mlid <= fw.MULTICAST_LID_MAX:
                raise ValueError
        except ValueError:
            problems.append(f"{where}: mlid {g['mlid']!r} is outside the multicast range 0xC000-0xFFFE")
            continue
        if mlid in seen_mlids:
            problems.append(f"{where}: mlid {mlid:#06x} appears twice")
        seen_mlids.add(mlid)
        ds.multicast.append((mlid, [_ref(m) for m in g.get("members", [])]))


def coerce(desired) -> DesiredState | None:
    """A desired state from a path (YAML or JSON: read and checked now), a mapping (the
    file's document) or a DesiredState; None stays None."""
    from collections.abc import Mapping
    if desired is None or isinstance(desired, DesiredState):
        return desired
    if isinstance(desired, Mapping):
        return parse(dict(desired))
    if isinstance(desired, (str, os.PathLike)):
        return load(desired)
    raise BadInput(f"desired: expected a file path, a mapping or a DesiredState, not {type(desired).__name__}")


# the sweep options a desired state decides, and their defaults when neither it nor the caller does
SWEEP_KEYS = {"lmc": 0, "lid_file": None, "routing": routingmod.DEFAULT}


def sweep_settings(ds: DesiredState | None, **given) -> dict:
    """The `smagent.sweep.SweepOptions` fields a desired state decides (``desired``,
    ``lmc``, ``lid_file``, ``routing``): one rule for the API, the CLI and the running SM.
    A key the state sets wins over the default; ``given`` (the caller's values, None: not
    given) fills the keys it does not set, and one that contradicts it is BadInput."""
    out: dict[str, Any] = {"desired": ds}
    for key, default in SWEEP_KEYS.items():
        value = given.get(key)
        if key == "routing" and value is not None:
            value = routingmod.parse_spec(value)  # where the caller's spec arrives: typed, compared by meaning
        if ds is not None and ds.sets(key):
            if value is not None and value != getattr(ds, key):
                raise BadInput(f"{key}={_shown(value)} contradicts {key} {_shown(getattr(ds, key))} in the desired "
                               f"state ({ds.source}): give it in one place")
            out[key] = getattr(ds, key)
        else:
            out[key] = default if value is None else value
    return out


def _shown(value) -> str:
    """A setting as a message quotes it (a routing spec as it was written)."""
    return repr(str(value)) if isinstance(value, routingmod.RoutingSpec) else repr(value)


def _ref(x) -> str:
    """A switch/node/port reference as text, in the CLI's target syntax
    (`smagent.discovery.targets`): an int is a LID (a GUID above 0xFFFF, written 0x%016x), a
    list of ints a DR path."""
    if isinstance(x, int) and not isinstance(x, bool) and x > 0xFFFF:
        return f"{x:#018x}"
    try:
        return targets.target_text(x)
    except BadInput:
        return str(x)  # resolve() names it as not found


def resolve(ds: DesiredState, topo) -> Resolved:
    """Check the desired state against a discovered fabric; names -> GUIDs."""
    problems: list[str] = []

    def locate(ref: str, where: str):
        """(node, port or None) for a target in the CLI's syntax (`smagent.discovery.targets`)."""
        try:
            return targets.find_node(ref, topo)
        except targets.NodeNotFound as e:
            if e.matches:
                problems.append(f"{where}: {ref!r} names {len(e.matches)} nodes "
                                f"({', '.join(f'{n.guid:#018x}' for n in e.matches)}); use a GUID")
            elif e.kind in ("guid", "description"):
                problems.append(f"{where}: no node {ref!r} in the fabric")
            else:
                problems.append(f"{where}: {e}")
        except MadError as e:
            problems.append(f"{where}: {ref!r}: {e}")
        return None, None

    def switch_of(ref, where):
        n, _p = locate(ref, where)
        if n is not None and not n.is_switch:
            problems.append(f"{where}: {ref!r} is a channel adapter, not a switch")
            return None
        return n

    static: dict[int, dict[int, int]] = {}
    for i, (ref, lid, port) in enumerate(ds.lft, 1):
        n = switch_of(ref, f"lft[{i}]")
        if n is None:
            continue
        cap = n.switch_info.linear_fdb_cap if n.switch_info else 0
        if cap == 0:
            problems.append(f"lft[{i}]: {n.description} has no linear forwarding table (LinearFDBCap 0)")
            continue
        if lid >= cap:
            problems.append(f"lft[{i}]: LID {lid} is beyond {n.description}'s LinearFDBCap {cap}")
        if port != fw.LFT_NO_PORT and port > n.num_ports:
            problems.append(f"lft[{i}]: {n.description} has ports 0..{n.num_ports}; port {port} does not exist")
        static.setdefault(n.guid, {})[lid] = port
    groups: dict[int, set] = {}
    for i, (mlid, members) in enumerate(ds.multicast, 1):
        caps = [s.switch_info.multicast_fdb_cap for s in topo.switches() if s.switch_info]
        if caps and mlid - fw.MULTICAST_LID_MIN >= min(caps):
            problems.append(f"multicast[{i}]: MLID {mlid:#06x} is beyond the smallest MulticastFDBCap "
                            f"({min(caps)} entries, up to {fw.MULTICAST_LID_MIN + min(caps) - 1:#06x})")
        ports: set = set()
        for m in members:
            if m.lower() == multicast.ALL:  # every CA port, as in a group file
                ports.add(multicast.ALL)
                continue
            n, p = locate(m, f"multicast[{i}] member")
            if n is None:
                continue
            if n.is_switch:
                problems.append(f"multicast[{i}]: member {m!r} is a switch; members are CA ports")
                continue
            # a port GUID, LID or DR path names one port; a node GUID or description all of them
            ports.update((n.guid, q) for q in ([p] if p is not None else n.lid_ports()))
        groups[mlid] = ports
    settings: dict[int, dict] = {}
    for ref, comp in ds.switches.items():
        n = switch_of(ref, f"switches[{ref!r}]")
        if n is None:
            continue
        for k, v in comp.items():
            if k.startswith("default") and not (0 <= v <= n.num_ports or v == fw.LFT_NO_PORT):
                problems.append(f"switches[{ref!r}].{k}: {n.description} has ports 0..{n.num_ports}; {v} does not exist")
            if k == "linear_fdb_top" and n.switch_info and not 0 <= v < n.switch_info.linear_fdb_cap:
                problems.append(f"switches[{ref!r}].linear_fdb_top: {v} is not below LinearFDBCap "
                                f"{n.switch_info.linear_fdb_cap}")
            if k == "life_time_value" and not 0 <= v <= 31:
                problems.append(f"switches[{ref!r}].life_time_value: {v} is not 0..31")
        settings[n.guid] = comp
    roots = [n.guid for n in (switch_of(ref, f"root[{i}]") for i, ref in enumerate(ds.root, 1)) if n is not None]
    if problems:
        raise DesiredStateError(ds.source, problems)
    return Resolved(static, groups, settings, roots)


def group_spec(ds: DesiredState, resolved: Resolved, topo):
    """The multicast groups of a resolved desired state as a `multicast.GroupSpec`
    (members by port GUID), which replaces the default group or a group file."""
    def member_key(m):
        return multicast.ALL if m == multicast.ALL else topo.nodes[m[0]].port_guids[m[1]]

    return multicast.GroupSpec(
        [multicast.Group(mlid, tuple(sorted((member_key(m) for m in members), key=str)),
                         f"{ds.source} multicast[{i}]")
         for i, (mlid, members) in enumerate(sorted(resolved.groups.items()), 1)],
        source=ds.source)
