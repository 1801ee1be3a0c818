"""Every layout of mad is on the wire what tests/vectors/layout_plans.json recorded before
the layouts were declared by annotations (issue 38 item 7): the same fields at the same
bits, the same one-struct fast path, the same SA components and ComponentMask bits, the
same bytes for the same values."""
from __future__ import annotations

import json
import pathlib

import pytest
from layout_plans import describe, layout_classes

PINNED = json.loads((pathlib.Path(__file__).parents[1] / "vectors" / "layout_plans.json").read_text())


def test_every_layout_is_pinned():
    assert set(layout_classes()) == set(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_layout_plan_is_unchanged(name):
    now = describe(layout_classes()[name])
    for key, pinned in PINNED[name].items():
        assert now[key] == pinned, f"{name}: {key} changed"

