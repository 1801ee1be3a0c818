"""Incoming MADs to their handlers, by (management class, method, attribute).

The daemon registers one handler per kind of request it serves (SMInfo Get and Set,
SubnTrap(Notice)); everything else goes to the default, which answers a Get or Set with
the IBA status "method/attribute not supported" (an unanswered request would leave its
sender waiting: under ibsim it is never timed out). SA (class 0x03) and performance
management (0x04) handlers register here too when they come.

A handler is given the request as it came in: the transport's `Incoming` (its bytes,
``raw``, and where it came from, ``address`` and ``slid``)."""
from __future__ import annotations

from collections.abc import Callable

from mad.header import ATTRIBUTE_ID_SLICE, METHOD_OFFSET, MGMT_CLASS_OFFSET, MgmtClass
from smagent.transport.address import Incoming

SMP_CLASSES = (MgmtClass.SUBN_LID_ROUTED, MgmtClass.SUBN_DIRECTED_ROUTE)

Key = tuple[int, int, int]  # (management class, method, attribute ID)


def key_of(raw: bytes) -> Key | None:
    """(management class, method, attribute ID) read from a MAD's header; None if the
    bytes are too short to hold one."""
    if len(raw) < ATTRIBUTE_ID_SLICE.stop:
        return None
    return raw[MGMT_CLASS_OFFSET], raw[METHOD_OFFSET], int.from_bytes(raw[ATTRIBUTE_ID_SLICE], "big")


Handler = Callable[[Incoming], None]


class Dispatcher:
    def __init__(self, default: Handler):
        self.default = default
        self.routes: dict[Key, Handler] = {}

    def route(self, classes, method: int, attribute_id: int, handler: Handler) -> None:
        """Send requests of any of `classes` (an int or several) with this method and
        attribute to `handler`."""
        for c in (classes,) if isinstance(classes, int) else classes:
            self.routes[(int(c), int(method), int(attribute_id))] = handler

    def handler_for(self, raw: bytes) -> Handler:
        key = key_of(raw)
        return self.default if key is None else self.routes.get(key, self.default)

    def dispatch(self, m: Incoming) -> None:
        """Hand `m` to its handler."""
        self.handler_for(m.raw)(m)
