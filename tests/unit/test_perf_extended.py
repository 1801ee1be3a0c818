"""PortCountersExtended's optional 64-bit error counters (IBA 1.3): their place in the
attribute (as libibmad's field table puts them), and `smagent counters -x` showing them,
after CounterSelect2, only where ClassPortInfo.CapabilityMask2 says the agent keeps them,
as perfquery -x does. (ibsim's agents advertise CapabilityMask2 0: tests/live/test_perf_live.py
checks there that nothing more is shown than perfquery shows.)"""
from mad import perfmgt
from smagent import perf


def test_extended_error_counters_sit_after_the_packet_counters():
    names = perfmgt.EXTENDED_ERRORS
    value = perfmgt.PortCountersExtended(port_select=3, counter_select2=0x00ABCDEF,
                                         **{n: (i + 1) << 40 for i, n in enumerate(names)})
    raw = value.encode()
    assert len(raw) == 184
    assert raw[4:8] == bytes.fromhex("00abcdef")  # CounterSelect2: bits 32-63
    for i, n in enumerate(names):  # 64 bits each from byte 72 (bit 576), QP1Dropped last at 176
        assert int.from_bytes(raw[72 + 8 * i:80 + 8 * i], "big") == (i + 1) << 40, n
    assert names[0] == "symbol_error_counter" and names[-1] == "qp1_dropped" and 72 + 8 * 13 == 176
    assert perfmgt.PortCountersExtended.decode(raw.ljust(192, b"\0")) == value


def test_capability_mask2_bit_1_says_they_are_kept():
    assert perfmgt.has_extended_errors(0b10) and not perfmgt.has_extended_errors(0b01)
    assert not perfmgt.has_extended_errors(0)


def _read(cap2: int) -> perf.PortCounterRead:
    value = perfmgt.PortCountersExtended(port_select=1, port_xmit_data=5544, symbol_error_counter=1 << 33,
                                         qp1_dropped=7)
    return perf.PortCounterRead(lid=1, port=1, capability_mask=0x1300, counters=value, capability_mask2=cap2)


def test_counters_x_shows_them_only_where_the_agent_keeps_them():
    plain = perf.text(_read(0)).splitlines()
    assert plain[0] == "# Port extended counters: Lid 1 port 1 (CapMask: 0x1300 CapMask2: 0x0000000)"
    assert [x.split(":")[0] for x in plain[1:]] == [
        "PortSelect", "CounterSelect", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
        "PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts"]
    full = perf.text(_read(0b10)).splitlines()
    assert full[:11] == [plain[0].replace("0x0000000)", "0x0000002)")] + plain[1:]
    assert full[11] == "CounterSelect2:".ljust(33, ".") + "0x00000000"
    assert full[12] == "SymbolErrorCounter:".ljust(33, ".") + str(1 << 33)
    assert full[-1] == "QP1Dropped:".ljust(33, ".") + "7" and len(full) == 11 + 1 + 14
    assert "SymbolErrorCounter" not in perf.iba_names(_read(0).counters)
    assert perf.iba_names(_read(2).counters, additional=True)["PortXmitWait"] == 0
