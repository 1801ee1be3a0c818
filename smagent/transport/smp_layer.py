"""The SMP layer of the transport: what only subnet management packets (classes 0x01 and
0x81, QP0) need on top of the generic window (`smagent.transport.base`).

* M_Keys: every SMP that carries none (0) gets its key from the transport's
  `smagent.config.mkeys.KeyChain`: by DR path for directed route, by DLID for LID-routed. When
  keys differ per node, a PortInfo response through a path whose node is known maps that
  port's LIDs to the node's key, so LID-routed SMPs (and the LIDs a sweep assigns) find
  it; `Transport.query` asks a silent node once more with each other key it holds.
* A fresh TID per retry, patched into the bytes (or re-encoded for a Request built from
  an SMP).
* What a timed-out write may mean (`MKEY_HINT`).

Keys are secrets: nothing here shows one. The DR hop classes the retry policy keys on
are read from the bytes by `smagent.transport.retry.distance_class` (GMPs count as
LID-routed).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mad import smp as smpcodec
from mad.attributes import AttrID, PortInfo
from mad.errors import MadError
from mad.header import Method
from smagent.config.mkeys import KeyChain

if TYPE_CHECKING:
    from smagent.transport.base import Request

# What a timeout may mean besides a lost packet: said when a Set or TrapRepress times out
MKEY_HINT = ("if the node is M_Key-protected, the key was refused "
             "(protected SMAs drop SMPs with a wrong M_Key)")
# a Get that carried a key: levels 2 and 3 drop Gets with a wrong one (IBA 14.2.4.1)
MKEY_GET_HINT = ("if the node is M_Key-protected (levels 2 and 3 drop Gets too), the key sent was refused "
                 "(check --mkey / the key file)")
_PORT_INFO = int(AttrID.PORT_INFO)
_WRITES = frozenset({int(Method.SET), int(Method.TRAP_REPRESS)})


def decode_error(raw: bytes) -> str:
    """Why the codec refuses ``raw`` as an SMP."""
    try:
        smpcodec.decode(raw)
    except MadError as e:
        return str(e)
    return "not an SMP"


def timeout_hint(req: Request) -> str:
    """A refused write is the classic M_Key symptom (levels 0 and 1 answer every Get); a
    Get that carried an M_Key (bytes 24-31 of every SMP) may have been dropped for it."""
    assert req.raw is not None  # sent: `prepare` left its bytes
    if smpcodec.method_of(req.raw) in _WRITES:
        return f"; {MKEY_HINT}"
    return f"; {MKEY_GET_HINT}" if any(req.raw[24:32]) else ""


def key_for(keys: KeyChain, req: Request) -> int:
    if not keys.per_node:
        return keys.default
    if req.path is not None:  # a directed-route request built as bytes
        return keys.for_path(req.path)
    s = req.smp
    return keys.for_path(s.path) if s.directed else keys.for_lid(req.dlid)


def prepare(keys: KeyChain, req: Request, attempts: int) -> bytes:
    """The bytes of a try: a fresh TID per retry (a late answer to the old one is not
    mistaken for it) and the M_Key. A request built as bytes is patched in place of
    re-encoded."""
    if req._smp is not None:
        s = req._smp
        if attempts:
            s.transaction_id = smpcodec.next_tid()
        if not s.m_key:
            s.m_key = key_for(keys, req)
        raw = req.raw = smpcodec.encode(s)
        return raw
    out = req.raw
    assert out is not None
    if attempts:
        out = smpcodec.with_tid(out, smpcodec.next_tid())
        req._smp = None
    elif keys.keyless:
        return out  # the usual fabric: the bytes as built, M_Key 0
    if not smpcodec.m_key_of(out):
        key = key_for(keys, req)
        if key:
            out = smpcodec.with_m_key(out, key)
    req.raw, req._smp = out, None
    return out


def answered(keys: KeyChain, req: Request, raw: bytes) -> None:
    """A good response (the caller checks `keys.per_node` first: the hot path): a
    PortInfo through a known node's path teaches that port's LIDs (the LID a Set just
    assigned included)."""
    if smpcodec.attribute_id_of(raw) == _PORT_INFO and req.smp.directed:
        _learn_lids(keys, req, raw)


def _learn_lids(keys: KeyChain, req: Request, raw: bytes) -> None:
    smp = req.smp
    if not smp.directed or not keys.path_known(smp.path):
        return
    path = smp.path
    try:
        resp = smpcodec.decode(raw)
        pi = resp.attribute(PortInfo)
    except MadError:
        return
    port = resp.attribute_modifier & 0xFF
    # modifier 0 (a switch's port 0, or the CA port we came in by) or the port we
    # came in by: a LID of the node at the end of the path
    if pi.lid and (port == 0 or port == pi.local_port_num):
        keys.learn(lid=pi.lid, lmc=pi.lmc, key=keys.for_path(path))


def key_probes(keys: KeyChain, req: Request) -> list[int]:
    """The other keys to try on a node that did not answer ``req`` (none when the caller
    chose the key, or the node's key is known)."""
    s = req.smp
    known = keys.path_known(s.path) if s.directed else keys.lid_known(req.dlid)
    if known or not keys.per_node:
        return []
    return [k for k in keys.candidates() if k != s.m_key]


def learn(keys: KeyChain, req: Request, key: int) -> None:
    """``key`` answered ``req``'s node."""
    s = req.smp
    if s.directed:
        keys.learn(path=s.path, key=key)
    else:
        keys.learn(lid=req.dlid, key=key)
