"""Performance Management (class 0x04, IBA 16.1): the attributes smagent reads."""
from __future__ import annotations

import enum
from typing import ClassVar

from mad import gmp
from mad.header import MgmtClass, Method
from mad.layout import U4, U8, U16, U32, U64, LayoutValue, layout


class PerfAttrID(enum.IntEnum):
    CLASS_PORT_INFO = gmp.CLASS_PORT_INFO
    PORT_SAMPLES_CONTROL = 0x0010
    PORT_SAMPLES_RESULT = 0x0011
    PORT_COUNTERS = 0x0012
    PORT_COUNTERS_EXTENDED = 0x001D


class PerfCap(enum.IntFlag):
    """ClassPortInfo.CapabilityMask bits of the PerfMgt class (IBA 16.1.2, Table 247)."""
    ALL_PORT_SELECT = 1 << 8  # PortSelect 0xFF: the sum over all ports (and a Set clears them all)
    EXTENDED_WIDTH = 1 << 9  # PortCountersExtended with every 64-bit counter
    EXTENDED_WIDTH_NOIETF = 1 << 10  # PortCountersExtended with the data and packet counters only
    SAMPLES_ONLY = 1 << 11  # PortSamples only: no PortCounters
    XMIT_WAIT = 1 << 12  # PortCounters.PortXmitWait is kept


class PerfCap2(enum.IntFlag):
    """ClassPortInfo.CapabilityMask2 bits of the PerfMgt class (IBA 1.3, 16.1.2)."""
    PM_KEY = 1 << 0  # IsPMKeySupported
    ADDITIONAL_PORT_COUNTERS_EXTENDED = 1 << 1  # PortCountersExtended carries the 64-bit error counters


def has_extended_errors(capability_mask2: int) -> bool:
    """Whether a port agent keeps PortCountersExtended's 64-bit error counters."""
    return bool(capability_mask2 & PerfCap2.ADDITIONAL_PORT_COUNTERS_EXTENDED)


def has_extended(capability_mask: int) -> bool:
    """Whether a port agent with this CapabilityMask answers PortCountersExtended."""
    return bool(capability_mask & (PerfCap.EXTENDED_WIDTH | PerfCap.EXTENDED_WIDTH_NOIETF))


@layout()
class PortCounters(LayoutValue):
    """PortCounters (IBA 16.1.3.5): a port's error and traffic counters; PortSelect names
    the port in a Get (0xFF: all ports, where AllPortSelect is supported)."""
    ATTR_ID: ClassVar[int] = PerfAttrID.PORT_COUNTERS
    reserved: U8 = 0
    port_select: U8 = 0
    counter_select: U16 = 0
    symbol_error_counter: U16 = 0
    link_error_recovery_counter: U8 = 0
    link_downed_counter: U8 = 0
    port_rcv_errors: U16 = 0
    port_rcv_remote_physical_errors: U16 = 0
    port_rcv_switch_relay_errors: U16 = 0
    port_xmit_discards: U16 = 0
    port_xmit_constraint_errors: U8 = 0
    port_rcv_constraint_errors: U8 = 0
    counter_select2: U8 = 0
    local_link_integrity_errors: U4 = 0
    excessive_buffer_overrun_errors: U4 = 0
    qp1_dropped: U16 = 0
    vl15_dropped: U16 = 0
    port_xmit_data: U32 = 0
    port_rcv_data: U32 = 0
    port_xmit_pkts: U32 = 0
    port_rcv_pkts: U32 = 0
    port_xmit_wait: U32 = 0


assert PortCounters.LAYOUT.size == 44

ALL_PORTS = 0xFF  # PortSelect: every port (summed in a Get), where ALL_PORT_SELECT is supported
# CounterSelect (and CounterSelect2) of a Set: which counters to clear; every one
CLEAR_ALL = 0xFFFF
CLEAR_ALL2 = 0xFF
CLEAR_ALL_EXTENDED = 0x00FF  # PortCountersExtended's eight counters (bits 0-7)


@layout()
class PortCountersExtended(LayoutValue):
    """PortCountersExtended (IBA 16.1.4.11): a port's data and packet counters, 64 bits
    wide (data in 4-byte words, as PortCounters'), then IBA 1.3's optional 64-bit error
    counters (`EXTENDED_ERRORS`, in that order), meaningful only where ClassPortInfo.CapabilityMask2
    says the agent keeps them (`has_extended_errors`); CounterSelect2 selects those in a Set."""
    ATTR_ID: ClassVar[int] = PerfAttrID.PORT_COUNTERS_EXTENDED
    reserved: U8 = 0
    port_select: U8 = 0
    counter_select: U16 = 0
    counter_select2: U32 = 0
    port_xmit_data: U64 = 0
    port_rcv_data: U64 = 0
    port_xmit_pkts: U64 = 0
    port_rcv_pkts: U64 = 0
    port_unicast_xmit_pkts: U64 = 0
    port_unicast_rcv_pkts: U64 = 0
    port_multicast_xmit_pkts: U64 = 0
    port_multicast_rcv_pkts: U64 = 0
    symbol_error_counter: U64 = 0
    link_error_recovery_counter: U64 = 0
    link_downed_counter: U64 = 0
    port_rcv_errors: U64 = 0
    port_rcv_remote_physical_errors: U64 = 0
    port_rcv_switch_relay_errors: U64 = 0
    port_xmit_discards: U64 = 0
    port_xmit_constraint_errors: U64 = 0
    port_rcv_constraint_errors: U64 = 0
    local_link_integrity_errors: U64 = 0
    excessive_buffer_overrun_errors: U64 = 0
    vl15_dropped: U64 = 0
    port_xmit_wait: U64 = 0
    qp1_dropped: U64 = 0


assert PortCountersExtended.LAYOUT.size == 184  # within the GMP data area (192)

# IBA 1.3's optional 64-bit error counters of PortCountersExtended: its fields after the
# data and packet counters (bytes 72-183); answered where ClassPortInfo.CapabilityMask2 has
# IsAdditionalPortCountersExtendedSupported (`has_extended_errors`), zero elsewhere
_NAMES = PortCountersExtended.LAYOUT.names
EXTENDED_ERRORS = _NAMES[_NAMES.index("port_multicast_rcv_pkts") + 1:]
ADDITIONAL_EXTENDED = ("counter_select2",) + EXTENDED_ERRORS  # what perfquery -x adds when supported

gmp.ATTRIBUTE_NAMES[int(MgmtClass.PERF_MGT)] = {
    PerfAttrID.PORT_SAMPLES_CONTROL: "PortSamplesControl", PerfAttrID.PORT_SAMPLES_RESULT: "PortSamplesResult",
    PerfAttrID.PORT_COUNTERS: "PortCounters", PerfAttrID.PORT_COUNTERS_EXTENDED: "PortCountersExtended"}


def get(attribute_id: int, modifier: int = 0, data: bytes | LayoutValue | None = None, *, tid: int) -> bytes:
    """A PerfGet of ``attribute_id``."""
    return gmp.build(MgmtClass.PERF_MGT, Method.GET, attribute_id, modifier, data, tid=tid)


def set_(attribute_id: int, modifier: int = 0, data: bytes | LayoutValue | None = None, *, tid: int) -> bytes:
    """A PerfSet of ``attribute_id``."""
    return gmp.build(MgmtClass.PERF_MGT, Method.SET, attribute_id, modifier, data, tid=tid)


def port_counters_get(port: int, *, tid: int) -> bytes:
    """PerfGet(PortCounters) of ``port``: modifier 0, the port select in the data."""
    return get(PerfAttrID.PORT_COUNTERS, 0, PortCounters(port_select=port), tid=tid)


def port_counters_extended_get(port: int, *, tid: int) -> bytes:
    """PerfGet(PortCountersExtended) of ``port``."""
    return get(PerfAttrID.PORT_COUNTERS_EXTENDED, 0, PortCountersExtended(port_select=port), tid=tid)


def port_counters_clear(port: int, *, tid: int, extended: bool = False) -> bytes:
    """PerfSet(PortCounters) (or PortCountersExtended) that clears every counter of
    ``port`` (`ALL_PORTS`: of every port): CounterSelect names what to clear, the counter
    fields are the values written (zero)."""
    if extended:
        return set_(PerfAttrID.PORT_COUNTERS_EXTENDED, 0,
                    PortCountersExtended(port_select=port, counter_select=CLEAR_ALL_EXTENDED), tid=tid)
    return set_(PerfAttrID.PORT_COUNTERS, 0,
                PortCounters(port_select=port, counter_select=CLEAR_ALL, counter_select2=CLEAR_ALL2), tid=tid)


__all__ = ["PerfAttrID", "PerfCap", "PortCounters", "PortCountersExtended", "ALL_PORTS", "has_extended", "get",
           "set_", "port_counters_get", "port_counters_extended_get", "port_counters_clear"]
