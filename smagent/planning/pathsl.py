"""The SL of every path, as a VL-layering routing engine (dfsssp) chose it, kept in the
state directory (`paths.StateDir.path_sls`) by the sweep that wrote the routes: what
`smagent verify --path-sls FILE` checks credit loops with, per VL, until an SA hands the
SLs to hosts in PathRecords.

Format (binary, checked whole on reading): the line ``smagent-path-sls 1``, a count of
switches (4 bytes, big-endian), then per switch its GUID (8 bytes), the length of its
row (4 bytes) and the row (one SL a byte, indexed by DLID: the SL of the paths from the
CA ports on that switch), then the SHA-256 of everything before it. Written to a
temporary name and renamed, so a reader sees the old file or the new one."""
from __future__ import annotations

import hashlib
import os
import struct

from smagent.config import atomicfile, files as paths
from smagent.errors import BadInput

MAGIC = b"smagent-path-sls 1\n"


def dumps(sls: dict[int, bytes]) -> bytes:
    body = [MAGIC, struct.pack(">I", len(sls))]
    for guid in sorted(sls):
        row = bytes(sls[guid])
        body += [struct.pack(">QI", guid, len(row)), row]
    data = b"".join(body)
    return data + hashlib.sha256(data).digest()


def loads(data: bytes, where: str = "path SL file") -> dict[int, bytes]:
    """The {switch GUID: SL row} of `dumps`; BadInput naming ``where`` when the data is not
    a whole file of this format."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4 + 32:
        raise BadInput(f"{where}: not a smagent path SL file (no '{MAGIC.decode().strip()}' header)")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise BadInput(f"{where}: truncated or damaged (checksum mismatch)")
    off = len(MAGIC)
    (n,) = struct.unpack_from(">I", body, off)
    off += 4
    out: dict[int, bytes] = {}
    for _ in range(n):
        if off + 12 > len(body):
            raise BadInput(f"{where}: truncated (switch rows end early)")
        guid, size = struct.unpack_from(">QI", body, off)
        off += 12
        out[guid] = bytes(body[off:off + size])
        off += size
    if off != len(body) or any(v > 15 for row in out.values() for v in set(row)):
        raise BadInput(f"{where}: damaged (rows do not add up, or an SL above 15)")
    return out


def save(path, sls: dict[int, bytes] | None) -> None:
    """Write ``sls`` to ``path`` (atomically); None removes the file (an engine that puts
    every path on SL 0 leaves no stale SLs behind). A full disk under the running SM is a
    warning (`atomicfile.tolerated`): its SA hands hosts the SLs from memory."""
    p = os.fspath(path)
    if sls is None:
        if os.path.exists(p):
            os.unlink(p)
        return
    os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
    try:
        atomicfile.write_bytes(p, dumps(sls))
    except OSError as e:
        if not atomicfile.tolerated(e, f"path SL file {p} not written"):
            raise


def load(path) -> dict[int, bytes]:
    p = os.fspath(path)
    try:
        data = paths.read_state_bytes(p, "path SL file")  # a regular file of bounded size, or BadInput
    except FileNotFoundError as e:
        raise BadInput(f"path SL file {p}: {e.strerror or e}") from None
    return loads(data, f"path SL file {p}")


def sl_of(topo, sls: dict[int, bytes] | None, src: int, dst: int) -> tuple[int, int]:
    """(SL, source switch GUID) of the path from LID ``src`` to LID ``dst`` on a discovered
    topology: the paths of a CA port take the SL of the switch it hangs off (its row of
    ``sls``; None or no row: SL 0). BadInput when ``src`` is no port's LID or ``dst`` no
    LID of the rows."""
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.lid:
                continue
            base = pi.lid & ~((1 << pi.lmc) - 1)
            if not base <= src < base + (1 << pi.lmc):
                continue
            if n.is_switch:
                switch = n.guid
            else:
                peer = topo.links.get((n.guid, p))
                if peer is None or not topo.nodes[peer[0]].is_switch:
                    raise BadInput(f"LID {src} ({n.description} port {p}) is not cabled to a switch")
                switch = peer[0]
            row = (sls or {}).get(switch)
            if row is not None and dst >= len(row):
                raise BadInput(f"LID {dst} is beyond the LIDs the path SLs cover (up to {len(row) - 1})")
            return (row[dst] if row is not None else 0), switch
    raise BadInput(f"LID {src} is no port's LID on this fabric")
