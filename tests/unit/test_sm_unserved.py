"""Requests the running SM does not serve (`smagent.sm.unserved`): a Get or Set of any
class is answered with "method/attribute combination not supported" (an SMP to the
reporting LID, a GMP to the sender's QP), anything else is dropped."""
from mad import smp as smpcodec
from mad.attributes import AttrID
from mad.header import Method
from smagent.sm import unserved
from smagent.transport.address import Address, Incoming


def _vendor(method: int) -> bytes:
    raw = bytearray(256)
    raw[0:4] = bytes([1, unserved.PING_CLASS, 1, method])
    raw[8:16] = (0x1234).to_bytes(8, "big")
    raw[37:40] = unserved.OPENIB_OUI.to_bytes(3, "big")
    return bytes(raw)


def test_a_vendor_get_is_refused_to_its_sender():
    src = Address.gsi(7, sl=2, pkey_index=1)
    raw, to = unserved.answer(Incoming(_vendor(Method.GET), src), lambda req, slid: slid)
    assert raw[3] == Method.GET_RESP and int.from_bytes(raw[4:6], "big") == unserved.ATTR_NOT_SUPPORTED
    assert raw[8:16] == (0x1234).to_bytes(8, "big") and raw[37:40] == b"\x00\x14\x05" and to == src.reply()


def test_an_smp_get_is_refused_and_the_rest_dropped():
    smp = smpcodec.encode(smpcodec.lid_routed(Method.GET, AttrID.VL_ARBITRATION_TABLE, tid=9))
    raw, to = unserved.answer(Incoming(smp, Address(3)), lambda req, slid: 99)
    resp = smpcodec.decode(raw)
    assert resp.method == Method.GET_RESP and resp.status == unserved.ATTR_NOT_SUPPORTED and to == 99
    for other in (_vendor(Method.GET_RESP), _vendor(Method.TRAP), _vendor(Method.SEND), b"\x01\x32"):
        assert unserved.answer(Incoming(other, Address(3)), lambda req, slid: 1) is None
