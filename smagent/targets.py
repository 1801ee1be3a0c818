"""Targets (a LID or a DR path) and the Get requests `query` builds for them."""
from __future__ import annotations

import dataclasses

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import AttrID
from mad.errors import MadFieldError
from mad.header import Method
from smagent.transport.base import Request


@dataclasses.dataclass(frozen=True)
class Target:
    lid: int | None = None
    path: tuple[int, ...] | None = None

    def describe(self) -> str:
        return f"LID {self.lid}" if self.lid is not None else "DR path " + ",".join(map(str, self.path))

    def request(self, method, attr_id, modifier=0, value=None) -> Request:
        if self.path is not None:
            return Request(smpcodec.dr(method, attr_id, self.path, modifier, value))
        return Request(smpcodec.lid_routed(method, attr_id, modifier, value), dlid=self.lid)


def parse_target(text: str) -> Target:
    """'5' / '0x5' -> LID; '0' or '0,1,3' -> directed route (infiniband-diags' notation)."""
    t = text.strip()
    if "," in t or t == "0":
        return Target(path=smpcodec.parse_path(t))
    try:
        lid = int(t, 0)
    except ValueError:
        raise MadFieldError("target", text, "a LID (5, 0x5) or a DR path (0,1,3)") from None
    return Target(lid=fw.check_unicast_lid(lid))


QUERY_ATTRIBUTES = {
    "nodeinfo": AttrID.NODE_INFO, "nodedesc": AttrID.NODE_DESCRIPTION, "portinfo": AttrID.PORT_INFO,
    "switchinfo": AttrID.SWITCH_INFO, "sminfo": AttrID.SM_INFO, "lft": AttrID.LINEAR_FORWARDING_TABLE,
    "rft": AttrID.RANDOM_FORWARDING_TABLE, "mft": AttrID.MULTICAST_FORWARDING_TABLE,
    "pkeys": AttrID.P_KEY_TABLE, "sl2vl": AttrID.SL_TO_VL_MAPPING_TABLE,
}


def build_query(attribute: str, target: Target, *, port=None, block=None, position=None,
                ext_speeds=False) -> Request:
    attr_id = QUERY_ATTRIBUTES[attribute]
    block = block or 0
    if attr_id == AttrID.PORT_INFO:
        mod = fw.portinfo_modifier(port or 0, ext_speeds)
    elif attr_id == AttrID.LINEAR_FORWARDING_TABLE:
        mod = fw.lft_modifier(block)
    elif attr_id == AttrID.RANDOM_FORWARDING_TABLE:
        mod = fw.rft_modifier(block)
    elif attr_id == AttrID.MULTICAST_FORWARDING_TABLE:
        mod = fw.mft_modifier(block, position or 0)
    elif attr_id == AttrID.P_KEY_TABLE:
        mod = fw.pkey_modifier(block, port or 0)
    elif attr_id == AttrID.SL_TO_VL_MAPPING_TABLE:
        mod = fw.sl2vl_modifier(0, port or 0)
    else:
        mod = 0
    return target.request(Method.GET, attr_id, mod)
