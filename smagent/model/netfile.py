"""Topology files: ibsim net files and ibnetdiscover output, read and written.

ibsim reads both dialects with one parser (ibsim/sim_net.c), so this module
does too. What the two look like::

    # ibsim net file (hand-written)            # ibnetdiscover output
    Switch  8 "Switch1"                        switchguid=0x200000(200000)
    [1]     "Hca1"[1]                          Switch 8 "S-0000000000200000"  # "Switch1" base port 0 lid 0 lmc 0
    [3]     "Switch2"[3]    w=4                [1]  "H-0000000000100000"[1](100001)  # "Hca1" lid 0 4xSDR
                                               caguid=0x100000
    Hca     2 "Hca1"                           Ca   2 "H-0000000000100000"  # "Hca1"
    [1]     "Switch1"[1]                       [1](100001)  "S-0000000000200000"[1]  # lid 0 lmc 0 "Switch1" lid 0 4xSDR

Rules taken from ibsim's parser (so that a file `load` accepts is one ibsim
accepts, and vice versa where it matters):

* Records start at column 0 with ``Switch``, ``Hca``/``Ca`` or ``Rt``; a
  record ends at the first line that is neither a port line (``[``) nor a
  comment (``#`` at column 0). A blank line therefore ends a record.
* ``switchguid=``/``caguid=``/``rtguid=`` set the GUID of the next node of
  that type; ``sysimgguid=``/``vendid=``/``devid=`` apply to the next node.
  (ibsim keeps counting up from a GUID line for later nodes that have
  none; `load` leaves those GUIDs unknown. `assign_ibsim_guids` predicts
  what ibsim will assign.)
* A missing remote port (``"Hca1"`` without ``[n]``) means port 1.
* ``key=value`` tokens after the remote port are per-port options (ibsim
  knows ``w``, ``s``, ``e``); they are kept in ``Node.port_opts``.
* ibsim itself insists that both ends declare a link. `load` also accepts
  a link declared on one side only, but when both sides declare it they
  must agree. `dump` always writes both sides.
* LID 0 means "no LID" and is not stored.

Data a net file cannot express natively (capabilities, facts about
unconnected ports) is written as ``# smagent: ...`` comment lines inside
the record, which ibsim skips, so `dump` followed by `load` gives back an
equal Fabric.
"""
from __future__ import annotations

import io
import os
import re
from typing import TextIO

from mad.forwarding import lmc_problem
from smagent.config import files as paths
from smagent.errors import BadInput
from smagent.model.fabric import HCA, ROUTER, SWITCH, Fabric, FabricError, Node, Port

__all__ = [
    "NetFileError",
    "load",
    "loads",
    "dump",
    "dumps",
    "save",
    "assign_ibsim_guids",
    "ibsim_size_args",
    "IBSIM_DEFAULT_LIMITS",
]


class NetFileError(BadInput):
    """A topology file that cannot be read; names the file and 1-based line."""

    def __init__(self, source: str, lineno: int, reason: str):
        self.source, self.lineno, self.reason = source, lineno, reason
        super().__init__(f"{source}:{lineno}: {reason}")


# --------------------------------------------------------------------------
# reading

_HEADER_TYPES = {"Switch": SWITCH, "Hca": HCA, "Ca": HCA, "Rt": ROUTER}
_HEADER = re.compile(r'(Switch|Hca|Ca|Rt)\s*(\d+)\s*"([^"]*)"(.*)$')
_GUIDHEX = r"(?:0[xX])?[0-9A-Fa-f]+"
_PORT = re.compile(
    r"\[(\d+)\](?:\[ext \d+\])?"  # local port (and -g's [ext N])
    rf"\s*(?:\(({_GUIDHEX})\))?"  # CA/router: local port GUID
    r'\s*"([^"]*)"'  # remote node id
    r"(?:\[(\d+)\])?(?:\[ext \d+\])?"  # remote port, default 1
    rf"\s*(?:\(({_GUIDHEX})\))?"  # remote port GUID (remote CA/router)
    r"(.*)$"
)
_OPT = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s*=\s*(\S+)")
_QUOTED = re.compile(r'"[^"]*"')
_RATE = re.compile(r"lid\s+\d+\s+(\d+x\S+)")
_PRAGMA = "# smagent:"
# ibsim directives with no meaning for the graph: accepted and ignored
_IGNORED = ("width", "speed", "extspeed", "pdebug")
# ibsim directives that would change what the file means: refused
_UNSUPPORTED = ("include", "module", "do")
# ibnetdiscover -g (grouping) decorations
_GROUPING = ("Chassis", "Non-Chassis Nodes", "Hostname:")


def _num(text: str) -> int:
    """strtoul(..., 0) minus octal: 0x-prefixed hex, else decimal."""
    text = text.strip()
    return int(text, 16) if text[:2].lower() == "0x" else int(text, 10)


class _Parser:
    def __init__(self, text: str, source: str):
        self.text, self.source = text, source
        self.fabric = Fabric()
        self.node: Node | None = None  # record being read
        self.lineno = 0
        self.pending_guid: dict[str, tuple[int, int | None]] = {}
        self.pending_node: dict[str, int] = {}  # sysimgguid/vendid/devid
        self.decls: dict[Port, tuple[Port, int]] = {}  # here -> (there, line)
        self.remote_guids: list[tuple[Port, int, int]] = []  # (port, guid, line)
        self.ports_seen: dict[int, int] = {}  # port -> line, current record

    def error(self, reason: str, lineno: int | None = None) -> NetFileError:
        return NetFileError(self.source, self.lineno if lineno is None else lineno, reason)

    def run(self) -> Fabric:
        for self.lineno, raw in enumerate(self.text.splitlines(), 1):
            self.line(raw.rstrip("\r\n"))
        self.link()
        return self.fabric

    # -- one line ------------------------------------------------------
    def line(self, line: str) -> None:
        if line.startswith(_PRAGMA):
            if self.node is None:
                raise self.error("'# smagent:' line outside a node record")
            self.pragma(self.node, line[len(_PRAGMA):])
            return
        if line.startswith("#"):
            return  # comment; does not end a record (as in ibsim)
        if line.startswith("["):
            if self.node is None:
                raise self.error(
                    "port line outside a node record (a blank or indented line ends a record)"
                )
            self.port(self.node, line)
            return
        self.node = None  # anything else ends the record
        if not line.strip():
            return
        if line[0].isspace():
            if line.lstrip().startswith("#"):
                return
            raise self.error(
                f"unexpected indented line {line.strip()!r}: records and port lines start at column 0"
            )
        m = _HEADER.match(line)
        if m:
            self.header(*m.groups())
            return
        self.directive(line)

    def directive(self, line: str) -> None:
        word = _leading_word(line)
        value = line.split("#", 1)[0]
        if line.startswith("switchguid"):
            self.guid_line(SWITCH, value)
        elif line.startswith(("caguid", "hcaguids")):
            self.guid_line(HCA, value)
        elif line.startswith("rtguid"):
            self.guid_line(ROUTER, value)
        elif line.startswith(("sysimgguid", "vendid", "devid")):
            key = {"s": "system_guid", "v": "vendor_id", "d": "device_id"}[line[0]]
            self.pending_node[key] = self.assignment(value, word)
        elif line.startswith(_IGNORED):
            pass
        elif line.startswith(_UNSUPPORTED):
            raise self.error(f"ibsim directive {word!r} is not supported by this reader")
        elif line.startswith(_GROUPING):
            pass
        elif line.startswith(("Switch", "Hca", "Ca", "Rt")):
            raise self.error(
                f'malformed node header {line.strip()!r}: expected e.g. Switch 36 "name"'
            )
        else:
            raise self.error(f"unrecognized line {line.strip()!r}")

    def assignment(self, text: str, word: str) -> int:
        m = re.match(r"[A-Za-z_]+\s*=\s*(\S+?)\s*(?:\(|$)", text.strip())
        if not m:
            if "+" in text and "=" not in text:
                raise self.error(f"relative {word}+ GUID bases are not supported")
            raise self.error(f"expected {word}=NUMBER, got {text.strip()!r}")
        try:
            return _num(m.group(1))
        except ValueError:
            raise self.error(f"{word}: {m.group(1)!r} is not a number") from None

    def guid_line(self, node_type: str, text: str) -> None:
        word = _leading_word(text, r"[A-Za-z]+")
        guid = self.assignment(text, word)
        port0 = None
        m = re.search(r"\(\s*(" + _GUIDHEX + r")\s*\)", text)
        if m:
            port0 = int(m.group(1), 16)
        self.pending_guid[node_type] = (guid, port0)

    # -- node header ---------------------------------------------------
    def header(self, word: str, nports: str, name: str, rest: str) -> None:
        node_type = _HEADER_TYPES[word]
        if not name:
            raise self.error("empty node id \"\"")
        desc, tail = self.desc_trailer(rest)
        try:
            node = Node(name=name, node_type=node_type, num_ports=int(nports), description=desc)
        except FabricError as e:
            raise self.error(str(e)) from None
        guid = self.pending_guid.pop(node_type, None)
        if guid is not None:
            node.guid = guid[0]
            if guid[1] is not None and node_type == SWITCH and guid[1] != guid[0]:
                node.port_guids[0] = guid[1]
        extra, self.pending_node = self.pending_node, {}
        if "system_guid" in extra:
            node.system_guid = extra["system_guid"]
        for key in ("vendor_id", "device_id"):
            if extra.get(key):
                node.caps[key] = extra[key]
        if node_type == SWITCH and tail:
            if "enhanced port 0" in tail:
                node.caps["enhanced_port0"] = 1
            self.lid_lmc(node, 0, tail)
        try:
            self.fabric.add_node(node)
        except FabricError as e:
            raise self.error(str(e)) from None
        self.node = node
        self.ports_seen = {}

    def desc_trailer(self, rest: str) -> tuple[str | None, str]:
        """Split ``  # "desc" base port 0 lid 1 lmc 0`` into desc and tail."""
        rest = rest.strip()
        if not rest:
            return None, ""
        if not rest.startswith("#"):
            raise self.error(f"unexpected text {rest!r} after the node id (a description follows '#')")
        t = rest[1:].lstrip()
        if t.startswith('"'):
            end = t.find('"', 1)
            if end < 0:
                raise self.error("unterminated quoted node description")
            return t[1:end], t[end + 1:]
        # unquoted: up to the first keyword, as ibsim does
        cut = [i for k in (" enhanced port ", " base port ", " lid ", " lmc ") if (i := t.find(k)) >= 0]
        if cut:
            return t[: min(cut)].strip(), t[min(cut):]
        return t.strip() or None, ""

    def lid_lmc(self, node: Node, port: int, text: str) -> None:
        m = re.search(r"\blid\s+(\d+)", text)
        if m and int(m.group(1)):
            node.lids[port] = self.lid_value(m.group(1))
        m = re.search(r"\blmc\s+(\d+)", text)
        if m and int(m.group(1)):
            lmc = int(m.group(1))
            problem = lmc_problem(lmc, "LMC")
            if problem:
                raise self.error(problem)
            node.lmcs[port] = lmc

    def lid_value(self, text: str) -> int:
        lid = int(text)
        if lid > 0xFFFF:
            raise self.error(f"LID {lid} out of range 0..65535")
        return lid

    # -- port line -----------------------------------------------------
    def port(self, node: Node, line: str) -> None:
        if line.startswith("@"):
            raise self.error("ibsim port aliases ('@') are not supported by this reader")
        m = _PORT.match(line)
        if not m:
            raise self.error(
                f'malformed port line {line.strip()!r}: expected [port] "remote"[port]'
            )
        lport, lguid, rname, rport, rguid, rest = m.groups()
        p = int(lport)
        if not 1 <= p <= node.num_ports:
            what = "port 0 is a switch's internal port and takes no cable" if p == 0 else (
                f"port {p} out of range: node {node.name!r} has ports 1..{node.num_ports}"
            )
            raise self.error(what)
        if p in self.ports_seen:
            raise self.error(
                f"port {p} of node {node.name!r} already described on line {self.ports_seen[p]}"
            )
        self.ports_seen[p] = self.lineno
        rp = int(rport) if rport is not None else 1
        if rp < 1:
            raise self.error(f"remote port {rp} of {rname!r}: ports start at 1")
        if not rname:
            raise self.error('empty remote node id ""')
        here = Port(node.name, p)
        self.decls[here] = (Port(rname, rp), self.lineno)
        if lguid is not None:
            if node.node_type == SWITCH:
                raise self.error(
                    "a switch's external ports have no port GUID; only its port 0 does "
                    "(given on the switchguid= line)"
                )
            node.port_guids[p] = int(lguid, 16)
        if rguid is not None:
            self.remote_guids.append((Port(rname, rp), int(rguid, 16), self.lineno))
        before, _, trailer = rest.partition("#")
        leftover = _OPT.sub("", before).strip()
        if leftover:
            raise self.error(f"unexpected text {leftover!r} on port line (options are key=value)")
        opts = self.options(before) | self.options(_QUOTED.sub("", trailer))
        if opts:
            node.port_opts[p] = opts
        if node.node_type != SWITCH:
            # CA/router line: "# lid 3 lmc 0 "remote desc" lid 1 4xQDR"
            local = re.match(r"\s*lid\s+\d+(?:\s+lmc\s+\d+)?", trailer)
            if local:
                self.lid_lmc(node, p, local.group(0))
        rate = _RATE.search(_QUOTED.sub("", trailer))
        if rate:
            node.rates[p] = rate.group(1)

    def options(self, text: str) -> dict[str, int]:
        out = {}
        for key, value in _OPT.findall(text):
            try:
                out[key] = _num(value)
            except ValueError:
                raise self.error(f"port option {key}={value!r}: value is not a number") from None
        return out

    def pragma(self, node: Node, text: str) -> None:
        words = text.split()
        try:
            if len(words) == 2 and words[0] == "cap":
                key, value = words[1].split("=", 1)
                node.caps[key] = _num(value)
                return
            if len(words) >= 2 and words[0] == "port":
                p = int(words[1])
                if not 0 <= p <= node.num_ports:
                    raise self.error(f"port {p} out of range 0..{node.num_ports} for node {node.name!r}")
                for word in words[2:]:
                    key, value = word.split("=", 1)
                    if key == "guid":
                        node.port_guids[p] = _num(value)
                    elif key == "lid":
                        node.lids[p] = self.lid_value(value)
                    elif key == "lmc":
                        node.lmcs[p] = int(value)
                    elif key == "rate":
                        node.rates[p] = value
                    elif key.startswith("opt."):
                        node.port_opts.setdefault(p, {})[key[4:]] = _num(value)
                    else:
                        raise ValueError(key)
                return
        except ValueError:
            pass
        raise self.error(f"malformed '# smagent:' line {text.strip()!r}")

    # -- links, once every node is known -------------------------------
    def link(self) -> None:
        fabric, decls = self.fabric, self.decls
        for here, (there, lineno) in decls.items():
            if fabric.neighbor(here.node, here.num) == there:
                continue  # already made from the other end
            remote = fabric.nodes.get(there.node)
            if remote is None:
                raise self.error(
                    f"{here} is cabled to node \"{there.node}\", which has no record in the file",
                    lineno,
                )
            if there.num > remote.num_ports:
                raise self.error(
                    f"{here} is cabled to {there}, but node \"{there.node}\" has ports 1..{remote.num_ports}",
                    lineno,
                )
            back = decls.get(there)
            if back is not None and back[0] != here:
                raise self.error(
                    f"{here} is cabled to {there}, but line {back[1]} says {there} is cabled to {back[0]}",
                    lineno,
                )
            taken = fabric.neighbor(there.node, there.num)
            if taken is not None:
                raise self.error(
                    f"{here} is cabled to {there}, but line {decls[taken][1]} already cabled {taken} to it",
                    lineno,
                )
            try:
                fabric.connect(here.node, here.num, there.node, there.num)
            except FabricError as e:
                raise self.error(str(e), lineno) from None
        for port, guid, lineno in self.remote_guids:
            node = fabric.nodes[port.node]
            key = 0 if node.node_type == SWITCH else port.num
            known = node.port_guid(port.num)
            if known is None:
                if not (node.node_type == SWITCH and guid == node.guid):
                    node.port_guids[key] = guid
            elif known != guid:
                raise self.error(
                    f"port GUID {guid:x} given for {port} contradicts {known:x} given elsewhere",
                    lineno,
                )


def _leading_word(text: str, pattern: str = r"[A-Za-z_-]*") -> str:
    """The keyword a line starts with ("" when none)."""
    m = re.match(pattern, text)
    return m.group(0) if m else ""


def loads(text: str, source: str = "<string>") -> Fabric:
    """Parse topology text. `source` names it in error messages."""
    return _Parser(text, source).run()


def load(src: str | os.PathLike | TextIO, source: str | None = None) -> Fabric:
    """Read a topology from a path, an open text stream, or text.

    A ``str`` containing a newline is taken as the text itself; any other
    ``str`` (or a PathLike) is a file name.
    """
    if not isinstance(src, (str, os.PathLike)):  # an open text stream
        return loads(src.read(), source or str(getattr(src, "name", "<stream>")))
    if isinstance(src, str) and "\n" in src:
        return loads(src, source or "<string>")
    path = os.fspath(src)
    return loads(paths.read_text(path, "topology file"), source or path)


# --------------------------------------------------------------------------
# writing

STYLES = ("ibsim", "ibnetdiscover")
_MAX_LINE = 250  # ibsim reads lines into a 256-byte buffer
_MAX_NAME = 64  # ibsim NODEIDLEN - 1
_WORDS = {SWITCH: ("Switch", "Switch"), HCA: ("Hca", "Ca"), ROUTER: ("Rt", "Rt")}
_GUIDWORD = {SWITCH: "switchguid", HCA: "caguid", ROUTER: "rtguid"}
_NATIVE_CAPS = {"vendor_id", "device_id"}


def _check_names(fabric: Fabric) -> None:
    for n in fabric:
        bad = set(n.name) & set('"#@\n\r')
        if bad or len(n.name) > _MAX_NAME or n.name != n.name.strip():
            raise FabricError(
                f"node name {n.name!r} cannot be written to a net file: it must be 1..{_MAX_NAME} "
                "characters without '\"', '#', '@', newlines or surrounding blanks"
            )
        if set(n.description or "") & set('"\n\r'):
            raise FabricError(
                f"node {n.name!r}: description {n.description!r} contains '\"' or a newline"
            )


def _rlid(fabric: Fabric, there: Port) -> int:
    remote = fabric.nodes[there.node]
    return remote.lid(there.num) or 0


def _node_lines(fabric: Fabric, n: Node, full: bool, ids: bool) -> list[str]:
    """The record for one node (GUID lines, header, pragmas, port lines)."""
    out: list[str] = []
    sw = n.is_switch
    if full or ids:
        out.append(f"vendid=0x{n.caps.get('vendor_id', 0):x}")
        out.append(f"devid=0x{n.caps.get('device_id', 0):x}")
    if n.system_guid is not None:
        out.append(f"sysimgguid=0x{n.system_guid:x}")
    if n.guid is not None:
        line = f"{_GUIDWORD[n.node_type]}=0x{n.guid:x}"
        if sw and (full or n.port_guids.get(0, n.guid) != n.guid):
            line += f"({n.port_guids.get(0, n.guid):x})"
        out.append(line)

    header = f'{_WORDS[n.node_type][full]}\t{n.num_ports} "{n.name}"'
    ep0 = bool(n.caps.get("enhanced_port0")) and sw
    lid0, lmc0 = n.lids.get(0), n.lmcs.get(0, 0)
    if full or n.description != n.name or (sw and (ep0 or lid0 or lmc0)):
        header += f'\t\t# "{n.description}"'
        if sw and (full or ep0):
            header += " enhanced port 0" if ep0 else " base port 0"
        if sw and (full or lid0 or lmc0):
            header += f" lid {lid0 or 0} lmc {lmc0}"
    out.append(header)

    # what the port lines and header cannot say goes into pragmas
    for key in sorted(n.caps):
        if (key in _NATIVE_CAPS and n.caps[key]) or (key == "enhanced_port0" and sw and n.caps[key] == 1):
            continue  # said by vendid=/devid= lines or the switch header
        out.append(f"{_PRAGMA} cap {key}={n.caps[key]}")
    connected = dict(fabric.connected_ports(n))
    for p in sorted(set(n.port_guids) | set(n.lids) | set(n.lmcs) | set(n.rates) | set(n.port_opts)):
        words = []
        native_port = p in connected and not sw
        # a switch's port 0 GUID rides on "switchguid=G(P)" only when P != G
        sw_p0 = sw and p == 0 and n.guid is not None and n.port_guids.get(0) != n.guid
        if p in n.port_guids and not (native_port or sw_p0):
            words.append(f"guid=0x{n.port_guids[p]:x}")
        lid_native = (sw and p == 0) or native_port  # LID/LMC 0 read back as "none"
        if p in n.lids and not (lid_native and n.lids[p]):
            words.append(f"lid={n.lids[p]}")
        if p in n.lmcs and not (lid_native and n.lmcs[p]):
            words.append(f"lmc={n.lmcs[p]}")
        if p in n.rates and p not in connected:
            words.append(f"rate={n.rates[p]}")
        if p in n.port_opts and p not in connected:
            words += [f"opt.{k}={v}" for k, v in n.port_opts[p].items()]
        if words:
            out.append(f"{_PRAGMA} port {p} " + " ".join(words))

    for p, there in connected.items():
        remote = fabric.nodes[there.node]
        line = f"[{p}]"
        if not sw and p in n.port_guids:
            line += f"({n.port_guids[p]:x}) "
        line += f'\t"{there.node}"[{there.num}]'
        rguid = None if remote.is_switch else remote.port_guids.get(there.num)
        if full and rguid is not None:
            line += f"{' ' if not sw else ''}({rguid:x}) "
        for k, v in n.port_opts.get(p, {}).items():
            line += f"\t{k}={v}"
        rate = n.rates.get(p)
        remote_part = f'"{remote.description}" lid {_rlid(fabric, there)}' + (f" {rate}" if rate else "")
        if sw:
            if full or rate:
                line += f"\t\t# {remote_part}"
        else:
            lid, lmc = n.lids.get(p), n.lmcs.get(p, 0)
            if full or lid or lmc or rate:
                line += f"\t\t# lid {lid or 0} lmc {lmc}"
                if full or rate:
                    line += f" {remote_part}"
        out.append(line)
    return out


def dump(fabric: Fabric, stream: TextIO, style: str = "ibsim") -> None:
    """Write `fabric` to `stream` as an ibsim net file or ibnetdiscover output.

    ``style="ibsim"`` writes the short hand-written form (GUIDs, LIDs and
    descriptions only where known); ``style="ibnetdiscover"`` mimics
    ibnetdiscover's output (vendid/devid lines, ``Ca`` headers, ``# "desc"
    base port 0 lid N lmc M`` trailers, remote port GUIDs). Both load back
    into ibsim and through `load` to an equal Fabric. Nodes keep the
    fabric's order; ibsim attaches its SM to the first node's first port.
    """
    if style not in STYLES:
        raise BadInput(f"style must be one of {', '.join(STYLES)}, not {style!r}")
    _check_names(fabric)
    full = style == "ibnetdiscover"
    ids = any(n.caps.get("vendor_id") or n.caps.get("device_id") for n in fabric)
    first = next(iter(fabric), None)
    if full:
        stream.write("#\n# Topology file: written by smagent\n#\n")
    else:
        stream.write("# ibsim net file written by smagent\n")
    if first is not None:
        stream.write(f'# ibsim attaches its SM (and clients without SIM_HOST) to "{first.name}"\n')
    for n in fabric:
        stream.write("\n")
        for line in _node_lines(fabric, n, full, ids):
            if len(line) > _MAX_LINE:
                raise FabricError(
                    f"node {n.name!r}: line longer than ibsim's {_MAX_LINE}-character limit: {line[:60]!r}..."
                )
            stream.write(line + "\n")


def dumps(fabric: Fabric, style: str = "ibsim") -> str:
    buf = io.StringIO()
    dump(fabric, buf, style)
    return buf.getvalue()


def save(fabric: Fabric, path: str | os.PathLike, style: str = "ibsim") -> None:
    """Write `fabric` to the file `path` (what ``smagent topology generate -o`` writes,
    e.g. a `smagent.model.topogen` shape); the path is checked first, a problem is BadInput
    naming it. ibsim and ``connect("sim", topology=path)`` load it."""
    paths.check_output(path, "topology file")
    text = dumps(fabric, style)
    paths.write_text(path, text, "topology file")


# --------------------------------------------------------------------------
# ibsim's view of a fabric

# Debian ibsim 0.10 prints these at start-up ("MaxNetNodes = 2048" ...)
IBSIM_DEFAULT_LIMITS = {"nodes": 2048, "switches": 256, "ports": 13312}


IBSIM_LINEAR_CAP = 30720  # ibsim's default switch LinearFDBCap
LINEAR_CAP_MAX = 49152  # every unicast LID (0xBFFF) and LID 0


def ibsim_size_args(fabric: Fabric) -> list[str]:
    """The ``-N/-S/-P`` flags ibsim needs to load `fabric` (empty if none), and ``-L`` where its
    switches' default LinearFDBCap (30,720) is below the LIDs the fabric needs.

    ibsim counts a switch as num_ports + 1 ports (port 0), a CA as num_ports.
    """
    nodes = len(fabric)
    switches = len(fabric.switches())
    ports = sum(n.num_ports + (1 if n.is_switch else 0) for n in fabric)
    args: list[str] = []
    for flag, need, key in (("-N", nodes, "nodes"), ("-S", switches, "switches"), ("-P", ports, "ports")):
        if need > IBSIM_DEFAULT_LIMITS[key]:
            args += [flag, str(need)]
    lids = switches + sum(n.num_ports for n in fabric if not n.is_switch)
    if lids >= IBSIM_LINEAR_CAP:
        args += ["-L", str(LINEAR_CAP_MAX)]
    return args


def assign_ibsim_guids(
    fabric: Fabric, ca_base: int = 0x100000, switch_base: int = 0x200000, router_base: int = 0
) -> None:
    """Give every node the GUIDs ibsim will assign when it loads this fabric
    written without GUID lines (nodes in fabric order).

    ibsim counts per node type: a switch takes one GUID (node = port 0
    GUID); a CA or router with N ports takes N+1 (node GUID g, port p has
    GUID g+p). Its bases are 0x100000 (CAs), 0x200000 (switches) and 0
    (routers). Existing GUIDs are overwritten.
    """
    counters = {HCA: ca_base, SWITCH: switch_base, ROUTER: router_base}
    for n in fabric:
        fabric.set_guid(n, None)  # free the GUID index before reassigning
    for n in fabric:
        g = counters[n.node_type]
        fabric.set_guid(n, g)
        if n.is_switch:
            n.port_guids.pop(0, None)
            counters[SWITCH] = g + 1
        else:
            n.port_guids.clear()
            n.port_guids.update({p: g + p for p in range(1, n.num_ports + 1)})
            counters[n.node_type] = g + n.num_ports + 1
