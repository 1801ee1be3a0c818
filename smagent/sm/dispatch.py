"""Incoming MADs to their handlers, by (management class, method, attribute).

The daemon registers one handler per kind of request it serves (SMInfo Get and Set,
SubnTrap(Notice)); everything else goes to the default, which answers a Get or Set with
the IBA status "method/attribute not supported" (an unanswered request would leave its
sender waiting: under ibsim it is never timed out). SA (class 0x03) and performance
management (0x04) handlers register here too when they come.

A handler is given the request as it came in: anything with ``raw`` (the MAD's bytes)
and ``slid`` (the sender's LID), such as `Incoming` here."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mad.header import MGMT_CLASS_OFFSET, MgmtClass

METHOD_OFFSET = MGMT_CLASS_OFFSET + 2  # base version, class, class version, method
ATTR_OFFSET = 16  # AttributeID: bytes 16-17 of every MAD header (IBA 13.4.2)
SMP_CLASSES = (MgmtClass.SUBN_LID_ROUTED, MgmtClass.SUBN_DIRECTED_ROUTE)

Key = tuple[int, int, int]  # (management class, method, attribute ID)


@dataclasses.dataclass(frozen=True)
class Incoming:
    """One request as it came in: its bytes and the sender's LID (0: unknown)."""
    raw: bytes
    slid: int


def key_of(raw: bytes) -> Key | None:
    """(management class, method, attribute ID) read from a MAD's header; None if the
    bytes are too short to hold one."""
    if len(raw) < ATTR_OFFSET + 2:
        return None
    return raw[MGMT_CLASS_OFFSET], raw[METHOD_OFFSET], int.from_bytes(raw[ATTR_OFFSET:ATTR_OFFSET + 2], "big")


Handler = Callable[[Any], None]  # given an `Incoming` (or any object with raw and slid)


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

    def dispatch(self, m: Any) -> None:
        """Hand `m` (an `Incoming`, or anything with raw and slid) to its handler."""
        self.handler_for(m.raw)(m)
