"""The send path: `smagent.fdb.porttables.write` checks each Set's GetResp against what
was written, the bytes as sent (the usual answer, taken without decoding), else the table
decoded and compared (an SMA may answer junk in the data area beyond the table: not a
difference), in the in-process simulator with its answers altered on the way back; and
`smagent.transport.smp_layer.prepare` sends a request built as bytes as it is when no
M_Key is known anywhere."""
import pytest

from mad.attributes import SLtoVLMappingTable
from smagent.model import topogen
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


def test_sets_go_in_batches_each_judged_and_none_held_after(monkeypatch):
    """`porttables.write` sends `BATCH` Sets at a time (their requests and answers
    alive for one batch, not for the whole link phase), every batch's answers judged: a
    read-back that differs in the second batch is a problem and that change alone is not
    written; the transport keeps no batch's replies once `execute` returns."""
    t = SimTransport(topogen.two_switch())
    cas = [n for n in t.sim.nodes.values() if not n.is_switch]
    changes = [porttables.TableChange("sl2vl", ca.guid, ca.name, (0,), 0, None,
                                      SLtoVLMappingTable(sl_to_vl=[i % 8] * 16))
               for i, ca in enumerate(cas * 3)]
    execute, sizes = t.execute, []

    def counted(reqs, **kw):
        sizes.append(len(reqs))
        replies = execute(reqs, **kw)
        assert t._replies == []
        if len(sizes) == 2:  # the first change of the second batch reads back otherwise
            replies[0].raw = replies[0].raw[:DATA] + bytes([0x77]) + replies[0].raw[DATA + 1:]
        return replies
    monkeypatch.setattr(t, "execute", counted)
    monkeypatch.setattr(porttables, "BATCH", 2)
    written: list = []
    problems = porttables.write(t, changes, written)
    assert sizes == [2] * (len(changes) // 2) + [1] * (len(changes) % 2)
    assert len(problems) == 1 and "reads back differently" in problems[0]
    assert written == changes[:2] + changes[3:]


def test_an_smp_built_as_bytes_goes_as_built_without_keys_and_keyed_with_them():
    """`smp_layer.prepare`'s hot path: with no key anywhere the request's bytes are sent as
    built (M_Key 0, not copied); a default key, or one learnt for the path, is patched in;
    a retry gets a fresh TID either way."""
    from mad import smp as smpcodec
    from mad.attributes import AttrID
    from mad.header import Method, tid32_of
    from smagent.config.mkeys import KeyChain
    from smagent.transport import smp_layer
    from smagent.transport.base import Request

    def req():
        return Request.dr(Method.GET, AttrID.NODE_INFO, (0, 1))
    keys = KeyChain()
    r = req()
    assert keys.keyless and smp_layer.prepare(keys, r, 0) is r.raw and smpcodec.m_key_of(r.raw) == 0
    first = r.raw
    retry = smp_layer.prepare(keys, r, 1)
    assert tid32_of(retry) != tid32_of(first) and smpcodec.m_key_of(retry) == 0 and r.raw == retry
    keys.default = 0x1234
    assert not keys.keyless and smpcodec.m_key_of(smp_layer.prepare(keys, req(), 0)) == 0x1234
    learnt = KeyChain()
    learnt.learn(path=(0, 1), guid=0x10, key=0x99)  # a node that answered its key
    assert not learnt.keyless and smpcodec.m_key_of(smp_layer.prepare(learnt, req(), 0)) == 0x99


def test_link_tables_are_read_in_batches_and_planned_the_same(monkeypatch):
    """The link phase's Gets go `porttables.BATCH` at a time (`linkconf.io`), and the plan
    is the one a single batch makes: the same Sets, in the same order."""
    from smagent.api import Session
    from smagent.linkconf import io as linkio

    def planned():
        t = SimTransport(topogen.two_switch())
        execute, sizes = t.execute, []

        def counted(reqs, **kw):
            reqs = list(reqs)
            sizes.append(len(reqs))
            return execute(reqs, **kw)
        monkeypatch.setattr(t, "execute", counted)
        r = Session(t).plan()
        return [c.describe() for c in r.link_changes], sizes
    whole, whole_sizes = planned()
    monkeypatch.setattr(linkio, "BATCH", 3)
    batched, sizes = planned()
    assert whole and batched == whole
    assert max(sizes) < max(whole_sizes) and len(sizes) > len(whole_sizes)
