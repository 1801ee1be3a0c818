"""Incoming MADs to their handlers, by (management class, method, attribute).

The daemon registers one handler per kind of request it serves (SMInfo Get and Set,
SubnTrap(Notice)); everything else goes to the default, which answers a Get or Set with
the IBA status "method/attribute not supported" (an unanswered request would leave its
sender waiting: under ibsim it is never timed out). SA (class 0x03) and performance
management (0x04) handlers register here too when they come."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mad.header import MGMT_CLASS_OFFSET, MgmtClass

METHOD_OFFSET = MGMT_CLASS_OFFSET + 2  # base version, class, class version, method
ATTR_OFFSET = 16  # AttributeID: bytes 16-17 of every MAD header (IBA 13.4.2)
SMP_CLASSES = (MgmtClass.SUBN_LID_ROUTED, MgmtClass.SUBN_DIRECTED_ROUTE)


@dataclasses.dataclass(frozen=True)
class Incoming:
    """One request as it came in: its bytes, the sender's LID and its dispatch key."""
    raw: bytes
    slid: int

    @property
    def mgmt_class(self) -> int:
        return self.raw[MGMT_CLASS_OFFSET]

    @property
    def method(self) -> int:
        return self.raw[METHOD_OFFSET]

    @property
    def attribute_id(self) -> int:
        return int.from_bytes(self.raw[ATTR_OFFSET:ATTR_OFFSET + 2], "big")


Handler = Callable[[Incoming], None]


class Dispatcher:
    def __init__(self, default: Handler):
        self.default = default
        self.routes: dict[tuple[int, int, int], Handler] = {}

    def route(self, classes, method: int, attribute_id: int, handler: Handler) -> None:
        """Send requests of any of `classes` (an int or several) with this method and
        attribute to `handler`."""
        for c in (classes,) if isinstance(classes, int) else classes:
            self.routes[(int(c), int(method), int(attribute_id))] = handler

    def handler_for(self, m: Incoming) -> Handler:
        if len(m.raw) < ATTR_OFFSET + 2:
            return self.default
        return self.routes.get((m.mgmt_class, m.method, m.attribute_id), self.default)

    def dispatch(self, raw: bytes, slid: int) -> None:
        m = Incoming(bytes(raw), slid)
        self.handler_for(m)(m)
