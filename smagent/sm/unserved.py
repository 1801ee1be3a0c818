"""Requests the daemon does not serve, answered with the IBA status rather than left
unread: a request nobody answers is never timed out under ibsim, and a class nobody on the
port registered is worse there: umad2sim kills the process it hands that MAD to (a NULL
dereference), as `ibping`, `ibsysstat` and `vendstat` to the SM's port killed `smagent run`
(and kill OpenSM). So under umad2sim the daemon registers the vendor classes of those tools
(`UNSERVED_CLASSES`, each only if no other process on the port serves it already; never on a
real kernel, which answers unregistered classes itself and where they would keep `ibping -S`
off the SM's host: `smagent.transport.umad.sm_classes`) and answers a Get or Set of
any class it does not serve with "method/attribute combination not supported" (IBA 13.4.7);
other methods are dropped, as no SM answers them."""
from __future__ import annotations

from mad import smp as smpcodec
from mad.errors import MadError
from mad.header import Method
from smagent.sm.dispatch import SMP_CLASSES
from smagent.transport.address import Address, Incoming

ATTR_NOT_SUPPORTED = 0x000C  # MAD status: method/attribute combination not supported
OPENIB_OUI = 0x001405
# infiniband-diags' OpenIB vendor classes (range 2, OUI 0x001405): ibping, ibsysstat
PING_CLASS, SYSSTAT_CLASS = 0x32, 0x33


def answer(m: Incoming, reply_lid) -> tuple[bytes, int | Address] | None:
    """The answer to a request no handler serves, and where it goes (a LID for an SMP:
    ``reply_lid(request, slid)`` picks it; the sender's address for a GMP); None for a
    response, a method other than Get or Set, or a MAD too short or undecodable."""
    raw = m.raw
    if len(raw) < 24 or raw[3] not in (Method.GET, Method.SET):
        return None
    if raw[1] in SMP_CLASSES:
        try:
            req = smpcodec.decode(raw)
        except MadError:
            return None
        return smpcodec.encode(smpcodec.response_to(req, status=ATTR_NOT_SUPPORTED)), reply_lid(req, m.slid)
    out = bytearray(raw)
    out[3] = Method.GET_RESP  # IBA 13.4.5: Get and Set are answered with GetResp
    out[4:6] = ATTR_NOT_SUPPORTED.to_bytes(2, "big")
    return bytes(out), m.address.reply()
