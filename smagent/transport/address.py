"""Where a MAD goes or came from: the fields of ib_user_mad's ``ib_mad_addr`` (libibumad),
and an incoming MAD with the address it came from.

SMPs need only a LID (QP0, Q_Key 0: the transports address them by DLID alone); a GMP
goes to a remote QP (1, the GSI, for every class agent) with that QP's Q_Key
(0x80010000 for QP1), a P_Key index, an SL and, across subnets, a GRH. What the kernel
(and umad2sim) hands up with a received MAD is already the way back: the sender's LID
and QP, and, with a GRH, the sender's GID (the kernel swaps source and destination).
"""
from __future__ import annotations

import dataclasses
import struct

from mad.header import GSI_QKEY, GSI_QP

# ib_mad_addr (libibumad/umad.h): qpn, qkey, lid and flow_label big-endian; pkey_index in
# host order (umad_set_pkey stores it as given); 44 bytes with the reserved tail
_WIRE = struct.Struct(">IIHBBBBBB16sI")
_PKEY = struct.Struct("=H")
SIZE = 44
_LID_AT = 8


_QP, _QKEY, _UP_TO_GRH_FLAG, _GRH_FIELDS, _PKEY_INDEX = (slice(1, 4), slice(4, 8), slice(8, 13), slice(13, 36),
                                                         slice(36, 38))
_GRH_FLAG_AT = 12


def way_back(packed: bytes) -> bytes:
    """The bytes of a received, packed ib_mad_addr that decide the way back
    (`Address.unpack(packed).reply()`): the QP (24 bits), LID, SL, path bits, GRH flag and
    P_Key index; the GRH's fields only when it is there; the Q_Key only for a QP other
    than QP0 and QP1 (theirs is fixed). The rest of the buffer is not looked at: umad2sim
    leaves stray bytes in the GRH fields of a MAD that came without one, and a cache of
    answers keyed on the whole address missed once in four under a flood."""
    qp = packed[_QP]
    key = qp + packed[_UP_TO_GRH_FLAG] + packed[_PKEY_INDEX]
    if packed[_GRH_FLAG_AT]:
        key += packed[_GRH_FIELDS]
    if qp != b"\0\0\1" and qp != b"\0\0\0":
        key += packed[_QKEY]
    return key


@dataclasses.dataclass(frozen=True, slots=True)
class Grh:
    """The GRH of a MAD that crosses a router: the peer's GID and the fields IBA routes by."""
    gid: bytes = bytes(16)
    gid_index: int = 0  # which of our port's GIDs is the source
    hop_limit: int = 0xFF
    traffic_class: int = 0
    flow_label: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Address:
    """A MAD's destination (sending) or source (received). ``lid``: the peer's LID."""
    lid: int
    qpn: int = 0
    qkey: int = 0
    sl: int = 0
    path_bits: int = 0
    pkey_index: int = 0
    grh: Grh | None = None

    @classmethod
    def gsi(cls, lid: int, *, sl: int = 0, pkey_index: int = 0, grh: Grh | None = None) -> Address:
        """A class agent's address: QP1 with the GSI's Q_Key."""
        return cls(lid, GSI_QP, GSI_QKEY, sl, 0, pkey_index, grh)

    def reply(self) -> Address:
        """Where the answer to a MAD from here goes: the same LID, QP, SL, P_Key index and
        GRH (the GID received is the sender's), the Q_Key of the sender's QP (the kernel
        hands none up: QP1 has the well-known one, QP0 none)."""
        qkey = GSI_QKEY if self.qpn == GSI_QP else (0 if self.qpn == 0 else self.qkey)
        return dataclasses.replace(self, qkey=qkey, path_bits=0)

    def pack(self) -> bytes:
        """As libibumad's ib_mad_addr."""
        g = self.grh
        wire = _WIRE.pack(self.qpn, self.qkey, self.lid, self.sl, self.path_bits, g is not None,
                          g.gid_index if g else 0, g.hop_limit if g else 0, g.traffic_class if g else 0,
                          g.gid if g else bytes(16), g.flow_label if g else 0)
        return wire + _PKEY.pack(self.pkey_index) + bytes(SIZE - _WIRE.size - _PKEY.size)

    @classmethod
    def unpack(cls, buf: bytes | bytearray | memoryview) -> Address:
        """From libibumad's ib_mad_addr (what `UmadPort.recv` keeps)."""
        qpn, qkey, lid, sl, bits, grh, gix, hl, tc, gid, fl = _WIRE.unpack_from(buf)
        (pkey_index,) = _PKEY.unpack_from(buf, _WIRE.size)
        return cls(lid, qpn & 0xFFFFFF, qkey, sl, bits, pkey_index,
                   Grh(bytes(gid), gix, hl, tc, fl & 0xFFFFF) if grh else None)

    def describe(self) -> str:
        where = f"LID {self.lid} QP {self.qpn}"
        if self.grh is not None:
            where += f" GID {bytes(self.grh.gid).hex(':', 2)}"
        return where


@dataclasses.dataclass(frozen=True, slots=True)
class Incoming:
    """A MAD that arrived unasked (a request, a trap) and where it came from: what
    `Transport.on_request` is handed. Answer it with ``t.respond(raw, m.address.reply())``
    (for an SMP, ``m.slid`` is enough)."""
    raw: bytes
    address: Address

    @property
    def slid(self) -> int:
        return self.address.lid

    @classmethod
    def of(cls, raw: bytes, source: bytes | int | Address | None) -> Incoming:
        """From what a backend's `_recv` gives: a packed ib_mad_addr, a source LID (QP0),
        an Address, or nothing (0: unknown)."""
        if source.__class__ is bytes:
            return cls(raw, Address.unpack(source))  # type: ignore[arg-type]
        if isinstance(source, Address):
            return cls(raw, source)
        return cls(raw, Address(int(source or 0)))  # type: ignore[call-overload]


def lid_of(packed: bytes | bytearray | memoryview) -> int:
    """The LID of a packed ib_mad_addr, read in place."""
    return int.from_bytes(packed[_LID_AT:_LID_AT + 2], "big")


__all__ = ["Address", "Grh", "Incoming", "lid_of", "SIZE"]
