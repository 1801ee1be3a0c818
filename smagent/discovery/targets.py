"""Targets and the Get requests `query` builds for them.

A target is a LID (``5``, ``0x5``: a unicast LID, 1..0xBFFF), a DR path (``0``,
``0,1,3``: infiniband-diags' notation), a GUID (``0x0000000000200001``: 64 bits written
in full, ``0x`` and 16 hex digits, as ibnetdiscover prints them) or a node description
(``Switch2``, ``"Switch2"``: anything else; quotes force a description, e.g. a node
called ``"5"``). Any other number is a LID, so ``70000`` or ``0xFFFFF`` is refused as
one (beyond 16 bits) rather than guessed to be a GUID. The same syntax everywhere: the
CLI's arguments, the API's, a desired-state file's switches and multicast members.
LIDs and paths need nothing but the text (`parse_target`); GUIDs and descriptions are
looked up by discovering the fabric (`resolve_target`) and become the node's directed
route. `find_node` finds any of them in a discovered topology.
"""
from __future__ import annotations

import dataclasses
import re

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import AttrID, Attribute
from mad.errors import MadFieldError
from mad.header import Method
from smagent.errors import BadInput
from smagent.transport.base import Request


class NeedsDiscovery(BadInput):
    """The target is a GUID or a description: only discovery can turn it into a route."""

    def __init__(self, text: str, kind: str, key):
        self.text, self.kind, self.key = text, kind, key
        super().__init__(f"target {text!r} is a {kind}; resolve it through discovery (resolve_target)")


class TargetNotFound(BadInput):
    """No node (or more than one) in the discovered fabric matches the target."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where an SMP goes: a LID (LID-routed) or a DR path (directed route); ``label``: the
    GUID or description the user named, when it was resolved through discovery."""
    lid: int | None = None
    path: tuple[int, ...] | None = None
    label: str | None = None  # what the user named (GUID, description), when resolved

    def describe(self) -> str:
        where = f"LID {self.lid}" if self.lid is not None else "DR path " + ",".join(map(str, self.path or ()))
        return f"{self.label} ({where})" if self.label else where

    def request(self, method: int, attr_id: int, modifier: int = 0,
                value: Attribute | bytes | None = None) -> Request:
        if self.path is not None:
            return Request.dr(method, attr_id, self.path, modifier, value)
        if self.lid is None:
            raise ValueError("a Target has a LID or a DR path")
        return Request(smpcodec.lid_routed(method, attr_id, modifier, value), dlid=self.lid)


_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+")
GUID_HEX_DIGITS = 16  # a GUID is written in full: "0x0002c90300a1b2c3"; shorter numbers are LIDs
GUID_FORM = "a GUID is written in full, 0x and 16 hex digits (e.g. 0x0002c90300a1b2c3)"


def _unquote(t: str) -> str | None:
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    return None


def classify(text: str) -> tuple[str, int | str | tuple[int, ...]]:
    """('lid', int) | ('path', tuple) | ('guid', int) | ('description', str); raises
    MadFieldError for an empty target or a malformed DR path."""
    t = text.strip()
    quoted = _unquote(t)
    if quoted is not None:
        return "description", quoted
    if not t:
        raise MadFieldError("target", text, "a LID (5, 0x5), a DR path (0,1,3), a GUID or a node description")
    parts = [part.strip() for part in t.split(",")]
    if len(parts) > 1 and (parts[0] == "0" or all(part.isdigit() for part in parts)):
        return "path", smpcodec.parse_path(t)  # errors name the bad hop
    if t == "0":
        return "path", (0,)
    if not _NUMBER.fullmatch(t):
        return "description", t
    value = int(t, 16) if t[:2].lower() == "0x" else int(t, 10)
    hex_digits = len(t) - 2 if t[:2].lower() == "0x" else 0
    if hex_digits > GUID_HEX_DIGITS:
        raise MadFieldError("guid", text, f"at most 64 bits: {GUID_FORM}")
    if hex_digits == GUID_HEX_DIGITS:
        return "guid", value
    if value > 0xFFFF:
        raise MadFieldError("lid", text, f"a LID is 1..0xbfff (unicast) and at most 16 bits; {GUID_FORM}")
    return "lid", value


def parse_target(text: str) -> Target:
    """'5' / '0x5' -> LID; '0' or '0,1,3' -> directed route (infiniband-diags' notation).

    A GUID or a description raises `NeedsDiscovery` (a ValueError): use `resolve_target`.
    """
    kind, key = classify(text)
    if kind == "path" and isinstance(key, tuple):
        return Target(path=key)
    if kind == "lid" and isinstance(key, int):
        return Target(lid=fw.check_unicast_lid(key))
    raise NeedsDiscovery(text, kind, key)


def target_text(target) -> str:
    """A target given in Python as text: an int is a LID (a GUID above 0xFFFF: LIDs are
    16 bits, so the int keys of `Topology.nodes` work as targets), a tuple or list of
    ints a DR path, text as it is. BadInput for anything else."""
    if isinstance(target, bool):
        raise BadInput(f"target {target!r}: a LID, a DR path, a node GUID or a node description")
    if isinstance(target, int):
        return f"{target:#018x}" if target > 0xFFFF else str(target)
    if isinstance(target, (tuple, list)) and target and all(isinstance(x, int) and not isinstance(x, bool)
                                                            for x in target):
        return ",".join(map(str, target))
    if isinstance(target, str):
        return target
    raise BadInput(f"target {target!r}: a LID, a DR path, a node GUID or a node description")


class NodeNotFound(TargetNotFound):
    """`find_node` found no node for a target (``matches`` empty) or several (a shared
    description: ``matches`` lists them). ``text`` and ``kind`` as `classify` saw them."""

    def __init__(self, message: str, text: str, kind: str, matches=()):
        super().__init__(message)
        self.text, self.kind, self.matches = text, kind, list(matches)


def find_node(text: str, topology) -> tuple:
    """Any target against a discovered topology: ``(node, port)``, port None when the
    target names a whole node. A LID is the node holding it now (a CA: that port); a DR
    path is walked over the topology's links from the local port (a CA reached by it:
    the port it enters by); a port GUID gives its port. The one lookup behind the CLI's
    targets, the API's and a desired state's. Raises `NodeNotFound` (BadInput);
    `MadError` for a malformed LID or path."""
    kind, key = classify(text)
    nodes = topology.nodes
    partial = (f" (discovery could not reach {len(topology.unreachable)} part(s) of the fabric: "
               f"{'; '.join(topology.unreachable[:3])})") if topology.unreachable else ""
    if kind == "guid":
        hit = topology.by_guid(key)
        if hit is None:
            raise NodeNotFound(f"no node or port with GUID {key:#018x} among the {len(nodes)} nodes "
                               f"discovered{partial}", text, kind)
        return hit
    if kind == "description":
        matches = sorted(topology.by_description(key), key=lambda n: n.guid)
        if len(matches) == 1:
            return matches[0], None
        if not matches:
            raise NodeNotFound(f"no node has the description {key!r} among the {len(nodes)} nodes "
                               f"discovered{partial}", text, kind)
        raise NodeNotFound(f"description {key!r} is ambiguous: {len(matches)} nodes carry it (GUIDs "
                           + ", ".join(f"{n.guid:#018x}" for n in matches) + "); give a GUID instead",
                           text, kind, matches)
    if kind == "lid":
        assert isinstance(key, int)
        fw.check_unicast_lid(key)
        for n in nodes.values():
            for p in n.lid_ports():
                pi = n.ports.get(p)
                if pi is not None and pi.lid and pi.lid <= key < pi.lid + (1 << pi.lmc):
                    return n, (None if n.is_switch else p)
        raise NodeNotFound(f"no port holds LID {key} among the {len(nodes)} nodes discovered{partial}",
                           text, kind)
    assert isinstance(key, tuple)
    return _walk(key, topology, text)


def _walk(path: tuple, topology, text: str) -> tuple:
    """The node at the end of a DR path, following the discovered links."""
    g, port = topology.local
    node = topology.nodes[g]
    for hop, out in enumerate(path[1:], 1):
        if hop > 1 and not node.is_switch:
            raise NodeNotFound(f"DR path {text}: hop {hop} leaves {node.description!r}, a channel adapter "
                               f"(only switches forward)", text, "path")
        peer = topology.links.get((node.guid, out))
        if peer is None:
            raise NodeNotFound(f"DR path {text}: port {out} of {node.description!r} has no discovered link "
                               f"(hop {hop})", text, "path")
        node, port = topology.nodes[peer[0]], peer[1]
    return node, (None if node.is_switch else port)


def resolve_target(text: str, transport, *, topology=None) -> Target:
    """Any target, GUIDs and descriptions included: those are found by discovering the
    fabric (or in `topology`, if given) and become the DR path of the node (a CA's
    path is through the port discovery reached first; a CA port GUID gives that
    port's path). No match, or a description shared by several nodes, raises
    `TargetNotFound` naming the candidates."""
    try:
        return parse_target(text)
    except NeedsDiscovery as e:
        kind, key = e.kind, e.key
    if topology is None:
        from smagent import discovery
        topology = discovery.discover(transport)
    n, p = find_node(text, topology)
    if kind == "guid":
        if p is None:
            return Target(path=n.path, label=f"{n.description!r} GUID {key:#018x}")
        path = n.path_to_port(p) if not n.is_switch else n.path
        return Target(path=path, label=f"{n.description!r} port {p} GUID {key:#018x}")
    return Target(path=n.path, label=f"{key!r} GUID {n.guid:#018x}")


QUERY_ATTRIBUTES = {
    "nodeinfo": AttrID.NODE_INFO, "nodedesc": AttrID.NODE_DESCRIPTION, "portinfo": AttrID.PORT_INFO,
    "switchinfo": AttrID.SWITCH_INFO, "sminfo": AttrID.SM_INFO, "lft": AttrID.LINEAR_FORWARDING_TABLE,
    "rft": AttrID.RANDOM_FORWARDING_TABLE, "mft": AttrID.MULTICAST_FORWARDING_TABLE,
    "pkeys": AttrID.P_KEY_TABLE, "sl2vl": AttrID.SL_TO_VL_MAPPING_TABLE,
    "vlarb": AttrID.VL_ARBITRATION_TABLE, "guids": AttrID.GUID_INFO,
}


def build_query(attribute: str, target: Target, *, port=None, block=None, position=None,
                ext_speeds=False, in_port=None) -> Request:
    attr_id = QUERY_ATTRIBUTES[attribute]
    block = block or 0
    if attr_id == AttrID.PORT_INFO:
        mod = fw.portinfo_modifier(port or 0, ext_speeds)
    elif attr_id == AttrID.LINEAR_FORWARDING_TABLE:
        mod = fw.lft_modifier(block)
    elif attr_id == AttrID.RANDOM_FORWARDING_TABLE:
        mod = fw.rft_modifier(block)
    elif attr_id == AttrID.MULTICAST_FORWARDING_TABLE:
        mod = fw.mft_modifier(block, position or 0)
    elif attr_id == AttrID.P_KEY_TABLE:
        mod = fw.pkey_modifier(block, port or 0)
    elif attr_id == AttrID.SL_TO_VL_MAPPING_TABLE:
        mod = fw.sl2vl_modifier(in_port or 0, port or 0)
    elif attr_id == AttrID.GUID_INFO:  # the port's own and alias GUIDs, 8 a block
        mod = fw.guid_modifier(block)
    elif attr_id == AttrID.VL_ARBITRATION_TABLE:  # block 0..3 = part 1..4 (low 0-31 ... high 32-63)
        mod = fw.vlarb_modifier(block + 1, port or 0)
    else:
        mod = 0
    return target.request(Method.GET, attr_id, mod)
