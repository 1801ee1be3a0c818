"""What every layout of mad is on the wire, as tests/vectors/layout_plans.json pins it:
its fields (name, kind, bit offset, width, count), its one-struct fast path (format and
the fields of each item), an SA record's components (ComponentMask bit, name, offset,
width) and stride, and a digest of encodings of seeded random values.

The fixture was written from the layouts as they stood before they were declared by
annotations (issue 38 item 7), so a change of declaration style that moved a bit shows
there. Regenerate it only for a deliberate wire change:

    PYTHONPATH=. python3 tests/support/layout_plans.py > tests/vectors/layout_plans.json
"""
from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from mad import attributes, framing, gmp, header, perfmgt, rmpp, sa, sa_records, smp
from mad.layout import LayoutValue, _struct_items

MODULES = (attributes, sa_records, perfmgt, gmp, sa, smp, rmpp, header, framing)


def layout_classes() -> dict[str, type[LayoutValue]]:
    """Every layout class of mad, by layout name."""
    return {x.LAYOUT.name: x for mod in MODULES for x in vars(mod).values()
            if isinstance(x, type) and issubclass(x, LayoutValue) and "LAYOUT" in vars(x)}


def _random_value(cls: type[LayoutValue], rnd: random.Random) -> LayoutValue:
    kw: dict[str, Any] = {}
    for f in cls.LAYOUT.fields:
        top = (1 << f.width) - 1
        if f.name is None:
            continue
        if f.kind == "int":
            kw[f.name] = rnd.randint(0, top)
        elif f.kind == "array":
            kw[f.name] = [rnd.randint(0, top) for _ in range(f.count)]
        elif f.kind == "bytes":
            kw[f.name] = bytes(rnd.randrange(256) for _ in range(f.count))
        else:
            kw[f.name] = "".join(rnd.choice("abc xyz") for _ in range(rnd.randint(0, f.count)))
    return cls(**kw)


def describe(cls: type[LayoutValue]) -> dict[str, Any]:
    """One layout as the fixture holds it."""
    lay = cls.LAYOUT
    items = _struct_items(lay.fields)
    rnd = random.Random(lay.name)
    encodings = b"".join(lay.encode(_random_value(cls, rnd)) for _ in range(8))
    return {
        "size": lay.size,
        "fields": [[f.name, f.kind, f.offset, f.width, f.count] for f in lay.fields],
        "struct": None if items is None else [[code, kind, [f.name for f in flds]] for code, kind, flds in items],
        "components": [[c.bit, c.name, c.field, c.offset, c.width] for c in getattr(cls, "COMPONENTS", ())],
        "stride": getattr(cls, "STRIDE", None),
        "encodings_sha256": hashlib.sha256(encodings).hexdigest(),
    }


def describe_all() -> dict[str, dict[str, Any]]:
    return {name: describe(cls) for name, cls in sorted(layout_classes().items())}


def dumps(plans: dict[str, dict[str, Any]]) -> str:
    """JSON with one line per layout property: a wire change is a one-line diff."""
    layouts = (f'{json.dumps(name)}: {{\n' + ",\n".join(f'  {json.dumps(k)}: {json.dumps(v)}' for k, v in sorted(d.items()))
               + "\n }" for name, d in plans.items())
    return "{\n " + ",\n ".join(layouts) + "\n}\n"


if __name__ == "__main__":
    print(dumps(describe_all()), end="")
