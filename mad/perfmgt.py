"""Performance Management (class 0x04, IBA 16.1): the attributes smagent reads."""
from __future__ import annotations

import enum
from typing import ClassVar

from construct import BitsInteger

from mad import gmp
from mad.header import MgmtClass, Method
from mad.layout import LayoutValue, layout

B = BitsInteger


class PerfAttrID(enum.IntEnum):
    CLASS_PORT_INFO = gmp.CLASS_PORT_INFO
    PORT_SAMPLES_CONTROL = 0x0010
    PORT_SAMPLES_RESULT = 0x0011
    PORT_COUNTERS = 0x0012


@layout(
    "reserved" / B(8), "port_select" / B(8), "counter_select" / B(16),
    "symbol_error_counter" / B(16), "link_error_recovery_counter" / B(8), "link_downed_counter" / B(8),
    "port_rcv_errors" / B(16), "port_rcv_remote_physical_errors" / B(16),
    "port_rcv_switch_relay_errors" / B(16), "port_xmit_discards" / B(16),
    "port_xmit_constraint_errors" / B(8), "port_rcv_constraint_errors" / B(8),
    "counter_select2" / B(8), "local_link_integrity_errors" / B(4), "excessive_buffer_overrun_errors" / B(4),
    "qp1_dropped" / B(16), "vl15_dropped" / B(16),
    "port_xmit_data" / B(32), "port_rcv_data" / B(32), "port_xmit_pkts" / B(32), "port_rcv_pkts" / B(32),
    "port_xmit_wait" / B(32),
)
class PortCounters(LayoutValue):
    """PortCounters (IBA 16.1.3.5): a port's error and traffic counters; PortSelect names
    the port in a Get (0xFF: all ports, where AllPortSelect is supported)."""
    ATTR_ID: ClassVar[int] = PerfAttrID.PORT_COUNTERS
    reserved: int = 0
    port_select: int = 0
    counter_select: int = 0
    symbol_error_counter: int = 0
    link_error_recovery_counter: int = 0
    link_downed_counter: int = 0
    port_rcv_errors: int = 0
    port_rcv_remote_physical_errors: int = 0
    port_rcv_switch_relay_errors: int = 0
    port_xmit_discards: int = 0
    port_xmit_constraint_errors: int = 0
    port_rcv_constraint_errors: int = 0
    counter_select2: int = 0
    local_link_integrity_errors: int = 0
    excessive_buffer_overrun_errors: int = 0
    qp1_dropped: int = 0
    vl15_dropped: int = 0
    port_xmit_data: int = 0
    port_rcv_data: int = 0
    port_xmit_pkts: int = 0
    port_rcv_pkts: int = 0
    port_xmit_wait: int = 0


assert PortCounters.LAYOUT.size == 44

gmp.ATTRIBUTE_NAMES[int(MgmtClass.PERF_MGT)] = {
    PerfAttrID.PORT_SAMPLES_CONTROL: "PortSamplesControl", PerfAttrID.PORT_SAMPLES_RESULT: "PortSamplesResult",
    PerfAttrID.PORT_COUNTERS: "PortCounters"}


def get(attribute_id: int, modifier: int = 0, data: bytes | LayoutValue | None = None, *, tid: int) -> bytes:
    """A PerfGet of ``attribute_id``."""
    return gmp.build(MgmtClass.PERF_MGT, Method.GET, attribute_id, modifier, data, tid=tid)


def port_counters_get(port: int, *, tid: int) -> bytes:
    """PerfGet(PortCounters) of ``port``: modifier 0, the port select in the data."""
    return get(PerfAttrID.PORT_COUNTERS, 0, PortCounters(port_select=port), tid=tid)


__all__ = ["PerfAttrID", "PortCounters", "get", "port_counters_get"]
