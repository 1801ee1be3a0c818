"""Capture files of the SMPs a transport sent and received, readable by Wireshark/tshark.

Written formats: a path ending in ``.pcap`` gets classic pcap with link type 252
(Wireshark "exported PDU", dissector tag ``infiniband``), written through scapy's
RawPcapWriter; anything else gets ERF. Both open in tshark 4.0. The default,
ERF (Endace Extensible Record Format), holds records of type 21 (InfiniBand),
flags 0x04 (varying-length record): what ibdump writes and what tshark 4.0 reads. tshark
4.0 refuses pcap/pcapng with link type 247 (DLT_INFINIBAND), so that is read but never
written. Each record is

    timestamp  8 bytes, little-endian 32.32 fixed point seconds since the epoch
    type       1 byte  (21)            flags 1 byte (0x04)
    rlen       2 bytes, big-endian: record length including this 16-byte header,
                        padded to a multiple of 8 (as DAG cards and ibdump do)
    lctr       2 bytes (loss counter, 0)   wlen 2 bytes: packet length on the wire
    packet     LRH | BTH | DETH | MAD | ICRC | VCRC   (mad.framing)

scapy has ERF support (``scapy.utils.ERFEthernetWriter/Reader``), but only for type 2
(Ethernet): its writer hard-codes type 2 and a 2-byte Ethernet pad, and its reader
rejects other types and strips that pad. So ERF is written and read here with
``struct``. Classic pcap is parsed here too (24 + 16-byte headers: scapy's reader
warns instead of failing on truncated records, and we must name the bad record);
pcapng is read through scapy's ``RawPcapNgReader``, where it does the block parsing.

Read: ERF type 21 (ours and ibdump's), classic pcap with link type 247 (the IB packet
from the LRH on) or 252 (Wireshark "exported PDU" with dissector tag ``infiniband``),
and pcapng with link type 247. Records that are well-formed InfiniBand packets without a
MAD (other opcodes or QPs, a GRH) are skipped; anything malformed raises CaptureError
naming the file and the 1-based record number.
"""
from __future__ import annotations

import os
import struct
import time
from typing import IO, TYPE_CHECKING, Any, Iterator, NamedTuple

from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.framing import NotAMadPacket, frame, unframe
from smagent.errors import BadInput

if TYPE_CHECKING:
    from scapy.utils import RawPcapWriter

ERF_TYPE_INFINIBAND = 21
ERF_TYPE_META = 27  # provenance records newer DAG software writes: skipped
ERF_TYPE_PAD = 48  # padding records: skipped
ERF_FLAG_VLEN = 0x04
ERF_EXT_HEADER = 0x80  # type bit: 8-byte extension headers follow the record header
_ERF_TS = struct.Struct("<Q")
_ERF_REST = struct.Struct(">BBHHH")
ERF_HEADER_SIZE = _ERF_TS.size + _ERF_REST.size  # 16

LINKTYPE_INFINIBAND = 247
LINKTYPE_WIRESHARK_UPPER_PDU = 252
_PCAP_MAGIC = {
    b"\xa1\xb2\xc3\xd4": (">", 1e-6), b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9), b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
}
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


class CaptureError(BadInput):
    """A capture file that cannot be read; the message names the file and the record."""


class Record(NamedTuple):
    ts: float  # seconds since the epoch
    mad: bytes  # the 256-byte MAD
    slid: int  # LRH source LID
    dlid: int  # LRH destination LID


# -- writing ---------------------------------------------------------------------------------
def erf_timestamp(ts: float) -> int:
    """Seconds -> ERF 32.32 fixed point."""
    sec = int(ts)
    frac = round((ts - sec) * (1 << 32))
    if frac >= 1 << 32:
        sec, frac = sec + 1, 0
    return (sec << 32) | frac


def erf_record(packet: bytes, ts: float) -> bytes:
    """One ERF type-21 record around a framed packet."""
    rlen = ERF_HEADER_SIZE + len(packet)
    pad = -rlen % 8
    return (_ERF_TS.pack(erf_timestamp(ts))
            + _ERF_REST.pack(ERF_TYPE_INFINIBAND, ERF_FLAG_VLEN, rlen + pad, 0, len(packet))
            + packet + bytes(pad))


# exported-PDU tags: dissector name (12) "infiniband" (unpadded, as Wireshark writes it), end
_EXPORTED_PDU_TAGS = struct.pack(">HH", 12, 10) + b"infiniband" + struct.pack(">HH", 0, 0)


class CaptureWriter:
    """Records MADs as an ERF capture (the recorder a Transport calls).

    ``write(mad, inbound=..., dlid=...)`` takes the LIDs as the transport knows them:
    ``dlid`` is the remote end (the request's destination LID, 0xFFFF for directed
    route) and ``slid`` the local port's LID (0 if unknown). Outbound MADs are framed
    slid -> dlid, inbound ones dlid -> slid; a directed-route SMP (permissive ``dlid``)
    gets the permissive LID at both ends, as the vectors' framing does. Records are
    flushed as they are written, so a capture is readable while a session runs.

    ``atomic``: write to ``PATH.partial`` and rename it to PATH on `close`, so a file at
    PATH is always a whole recording (`Session.start_recording`); a run that dies
    leaves only the ``.partial`` file.
    """

    def __init__(self, path: str | os.PathLike | IO[bytes], *, atomic: bool = False):
        self._pcap: RawPcapWriter | None = None  # a .pcap file
        self._erf: IO[bytes] | None = None  # else an ERF file or stream
        self._owned = True
        self._final: str | None = None  # atomic: the name the file gets on close
        if not isinstance(path, (str, os.PathLike)):  # an open binary stream
            self._erf, self._owned = path, False
            self.path = str(getattr(path, "name", "<stream>"))
        else:
            self.path = os.fspath(path)
            target = self.path
            if atomic:
                self._final, target = self.path, self.path + ".partial"
            try:
                if self.path.endswith(".pcap"):
                    from scapy.utils import RawPcapWriter
                    self._pcap = RawPcapWriter(target, linktype=LINKTYPE_WIRESHARK_UPPER_PDU, sync=True)
                    self._pcap.write_header(None)  # write_packet alone never writes the file header
                else:
                    self._erf = open(target, "wb")
            except OSError as e:  # --record: refused before the first SMP
                raise CaptureError(f"{self.path}: {e.strerror or e}") from None
        self._psn = 0
        self.count = 0

    def write(self, mad: bytes, *, inbound: bool, dlid: int, slid: int = 0, ts: float | None = None) -> None:
        if self.closed:
            raise ValueError(f"{self.path}: capture already closed")
        if dlid == PERMISSIVE_LID:
            src = dst = PERMISSIVE_LID
        elif inbound:
            src, dst = dlid, slid
        else:
            src, dst = slid, dlid
        packet = frame(mad, src, dst, psn=self._psn)
        self._psn = (self._psn + 1) & 0xFFFFFF
        ts = time.time() if ts is None else ts
        if self._pcap is not None:
            sec = int(ts)
            self._pcap.write_packet(_EXPORTED_PDU_TAGS + packet, sec=sec, usec=int((ts - sec) * 1e6))
        elif self._erf is not None:
            self._erf.write(erf_record(packet, ts))
            self._erf.flush()
        self.count += 1

    def close(self) -> None:
        if self._pcap is not None:
            self._pcap.close()
        elif self._erf is not None:
            if self._owned:
                self._erf.close()
            else:
                self._erf.flush()
        self._pcap = self._erf = None
        if self._final is not None:
            os.replace(self._final + ".partial", self._final)
            self._final = None

    @property
    def closed(self) -> bool:
        return self._pcap is None and self._erf is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- reading -----------------------------------------------------------------------------------
def read_capture(path: str | os.PathLike, *, verify_crc: bool = False) -> Iterator[Record]:
    """Yield one Record per MAD in an ERF, pcap or pcapng capture, in file order."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CaptureError(f"{path}: {e.strerror or e}") from None
    magic = data[:4]
    if magic in _PCAP_MAGIC:
        packets = _pcap_packets(path, data)
    elif magic == _PCAPNG_MAGIC:
        packets = _pcapng_packets(path)
    else:
        packets = _erf_packets(path, data)
    for n, ts, packet in packets:
        try:
            mad, slid, dlid = unframe(packet, verify_crc=verify_crc)
        except NotAMadPacket:
            continue
        except MadError as e:
            raise CaptureError(f"{path}: record {n}: {e}") from None
        yield Record(ts, mad, slid, dlid)


def _erf_packets(path: str, data: bytes):
    off, n = 0, 0
    while off < len(data):
        n += 1
        where = f"{path}: record {n} (offset {off})"
        if len(data) - off < ERF_HEADER_SIZE:
            raise CaptureError(f"{where}: truncated ERF header ({len(data) - off} of {ERF_HEADER_SIZE} bytes)")
        (ts,) = _ERF_TS.unpack_from(data, off)
        rtype, _flags, rlen, _lctr, wlen = _ERF_REST.unpack_from(data, off + _ERF_TS.size)
        if rlen < ERF_HEADER_SIZE:
            raise CaptureError(f"{where}: ERF record length {rlen} is shorter than its header; not an ERF file?")
        if off + rlen > len(data):
            raise CaptureError(f"{where}: truncated ERF record ({len(data) - off} of {rlen} bytes)")
        body = data[off + ERF_HEADER_SIZE:off + rlen]
        base = rtype & 0x7F
        if rtype & ERF_EXT_HEADER:  # chained 8-byte extension headers
            i = 0
            while True:
                if len(body) < i + 8:
                    raise CaptureError(f"{where}: truncated ERF extension header")
                more = body[i] & 0x80
                i += 8
                if not more:
                    break
            body = body[i:]
        off += rlen
        if base in (ERF_TYPE_PAD, ERF_TYPE_META):
            continue
        if base != ERF_TYPE_INFINIBAND:
            raise CaptureError(f"{where}: ERF record type {base}, expected {ERF_TYPE_INFINIBAND} (InfiniBand)")
        if wlen > len(body):
            raise CaptureError(f"{where}: packet truncated ({len(body)} of {wlen} bytes captured)")
        yield n, (ts >> 32) + (ts & 0xFFFFFFFF) / (1 << 32), body[:wlen]


def _pcap_packets(path: str, data: bytes):
    endian, unit = _PCAP_MAGIC[data[:4]]
    if len(data) < 24:
        raise CaptureError(f"{path}: truncated pcap file header")
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    if linktype not in (LINKTYPE_INFINIBAND, LINKTYPE_WIRESHARK_UPPER_PDU):
        raise CaptureError(f"{path}: pcap link type {linktype}, expected {LINKTYPE_INFINIBAND} (InfiniBand) "
                           f"or {LINKTYPE_WIRESHARK_UPPER_PDU} (exported PDU)")
    rec = struct.Struct(endian + "IIII")
    off, n = 24, 0
    while off < len(data):
        n += 1
        where = f"{path}: record {n} (offset {off})"
        if len(data) - off < rec.size:
            raise CaptureError(f"{where}: truncated pcap record header")
        sec, frac, caplen, wirelen = rec.unpack_from(data, off)
        off += rec.size
        if off + caplen > len(data):
            raise CaptureError(f"{where}: truncated packet ({len(data) - off} of {caplen} bytes)")
        if caplen < wirelen:
            raise CaptureError(f"{where}: packet cut by the snap length ({caplen} of {wirelen} bytes)")
        packet = data[off:off + caplen]
        off += caplen
        if linktype == LINKTYPE_WIRESHARK_UPPER_PDU:
            packet = _strip_exported_pdu(packet, where)
        yield n, sec + frac * unit, packet


def _strip_exported_pdu(packet: bytes, where: str) -> bytes:
    """Link type 252: tags (type 2, length 2, value) up to the end tag 0; the InfiniBand
    dissector tag (12, "infiniband") must be present."""
    off, proto = 0, None
    while True:
        if len(packet) < off + 4:
            raise CaptureError(f"{where}: truncated exported-PDU tag")
        tag, length = struct.unpack_from(">HH", packet, off)
        off += 4
        if tag == 0:
            break
        if tag == 12:  # dissector name
            proto = packet[off:off + length].rstrip(b"\0")
        off += length
    if proto != b"infiniband":
        raise CaptureError(f"{where}: exported PDU for dissector {proto!r}, expected b'infiniband'")
    return packet[off:]


def _pcapng_packets(path: str):
    try:
        from scapy.utils import RawPcapNgReader
        reader = RawPcapNgReader(path)
    except Exception as e:  # scapy raises its own Scapy_Exception for bad headers
        raise CaptureError(f"{path}: not a readable pcapng file: {e}") from None
    try:
        n = 0
        for packet, pmeta in reader:
            n += 1
            # scapy types the records as PacketMetadata; pcapng's carry the link type and timestamp parts
            meta: Any = pmeta
            if meta.linktype != LINKTYPE_INFINIBAND:
                raise CaptureError(f"{path}: record {n}: pcapng link type {meta.linktype}, "
                                   f"expected {LINKTYPE_INFINIBAND} (InfiniBand)")
            ts = ((meta.tshigh << 32) | meta.tslow) / meta.tsresol
            yield n, ts, packet
    finally:
        reader.close()


__all__ = ["CaptureWriter", "CaptureError", "Record", "read_capture", "erf_record", "erf_timestamp"]
