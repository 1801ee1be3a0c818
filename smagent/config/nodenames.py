"""Node-name maps (`--node-name-map FILE`), the ib-node-name-map format infiniband-diags and
OpenSM read: one node a line, its node GUID (a C number: 0x hex, 0 octal, else decimal),
white space, then its name, in double quotes or up to a '#'; blank lines and lines
starting with '#' are comments. A GUID named twice keeps its first name, as theirs do; a
line with a GUID and no name names nothing. Where they warn and go on without the map, a
line that is not of this form refuses the whole file here (every file is checked whole),
each problem with its line.

Every place smagent prints a node's name asks `NodeNames.name(guid, description)`: the
map's name, or the node's own NodeDescription with unprintable bytes as spaces (as the
diags print it).
"""
from __future__ import annotations

import re
from typing import Iterator, Mapping

from smagent.config import files
from smagent.errors import FileProblems

_GUID = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)(?=\s|#|$)")


class NodeNameMapError(FileProblems):
    """A node-name map that cannot be used: every problem, with its line."""


class NodeNames(Mapping[int, str]):
    """Node GUID -> name, read from a map (empty: every node by its description)."""

    def __init__(self, names: Mapping[int, str] | None = None, source: str | None = None):
        self._names = dict(names or {})
        self.source = source

    def __getitem__(self, guid: int) -> str:
        return self._names[guid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def name(self, guid: int, description: str = "") -> str:
        """What to call node ``guid``: its name in the map, else its description, cleaned."""
        mapped = self._names.get(guid)
        return mapped if mapped is not None else clean(description)

    def __repr__(self) -> str:
        return f"<NodeNames {len(self)} names{f' from {self.source}' if self.source else ''}>"


def clean(description: str) -> str:
    """A NodeDescription as the diags print it: unprintable characters as spaces."""
    return "".join(c if c.isprintable() else " " for c in description)


def parse(text: str, source: str = "node-name map") -> NodeNames:
    names: dict[int, str] = {}
    problems = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        m = _GUID.match(line)
        if m is None:
            problems.append(f"line {n}: expected a node GUID then its name, got {raw.strip()[:60]!r}")
            continue
        guid = int(m.group(1), 16 if m.group(1)[:2].lower() == "0x" else 8 if m.group(1).startswith("0") else 10)
        if guid >= 1 << 64:
            problems.append(f"line {n}: GUID {m.group(1)} is wider than 64 bits")
            continue
        rest = line[m.end():].lstrip()
        if rest.startswith('"'):
            name, closed, _ = rest[1:].partition('"')
            if not closed:
                problems.append(f"line {n}: the name's closing quote is missing")
                continue
        else:
            name = rest.partition("#")[0]
        if name and guid not in names:  # the first name wins, as in the diags
            names[guid] = name
    if problems:
        raise NodeNameMapError(source, problems)
    return NodeNames(names, source)


def load(path) -> NodeNames:
    """Read and check a node-name map before any SMP is sent."""
    p, text = files.read_config(path, NodeNameMapError)
    return parse(text, p)


NONE = NodeNames()  # no map: every node by its description

__all__ = ["NodeNames", "NodeNameMapError", "parse", "load", "clean", "NONE"]
