import json
import pathlib

import pytest

VECTORS = pathlib.Path(__file__).parent / "vectors"


@pytest.fixture(scope="session")
def vectors():
    """Every golden vector, by name."""
    out = {}
    for f in sorted(VECTORS.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            v = json.loads(line)
            out[v["name"]] = v
    return out
