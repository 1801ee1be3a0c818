"""What a replay must reproduce of a recorded command: its output without what differs
between runs of the same session. Shared by scripts/make_fixtures.py (which records
fixtures/*.expected.json) and the replay tests (which compare against them)."""
from __future__ import annotations

import hashlib
import json
import re

_TIMING = re.compile(r"; [0-9.]+ s$", re.M)


def normalize(args: list[str], stdout: str) -> str:
    """Command output without what differs between runs of the same session (timings)."""
    if "sweep" in args and "--json" in args:
        try:
            doc = json.loads(stdout)
        except ValueError:
            return stdout
        doc.pop("seconds", None)
        for ph in doc.get("phases", {}).values():
            ph.pop("seconds", None)
            ph.pop("cpu_seconds", None)
        return json.dumps(doc, indent=2) + "\n"
    if "sweep" in args:
        return _TIMING.sub("; <seconds> s", stdout)
    return stdout


def normalize_stderr(stderr: str) -> str:
    """stderr without umad2sim's chatter ("ibwarn: [pid] sim_connect: attached as client ...")."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("ibwarn:"))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
