"""`STATE_DIR/drained`: what the running SM keeps drained (`smagent drain` through its control
socket) until `smagent undrain`, across sweeps and restarts.

One JSON document, checked whole when the daemon starts (a damaged file is refused: BadInput,
exit 2, naming the file and what is wrong; never half-read, since a drained switch routed over
again while an admin pulls it is the black hole draining exists to avoid)::

    {"version": 1, "drained": [{"guid": "0x0002c90000000001", "name": "S1", "port": null}]}

``port`` null: the whole node; a number: the cable on that port of the node.
"""
from __future__ import annotations

import dataclasses
import json
import os

from smagent.config import atomicfile, files
from smagent.errors import BadInput

VERSION = 1
LIMIT = 1 << 20  # a drained set is a few lines; anything larger is not ours
MAX_PORT = 254


@dataclasses.dataclass(frozen=True)
class Entry:
    guid: int
    name: str
    port: int | None = None  # None: the node; else the cable on this port

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}[{self.port}]"

    def as_json(self) -> dict:
        return {"guid": f"{self.guid:#018x}", "name": self.name, "port": self.port}


def _entry(i: int, item) -> Entry:
    where = f"entry {i + 1}"
    if not isinstance(item, dict) or set(item) != {"guid", "name", "port"}:
        raise ValueError(f"{where}: expected an object with guid, name and port")
    guid, name, port = item["guid"], item["name"], item["port"]
    if not isinstance(guid, str) or not guid.lower().startswith("0x"):
        raise ValueError(f"{where}: guid {guid!r} is not a hex GUID (0x...)")
    try:
        g = int(guid, 16)
    except ValueError:
        raise ValueError(f"{where}: guid {guid!r} is not a hex GUID (0x...)") from None
    if not 0 < g < 1 << 64:
        raise ValueError(f"{where}: guid {guid!r} is out of range")
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ValueError(f"{where}: name must be a node description of 1 to 64 characters")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= MAX_PORT):
        raise ValueError(f"{where}: port {port!r} is not null or a port number 1..{MAX_PORT}")
    return Entry(g, name, port)


def parse(text: str) -> list[Entry]:
    """The entries of the file's text; ValueError naming the first problem."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or set(doc) != {"version", "drained"}:
        raise ValueError("expected an object with version and drained")
    if doc["version"] != VERSION:
        raise ValueError(f"version {doc['version']!r}, this smagent reads version {VERSION}")
    if not isinstance(doc["drained"], list):
        raise ValueError("drained must be a list")
    out = [_entry(i, item) for i, item in enumerate(doc["drained"])]
    seen: set[tuple[int, int | None]] = set()
    for entry in out:
        if (entry.guid, entry.port) in seen:
            raise ValueError(f"{entry} is listed twice")
        seen.add((entry.guid, entry.port))
    return out


def load(state_dir) -> list[Entry]:
    """The drained set kept in ``state_dir`` ([] when there is none); BadInput when the
    file is damaged, not a regular file or too large."""
    path = files.StateDir(state_dir).drained
    try:
        text = files.read_state_text(path, "drained-set file", limit=LIMIT)
    except FileNotFoundError:
        return []
    try:
        return parse(text)
    except ValueError as e:
        raise BadInput(f"drained-set file {os.fspath(path)}: {e}; fix it, or remove it to drain nothing "
                       f"(the SM would then route over what it lists)") from None


def dump(entries: list[Entry]) -> str:
    return json.dumps({"version": VERSION, "drained": [e.as_json() for e in entries]}, indent=1) + "\n"


def save(state_dir, entries: list[Entry]) -> None:
    """Replace the file atomically (no file when nothing is drained)."""
    path = files.StateDir(state_dir).drained
    if not entries:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    atomicfile.write_text(path, dump(entries))


__all__ = ["Entry", "parse", "load", "dump", "save"]
