"""Traps (SubnTrap(Notice)) as an SM meets them: read one, answer it with a TrapRepress,
and send our own trap 144 (an SM announcing itself to the master, as OpenSM does when it
enters STANDBY)."""
from __future__ import annotations

import dataclasses

from mad import smp as smpcodec
from mad.attributes import (
    CAP_IS_SM, TRAP_DETAILS, AttrID, Notice, NoticeType, NodeType, Trap128Details, Trap129Details, Trap144Details,
    Trap256Details, TrapNumber,
)
from mad.errors import MadError
from mad.header import Method, method_name
from mad.smp import AnySmp
from smagent.config.mkeys import KeyChain

# traps after which the fabric's links or routes may differ: the master repairs
REPAIR_TRAPS = frozenset({TrapNumber.LINK_STATE_CHANGE, TrapNumber.LINK_INTEGRITY,
                          TrapNumber.BUFFER_OVERRUN, TrapNumber.FLOW_CONTROL_WATCHDOG})


@dataclasses.dataclass
class Trap:
    number: int  # trap number (generic) or device ID (vendor)
    generic: bool
    issuer_lid: int
    details: Trap128Details | Trap129Details | Trap144Details | Trap256Details | None  # decoded DataDetails
    smp: AnySmp  # the request, for the TrapRepress

    def describe(self) -> str:
        name = TrapNumber(self.number).name.lower() if self.generic and self.number in TrapNumber._value2member_map_ \
            else ("generic" if self.generic else "vendor")
        extra = ""
        if isinstance(self.details, Trap256Details):
            return f"trap 256 (bad M_Key) from LID {self.issuer_lid}: {bad_mkey(self.details)}"
        if self.details is not None:
            extra = " " + ", ".join(f"{k} {v:#x}" if k.startswith("capability") else f"{k} {v}"
                                    for k, v in dataclasses.asdict(self.details).items())
        return f"trap {self.number} ({name}) from LID {self.issuer_lid}{extra}"

    @property
    def announces_sm(self) -> bool:
        """Trap 144 from a port with IsSM: an SM telling the master it is there."""
        d = self.details
        return (self.number == TrapNumber.CAPABILITY_CHANGE and isinstance(d, Trap144Details)
                and bool(d.capability_mask & CAP_IS_SM))


def bad_mkey(d: Trap256Details) -> str:
    """Who tried what with a wrong M_Key (trap 256), without the key it carried."""
    attr = AttrID(d.attribute_id).name if d.attribute_id in AttrID._value2member_map_ else f"{d.attribute_id:#06x}"
    who = f"LID {d.lid}" + (f" (directed route, DRSLID {d.dr_slid})" if d.dr_notice else "")
    return (f"{who} sent {method_name(d.method)}({attr}, modifier {d.attribute_modifier:#x}) "
            f"with a wrong M_Key")


def parse(smp: AnySmp) -> Trap:
    """A decoded SubnTrap SMP -> Trap; raises MadError on a malformed Notice."""
    n = smp.attribute(Notice)
    details: Trap128Details | Trap129Details | Trap144Details | Trap256Details | None = None
    kind = TRAP_DETAILS.get(n.trap_number_or_device_id) if n.is_generic else None
    if kind is not None:
        try:
            details = kind.decode(n.data_details)
        except MadError:
            details = None
    return Trap(n.trap_number_or_device_id, bool(n.is_generic), n.issuer_lid, details, smp)


def repress(trap_smp: AnySmp, keys: KeyChain | None = None, slid: int = 0) -> bytes:
    """The TrapRepress for a trap: the same TID, attribute and Notice, method 0x07, and
    the M_Key of the trap's source from ``keys`` (by ``slid``, else the Notice's issuer
    LID), not the trap's own: an SMA sends its traps with M_Key 0, and checks a
    TrapRepress like a Set, so a protected one refuses a 0 (counts a violation, resends
    its trap). OpenSM fixed the same ("TrapRepress was failing for mkey != 0")."""
    key = 0
    if keys is not None:
        lid = slid
        if not lid:
            try:
                lid = trap_smp.attribute(Notice).issuer_lid
            except MadError:
                lid = 0
        key = keys.for_lid(lid) if lid else keys.default
    return smpcodec.encode(dataclasses.replace(trap_smp, method=Method.TRAP_REPRESS, status=0, m_key=key))


def trap_144(our_lid: int, capability_mask: int, node_type: int = NodeType.CA) -> bytes:
    """Our SubnTrap 144 to the master: our port's CapabilityMask (IsSM set) changed."""
    details = Trap144Details(lid=our_lid, other_local_changes=0, capability_mask=capability_mask,
                                 change_flags=0, capability_mask2=0)
    notice = Notice(is_generic=1, type=int(NoticeType.INFO), producer_type_or_vendor_id=int(node_type),
                        trap_number_or_device_id=int(TrapNumber.CAPABILITY_CHANGE), issuer_lid=our_lid,
                        notice_toggle=0, notice_count=0, data_details=Trap144Details.LAYOUT.encode(details))
    return smpcodec.encode(smpcodec.lid_routed(Method.TRAP, AttrID.NOTICE, 0, notice))
