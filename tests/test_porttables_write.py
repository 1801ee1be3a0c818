"""`smagent.fdb.porttables.write` checks each Set's GetResp against what was written: the
bytes as sent (the usual answer, taken without decoding), else the table decoded and
compared (an SMA may answer junk in the data area beyond the table: not a difference).
In the in-process simulator, its answers altered on the way back."""
import pytest

from mad.attributes import SLtoVLMappingTable
from smagent import topogen
from smagent.fdb import porttables
from smagent.transport.sim import SimTransport

DATA = 64  # the SMP data area's offset


def _change(t) -> porttables.TableChange:
    ca = next(n for n in t.sim.nodes.values() if not n.is_switch)
    return porttables.TableChange("sl2vl", ca.guid, ca.name, (0,), 0, None,
                                  SLtoVLMappingTable(sl_to_vl=[0, 1, 2, 3, 4, 5, 6, 7] * 2))


@pytest.mark.parametrize("offset, value, problem", [
    (None, 0, False),  # the bytes as sent
    (DATA + 20, 0x5A, False),  # junk past the 8 bytes of the table: the same table
    (DATA + 0, 0x77, True),  # SL0 and SL1 on other VLs
])
def test_a_set_is_confirmed_by_its_answer(monkeypatch, offset, value, problem):
    t = SimTransport(topogen.two_switch())
    execute = t.execute

    def altered(reqs, **kw):
        replies = execute(reqs, **kw)
        if offset is not None:
            for r in replies:
                r.raw = r.raw[:offset] + bytes([value]) + r.raw[offset + 1:]
        return replies
    monkeypatch.setattr(t, "execute", altered)
    written: list = []
    c = _change(t)
    problems = porttables.write(t, [c], written)
    assert bool(problems) is problem and (written == []) is problem
    if problem:
        assert "reads back differently" in problems[0]
