"""InfiniBand packet framing around a 256-byte MAD, for captures (pure, no I/O).

A MAD on the wire is a UD SEND-only packet to QP0 (the SMI):

    LRH (8) | BTH (12) | DETH (8) | MAD (256) | ICRC (4) | VCRC (2)

as the vectors README ("tshark as an independent decoder") describes and tshark 4.0
decodes: LRH VL 15, LNH 2 (BTH follows), PktLen in 4-byte words from LRH to ICRC;
BTH opcode 0x64, P_Key 0xFFFF, DestQP 0; DETH Q_Key 0, SrcQP 0. Directed-route SMPs use
the permissive LID 0xFFFF at both LRH ends; the caller passes the LIDs.

CRCs: ICRC is CRC-32 (zlib) over the masked packet (LRH replaced by 8 bytes of 0xFF,
BTH.resv8a set to 0xFF), stored least significant byte first; VCRC is the reflected
CRC-16 with polynomial 0x100B, seed 0xFFFF and final inversion over LRH..ICRC, stored
least significant byte first. tshark only displays them; they reproduce the team's
reference capture (tshark/demo.erf) byte for byte but were never checked against
hardware, so `unframe` does not insist on them unless asked (``verify_crc=True``).

Each header is one construct layout (`mad.layout.Layout`).
"""
from __future__ import annotations

import struct
import zlib

from construct import BitsInteger, Padding

from mad.errors import MadError, MadLengthError
from mad.header import GSI_QKEY, GSI_QP, MAD_SIZE, SMP_CLASSES
from mad.layout import LayoutValue, layout

B = BitsInteger



@layout("vl" / B(4), "lver" / B(4), "sl" / B(4), Padding(2), "lnh" / B(2),
        "dlid" / B(16), Padding(5), "pkt_len" / B(11), "slid" / B(16))
class LRH(LayoutValue):
    """Local Route Header (IBA 7.7)."""
    vl: int = 0
    lver: int = 0
    sl: int = 0
    lnh: int = 0
    dlid: int = 0
    pkt_len: int = 0
    slid: int = 0


@layout("opcode" / B(8), "se" / B(1), "mig_req" / B(1), "pad_count" / B(2), "tver" / B(4),
        "p_key" / B(16), "resv8a" / B(8), "dest_qp" / B(24),
        "ack_req" / B(1), Padding(7), "psn" / B(24))
class BTH(LayoutValue):
    """Base Transport Header (IBA 9.2)."""
    opcode: int = 0
    se: int = 0
    mig_req: int = 0
    pad_count: int = 0
    tver: int = 0
    p_key: int = 0
    resv8a: int = 0
    dest_qp: int = 0
    ack_req: int = 0
    psn: int = 0


@layout("q_key" / B(32), Padding(8), "src_qp" / B(24))
class DETH(LayoutValue):
    """Datagram Extended Transport Header (IBA 9.3.3)."""
    q_key: int = 0
    src_qp: int = 0


VL_MANAGEMENT = 15
LNH_IBA_LOCAL = 2  # BTH follows the LRH
LNH_IBA_GLOBAL = 3  # a GRH comes first: not used for SMPs
OPCODE_UD_SEND_ONLY = 0x64
DEFAULT_P_KEY = 0xFFFF
MAD_QPS = (0, 1)  # QP0 (SMI) and QP1 (GSI) carry MADs
ICRC_SIZE = 4
VCRC_SIZE = 2
HEADERS_SIZE = LRH.LAYOUT.size + BTH.LAYOUT.size + DETH.LAYOUT.size  # 28
PACKET_SIZE = HEADERS_SIZE + MAD_SIZE + ICRC_SIZE + VCRC_SIZE  # 290
PKT_LEN_WORDS = (HEADERS_SIZE + MAD_SIZE + ICRC_SIZE) // 4  # 72


class FramingError(MadError):
    """A packet that is not a well-formed InfiniBand packet."""


class NotAMadPacket(MadError):
    """A well-formed InfiniBand packet that does not carry a MAD (another opcode, a
    connected QP, a GRH): capture readers skip these rather than fail."""


# -- CRCs ----------------------------------------------------------------------------------
def _crc16_table(poly_reflected: int) -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly_reflected if c & 1 else c >> 1
        table.append(c)
    return table


_VCRC_TABLE = _crc16_table(0xD008)  # 0x100B, bit-reflected


def vcrc(data: bytes) -> int:
    """CRC-16 over LRH..ICRC: polynomial 0x100B, seed 0xFFFF, reflected, inverted."""
    crc = 0xFFFF
    t = _VCRC_TABLE
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFF


_MASKED_LRH = b"\xff" * LRH.LAYOUT.size


def icrc(bth: bytes, rest: bytes) -> int:
    """CRC-32 over the invariant fields: LRH masked to all ones, BTH with resv8a = 0xFF,
    then DETH and payload (``rest``)."""
    masked = BTH.decode(bth)
    masked.resv8a = 0xFF
    return zlib.crc32(rest, zlib.crc32(BTH.LAYOUT.encode(masked), zlib.crc32(_MASKED_LRH)))


# -- frame / unframe -----------------------------------------------------------------------
def frame(mad: bytes, slid: int, dlid: int, *, psn: int = 0, crc: bool = True) -> bytes:
    """A full packet (LRH, BTH, DETH, MAD, ICRC, VCRC) around a 256-byte MAD. Without
    ``crc`` the ICRC/VCRC are left out and PktLen says so (tshark decodes that too)."""
    if not isinstance(mad, (bytes, bytearray, memoryview)) or len(mad) != MAD_SIZE:
        got = f"{len(mad)} bytes" if isinstance(mad, (bytes, bytearray, memoryview)) else type(mad).__name__
        raise MadLengthError(f"frame: a MAD is exactly {MAD_SIZE} bytes, got {got}")
    words = PKT_LEN_WORDS if crc else PKT_LEN_WORDS - ICRC_SIZE // 4
    # SMPs: QP0 on VL15; every other class (a GMP): QP1 with the GSI Q_Key on a data VL
    qp, q_key, vl = (0, 0, VL_MANAGEMENT) if mad[1] in SMP_CLASSES else (GSI_QP, GSI_QKEY, 0)
    lrh = LRH.LAYOUT.encode(LRH(vl=vl, lver=0, sl=0, lnh=LNH_IBA_LOCAL,
                             dlid=dlid, pkt_len=words, slid=slid))
    bth = BTH.LAYOUT.encode(BTH(opcode=OPCODE_UD_SEND_ONLY, p_key=DEFAULT_P_KEY, dest_qp=qp, psn=psn))
    deth = DETH.LAYOUT.encode(DETH(q_key=q_key, src_qp=qp))
    body = deth + bytes(mad)
    if not crc:
        return lrh + bth + body
    packet = lrh + bth + body + struct.pack("<I", icrc(bth, body))
    return packet + struct.pack("<H", vcrc(packet))


def unframe(packet, *, verify_crc: bool = False) -> tuple[bytes, int, int]:
    """Parse a packet built by `frame` (or captured by ibdump): returns (MAD, SLID, DLID).

    Accepts the packet with ICRC and VCRC, with the ICRC only, or with neither (PktLen
    tells which). Raises FramingError when the bytes are not a consistent packet and
    NotAMadPacket when they are a packet that carries no MAD."""
    if not isinstance(packet, (bytes, bytearray, memoryview)):
        raise FramingError(f"packet: expected bytes, got {type(packet).__name__}")
    packet = bytes(packet)
    n = len(packet)
    if n < LRH.LAYOUT.size:
        raise FramingError(f"packet: {n} bytes, shorter than the {LRH.LAYOUT.size}-byte LRH")
    lrh = LRH.decode(packet)
    if lrh.lver != 0:
        raise FramingError(f"LRH: link version {lrh.lver}, only 0 is defined")
    if lrh.lnh != LNH_IBA_LOCAL:
        what = "a GRH follows the LRH" if lrh.lnh == LNH_IBA_GLOBAL else f"raw packet (LNH={lrh.lnh})"
        raise NotAMadPacket(f"LRH: {what}; MADs here are IBA local (LNH=2)")
    covered = lrh.pkt_len * 4
    if n not in (covered, covered + VCRC_SIZE):
        raise FramingError(f"LRH: PktLen {lrh.pkt_len} words = {covered} bytes, but the packet has {n} "
                           f"(expected {covered} or {covered + VCRC_SIZE} with VCRC)")
    if covered < HEADERS_SIZE:
        raise FramingError(f"LRH: PktLen {lrh.pkt_len} words is shorter than LRH+BTH+DETH ({HEADERS_SIZE} bytes)")
    bth = BTH.decode(packet, LRH.LAYOUT.size)
    if bth.opcode != OPCODE_UD_SEND_ONLY:
        raise NotAMadPacket(f"BTH: opcode {bth.opcode:#04x}, MADs travel as UD SEND only (0x64)")
    if bth.tver != 0:
        raise FramingError(f"BTH: transport version {bth.tver}, only 0 is defined")
    if bth.dest_qp not in MAD_QPS:
        raise NotAMadPacket(f"BTH: destination QP {bth.dest_qp}, MADs go to QP0 or QP1")
    payload = covered - HEADERS_SIZE - bth.pad_count
    if payload == MAD_SIZE + ICRC_SIZE:
        has_icrc = True
    elif payload == MAD_SIZE:
        has_icrc = False
    else:
        raise FramingError(f"packet: {payload} payload bytes after the headers; a MAD is {MAD_SIZE} "
                           f"(+{ICRC_SIZE} ICRC)")
    start = HEADERS_SIZE
    mad = packet[start:start + MAD_SIZE]
    if verify_crc:
        if not has_icrc:
            raise FramingError("packet: no ICRC to verify")
        want = struct.unpack_from("<I", packet, start + MAD_SIZE)[0]
        got = icrc(packet[LRH.LAYOUT.size:LRH.LAYOUT.size + BTH.LAYOUT.size], packet[LRH.LAYOUT.size + BTH.LAYOUT.size:start + MAD_SIZE])
        if want != got:
            raise FramingError(f"ICRC {want:#010x} does not match the packet ({got:#010x})")
        if n == covered + VCRC_SIZE:
            want16 = struct.unpack_from("<H", packet, covered)[0]
            if want16 != vcrc(packet[:covered]):
                raise FramingError(f"VCRC {want16:#06x} does not match the packet ({vcrc(packet[:covered]):#06x})")
    return mad, lrh.slid, lrh.dlid


__all__ = ["LRH", "BTH", "DETH", "frame", "unframe", "icrc", "vcrc", "FramingError", "NotAMadPacket",
           "PACKET_SIZE", "PKT_LEN_WORDS"]
