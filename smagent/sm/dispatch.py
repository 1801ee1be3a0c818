"""Incoming MADs to their handlers, by (management class, method, attribute).

The daemon's roles register one handler per kind of request they serve (SMInfo Get and
Set: `smagent.sm.mastership`; SubnTrap(Notice): `smagent.sm.duties`); everything else goes to the default, which answers a Get or Set with
the IBA status "method/attribute not supported" (an unanswered request would leave its
sender waiting: under ibsim it is never timed out). SA (class 0x03) and performance
management (0x04) handlers register here too when they come.

A handler is given the request as it came in: the transport's `Incoming` (its bytes,
``raw``, and where it came from, ``address`` and ``slid``); an SMP handler decodes it with
`decoded` and answers to `reply_lid`."""
from __future__ import annotations

import logging
from collections.abc import Callable

from mad import smp as smpcodec
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import ATTRIBUTE_ID_SLICE, METHOD_OFFSET, MGMT_CLASS_OFFSET, MgmtClass
from smagent.transport.address import Incoming

log = logging.getLogger("smagent.sm")

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
        self.classes: dict[int, Handler] = {}  # whole classes (the SA's), after the exact routes

    def route(self, classes, method: int, attribute_id: int, handler: Handler) -> None:
        """Send requests of any of `classes` (an int or several) with this method and
        attribute to `handler`."""
        for c in (classes,) if isinstance(classes, int) else classes:
            self.routes[(int(c), int(method), int(attribute_id))] = handler

    def route_class(self, mgmt_class: int, handler: Handler) -> None:
        """Send every MAD of `mgmt_class` no exact route takes to `handler` (an agent that
        answers every method and attribute of its class itself, as the SA does)."""
        self.classes[int(mgmt_class)] = handler

    def handler_for(self, raw: bytes) -> Handler:
        key = key_of(raw)
        if key is None:
            return self.default
        return self.routes.get(key) or self.classes.get(key[0], self.default)

    def dispatch(self, m: Incoming) -> None:
        """Hand `m` to its handler."""
        self.handler_for(m.raw)(m)


def decoded(m: Incoming):
    """The SMP a handler was given, decoded; None (logged) if it does not decode."""
    try:
        return smpcodec.decode(m.raw)
    except MadError as e:
        log.warning("ignored an undecodable request from LID %d: %s", m.slid, e)
        return None


def reply_lid(req, slid: int) -> int:
    """Where an SMP's answer goes: a directed-route one back by the permissive LID."""
    return PERMISSIVE_LID if req.directed else (slid or PERMISSIVE_LID)
