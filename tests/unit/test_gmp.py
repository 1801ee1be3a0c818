"""mad.gmp (what every GMP class shares), mad.perfmgt's PortCounters, and the address
type of smagent.transport.address: layouts against bytes captured from ibsim's
PerfMgt agent (through perfquery -d -d), builders, status, the ib_mad_addr packing."""
from __future__ import annotations

import pytest

from mad import gmp, perfmgt
from mad.errors import MadError
from mad.header import GSI_QKEY, MadHeader, Method, MgmtClass, method_name, response_method
from smagent.transport.address import Address, Grh, Incoming, lid_of

# The data area of ibsim's answers to perfquery LID 1 port 1 (bytes 64..128 of the MAD
# perfquery -d -d printed): ClassPortInfo, then PortCounters with SymbolErrorCounter set
# to 7 by the console, 648 bytes / 9 packets each way
CPI_DATA = bytes.fromhex("0101130000000012") + bytes(64)
PC_DATA = bytes.fromhex("00010000000700000000000000000000" "00000000000000000000028800000288"
                        "00000009000000090000000000000000" "00000000000000000000000000000000")


def test_class_port_info_layout_from_ibsim_bytes():
    cpi = gmp.ClassPortInfo.decode(CPI_DATA)
    assert (cpi.base_version, cpi.class_version, cpi.capability_mask) == (1, 1, 0x1300)
    assert cpi.capability_mask2 == 0 and cpi.resp_time_value == 0x12  # low 5 bits of the word at byte 4
    assert gmp.ClassPortInfo.LAYOUT.size == 72 and cpi.encode() == CPI_DATA


def test_class_port_info_bit_places():
    cpi = gmp.ClassPortInfo(capability_mask2=0x7FFFFFF >> 1, resp_time_value=0x1F, redirect_sl=0xA,
                            redirect_fl=0xFFFFF, redirect_qp=0x123456, trap_hl=0x40, trap_q_key=GSI_QKEY,
                            redirect_gid=bytes(range(16)))
    raw = cpi.encode()
    assert raw[4:8] == bytes.fromhex("7fffffff")  # CapabilityMask2 (27 bits) then RespTimeValue (5)
    assert raw[8:24] == bytes(range(16))  # RedirectGID
    assert raw[24:28] == bytes.fromhex("00afffff")  # TC 8, SL 4, FL 20
    assert raw[33:36] == bytes.fromhex("123456")  # RedirectQP after a reserved byte
    assert raw[64] == 0x40 and raw[68:72] == GSI_QKEY.to_bytes(4, "big")  # TrapHL, TrapQ_Key
    assert gmp.ClassPortInfo.decode(raw) == cpi


def test_port_counters_layout_from_ibsim_bytes():
    pc = perfmgt.PortCounters.decode(PC_DATA)
    assert (pc.port_select, pc.symbol_error_counter) == (1, 7)
    assert (pc.port_xmit_data, pc.port_rcv_data, pc.port_xmit_pkts, pc.port_rcv_pkts) == (648, 648, 9, 9)
    assert pc.port_xmit_discards == pc.port_xmit_wait == 0
    assert pc.encode() == PC_DATA[:44]


def test_build_puts_class_version_and_data_where_each_class_has_them():
    perf = perfmgt.port_counters_get(3, tid=0x1234)
    h = MadHeader.decode(perf)
    assert (h.base_version, h.mgmt_class, h.class_version, h.method) == (1, 0x04, 1, Method.GET)
    assert (h.transaction_id, h.attribute_id, h.attribute_modifier) == (0x1234, 0x0012, 0)
    assert len(perf) == 256 and perf[64:66] == b"\x00\x03" and perf[24:64] == bytes(40)  # PortSelect at 65
    sa = gmp.build(MgmtClass.SUBN_ADM, Method.GET_TABLE, 0x0011, data=b"\xAA", tid=1, class_header=b"\x01")
    assert sa[2] == 2  # SA: class version 2
    assert sa[24] == 1 and sa[56] == 0xAA  # the SA header after the common one, data at 56
    assert gmp.data_offset(MgmtClass.SUBN_ADM) == 56 and gmp.data_offset(0x04) == 64


def test_build_refuses_smps_and_oversized_data():
    with pytest.raises(MadError, match="GMP class"):
        gmp.build(0x81, Method.GET, 0x11, tid=1)
    with pytest.raises(MadError, match="at most 192 bytes"):
        gmp.build(0x04, Method.GET, 0x12, data=bytes(193), tid=1)
    with pytest.raises(MadError, match="at most 200 bytes"):
        gmp.build(0x03, Method.GET, 0x12, data=bytes(201), tid=1)


def test_response_keeps_tid_attribute_and_class_header_and_maps_the_method():
    req = gmp.build(MgmtClass.SUBN_ADM, Method.GET_TABLE, 0x0011, 5, tid=0xABCDEF, class_header=b"\x01\x02")
    resp = gmp.response_to(req, status=0x000C, data=b"\x55")
    h = MadHeader.decode(resp)
    assert (h.method, h.status, h.transaction_id, h.attribute_id, h.attribute_modifier) == (
        Method.GET_TABLE_RESP, 0x000C, 0xABCDEF, 0x0011, 5)
    assert resp[24:26] == b"\x01\x02" and resp[56] == 0x55 and resp[57:] == bytes(199)
    assert gmp.status_of(resp).invalid_field == 3 and not gmp.status_of(resp).ok
    assert gmp.response_to(perfmgt.get(0x12, tid=1))[3] == Method.GET_RESP
    assert response_method(Method.SET) == Method.GET_RESP and response_method(Method.DELETE) == 0x95
    with pytest.raises(MadError, match="a request"):
        gmp.response_to(resp)


def test_names_by_class():
    assert method_name(Method.GET) == "SubnGet"
    assert method_name(Method.GET_TABLE, MgmtClass.SUBN_ADM) == "SubnAdmGetTable"
    assert method_name(Method.GET_RESP, MgmtClass.PERF_MGT) == "PerfGetResp"
    assert method_name(0x01, 0x30) == "class 0x30 Get"
    assert gmp.describe(perfmgt.port_counters_get(1, tid=1)) == "PerfGet(PortCounters, modifier 0x0)"
    assert gmp.describe(perfmgt.get(1, tid=1)) == "PerfGet(ClassPortInfo, modifier 0x0)"


def test_check_refuses_what_is_no_gmp():
    with pytest.raises(MadError, match="256"):
        gmp.check(bytes(100))
    with pytest.raises(MadError, match="base_version"):
        gmp.check(bytes(256))
    with pytest.raises(MadError, match="subnet management class"):
        gmp.check(bytes([1, 0x81]) + bytes(254))


def test_address_packs_as_ib_mad_addr():
    a = Address.gsi(0x1234, sl=3, pkey_index=2, grh=Grh(bytes(range(16)), gid_index=1, hop_limit=64,
                                                         traffic_class=5, flow_label=0xABCDE))
    raw = a.pack()
    assert len(raw) == 44
    assert raw[0:4] == b"\x00\x00\x00\x01" and raw[4:8] == GSI_QKEY.to_bytes(4, "big")  # QP1, its Q_Key
    assert raw[8:10] == b"\x12\x34" and raw[10] == 3  # LID, SL
    assert raw[12:16] == bytes([1, 1, 64, 5])  # grh_present, gid_index, hop_limit, traffic_class
    assert raw[16:32] == bytes(range(16)) and raw[32:36] == (0xABCDE).to_bytes(4, "big")
    assert int.from_bytes(raw[36:38], "little") == 2 and raw[38:] == bytes(6)  # pkey_index in host order
    assert Address.unpack(raw) == a and lid_of(raw) == 0x1234
    assert Address.unpack(Address(7).pack()) == Address(7)


def test_reply_address_goes_back_to_the_sender_qp_with_its_qkey_and_gid():
    grh = Grh(bytes(range(16)), gid_index=0, hop_limit=1)
    came = Address(lid=9, qpn=1, qkey=0, sl=2, path_bits=3, pkey_index=1, grh=grh)  # as the kernel hands it up
    back = came.reply()
    assert (back.lid, back.qpn, back.qkey, back.sl, back.pkey_index, back.grh) == (9, 1, GSI_QKEY, 2, 1, grh)
    assert back.path_bits == 0
    assert Address(5, qpn=0).reply().qkey == 0  # QP0: no Q_Key
    assert Address(5, qpn=0x42, qkey=0x11).reply().qkey == 0x11  # another QP keeps what it said


def test_incoming_from_each_kind_of_source():
    raw = b"\x01" * 256
    assert Incoming.of(raw, Address.gsi(4).pack()).address == Address.gsi(4)
    assert Incoming.of(raw, 17).slid == 17 and Incoming.of(raw, 17).address.qpn == 0
    assert Incoming.of(raw, None).slid == 0
    assert Incoming.of(raw, Address(3)).address == Address(3)
