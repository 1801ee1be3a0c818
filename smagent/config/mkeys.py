"""M_Keys: which key each SMP carries (IBA 14.2.4).

An SMA whose port has a non-zero M_Key and M_KeyProtectBits > 0 drops, without any
response, an SMP that does not carry that key (level 0 and 1: Sets only; level 2 and
3: Gets too). An SM therefore needs the key of every protected node. `--mkey KEY`
gives one key for every SMP; `--mkey-file FILE` gives one per node.

Key file format (``--mkey-file``)::

    # M_Keys of the fabric: one "GUID MKEY" pair per line
    default     0x00000000cafe0001      # for every node the file does not name
    0x0002c90300a1b2c0  0x1122334455667788  # a node GUID: the whole node
    0002c90300a1b2c1    8877665544332211    # a port GUID: that CA port only

* one entry per line: ``GUID MKEY``, or ``default MKEY`` (at most once);
* GUIDs and keys are hexadecimal, with or without ``0x``, at most 16 digits; a GUID
  is not 0; a key of 0 means "no key" (an unprotected port accepts any key);
* a GUID is a node GUID (a switch: the key of port 0, which guards the whole switch;
  a CA: the key of every port) or a port GUID (that port of a CA: CA ports are
  guarded one by one); a port GUID entry wins over its node's;
* a GUID line may go on with DR paths (``0,1,3``), as STATE_DIR/guid2mkey writes them
  (`save_guid2mkey`): SMPs down those paths carry that key first, so the file a protecting
  sweep left serves as ``--mkey-file`` for every other command;
* ``#`` starts a comment, to the end of the line; blank lines are ignored;
* a GUID listed twice is an error (even with the same key).

Errors name the file and line (``keys.txt:3: ...``) and never quote a key. With
both ``--mkey`` and a file, ``--mkey`` replaces the file's ``default``.

How keys are chosen: discovery first asks a node's NodeInfo with the default key
(a Get: at levels 0 and 1 it is answered whatever the key). The NodeInfo names the
node and port GUID, and from then on every SMP down that DR path carries that node's
key from the file (`KeyChain.learn`). A node that does not answer (level 2 or 3 and
a wrong key) is asked once more with each other key the chain holds
(`KeyChain.candidates`); the one it answers is learnt for that path and GUID. LIDs
map to keys once a PortInfo read through a known path shows them (the transport
does that), so LID-routed SMPs carry the right key too.

Keys are secrets: nothing here (errors, ``repr``) shows one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os

from smagent.config import atomicfile, files
from smagent.errors import BadInput

MKEY_BITS = 64
MKEY_MAX = (1 << MKEY_BITS) - 1


class MKeyFileError(BadInput):
    """A key file that cannot be used (exit status 2 at the CLI); names file:line."""


def _check_key(key, what: str = "M_Key") -> int:
    if isinstance(key, bool) or not isinstance(key, int):
        raise BadInput(f"{what}: an M_Key is an integer")
    if not 0 <= key <= MKEY_MAX:
        raise BadInput(f"{what}: an M_Key is 64 bits (0 .. 2^64-1)")  # never quote the key
    return key


def _hex(token: str) -> int | None:
    t = token[2:] if token[:2].lower() == "0x" else token
    if not t or len(t) > 16:
        return None
    try:
        return int(t, 16)
    except ValueError:
        return None


class KeyChain:
    """The M_Key for every SMP: a default, keys by node or port GUID, and what
    discovery learnt about which DR path and which LID leads to which node.

    `for_path(path)` / `for_lid(lid)`: the key for an SMP to that DR path / DLID
    (the default until something was learnt there). `learn(...)`: remember the key of
    the node found at a path or LID. `candidates()`: the distinct keys to try on a node
    that has not said who it is yet."""

    __slots__ = ("_default", "by_guid", "_learnt", "_paths", "_lids", "source")

    def __init__(self, default: int = 0, by_guid: dict | None = None, *, source: str | None = None):
        self._default = _check_key(default, "--mkey")
        self.by_guid: dict[int, int] = {}
        for g, k in (by_guid or {}).items():
            self.by_guid[int(g)] = _check_key(k, f"key of GUID {int(g):#018x}")
        self._learnt: dict[int, int] = {}  # GUID -> key a node proved by answering it
        self._paths: dict[tuple[int, ...], int] = {}
        self._lids: dict[int, int] = {}
        self.source = source  # the key file, if any (for messages)

    # -- the default key ----------------------------------------------------------------
    @property
    def default(self) -> int:
        return self._default

    @default.setter
    def default(self, key: int) -> None:
        self._default = _check_key(key, "--mkey")

    @property
    def keyless(self) -> bool:
        """No key anywhere (no default, no file, nothing learnt): every SMP carries M_Key 0,
        so the transport sends the bytes as built (its hot path asks this once per SMP)."""
        return not (self._default or self.by_guid or self._learnt)

    @property
    def per_node(self) -> bool:
        """Whether keys may differ between nodes (a key file, or keys learnt by probing):
        only then is it worth mapping paths and LIDs."""
        return bool(self.by_guid or self._learnt)

    # -- lookups ----------------------------------------------------------------------------
    def key_of(self, guid: int | None = None, port_guid: int | None = None) -> int:
        """The key of a node (and port): proven keys first, then the file's port GUID
        entry, its node GUID entry, the default."""
        for table in (self._learnt, self.by_guid):
            for g in (port_guid, guid):
                if g is not None and g in table:
                    return table[g]
        return self._default

    def for_path(self, path) -> int:
        """The key for a directed-route SMP down ``path`` (0, then exit ports)."""
        if not self._paths:
            return self._default
        return self._paths.get(tuple(path), self._default)

    def path_known(self, path) -> bool:
        return tuple(path) in self._paths

    def for_lid(self, lid: int) -> int:
        """The key for a LID-routed SMP to ``lid``."""
        if not self._lids:
            return self._default
        return self._lids.get(lid, self._default)

    def lid_known(self, lid: int) -> bool:
        return lid in self._lids

    def candidates(self) -> list[int]:
        """Distinct non-zero keys to try on a node that has not answered yet: the
        default first, then every other key the chain holds (0 is never needed: a port
        without an M_Key accepts any)."""
        out: list[int] = []
        for k in (self._default, *self.by_guid.values(), *self._learnt.values()):
            if k and k not in out:
                out.append(k)
        return out

    # -- learning -----------------------------------------------------------------------------
    def learn(self, *, path=None, lid: int | None = None, lmc: int = 0, guid: int | None = None,
              port_guid: int | None = None, key: int | None = None) -> int:
        """Remember which key the node at ``path`` and/or ``lid`` (with ``lmc``: every LID
        of the port) takes, and return it. With ``key``, that key (proven: the node
        answered it) is also remembered for ``port_guid`` (else ``guid``); without, the
        key is the node's from the file (`key_of`), else the default."""
        if key is None:
            key = self.key_of(guid, port_guid)
        else:
            key = _check_key(key)
            g = port_guid if port_guid is not None else guid
            if g is not None:
                self._learnt[g] = key
        if path is not None:
            self._paths[tuple(path)] = key
        if lid:
            for x in range(lid, lid + (1 << lmc)):
                self._lids[x] = key
        return key

    def forget_paths(self) -> None:
        """Drop what was learnt about paths and LIDs (a new discovery re-learns them)."""
        self._paths.clear()
        self._lids.clear()

    def __repr__(self) -> str:  # never the keys themselves
        return (f"<KeyChain default {'set' if self._default else 'none'}, {len(self.by_guid)} GUID keys, "
                f"{len(self._paths)} paths, {len(self._lids)} LIDs>")

    __str__ = __repr__


def _entries(text: str, source: str) -> tuple[int | None, list[tuple[int, int, list[tuple[int, ...]]]]]:
    """The grammar of a key file (the module docstring), the one reader of both
    ``--mkey-file`` and guid2mkey: (the default key or None, [(GUID, key, DR paths)])."""
    default = None
    entries: list[tuple[int, int, list[tuple[int, ...]]]] = []
    seen_at: dict[int, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{n}"
        words = line.split()
        paths = [_path(w) for w in words[2:]]
        if len(words) < 2 or None in paths or (paths and words[0].lower() == "default"):
            raise MKeyFileError(f"{where}: expected 'GUID MKEY' or 'default MKEY' (two hexadecimal words; "
                                f"a GUID line may go on with DR paths, as guid2mkey), found {len(words)} words")
        first, second = words[:2]
        key = _hex(second)
        if key is None:
            raise MKeyFileError(f"{where}: the M_Key is not a hexadecimal number of at most 16 digits")
        if first.lower() == "default":
            if default is not None:
                raise MKeyFileError(f"{where}: a second 'default' line (the first is line {seen_at[-1]})")
            default = key
            seen_at[-1] = n
            continue
        guid = _hex(first)
        if guid is None:
            # not quoted: a line with its columns swapped would show a key
            raise MKeyFileError(f"{where}: the first word is not a GUID (hexadecimal, at most 16 digits) "
                                f"nor 'default'")
        if guid == 0:
            raise MKeyFileError(f"{where}: GUID 0 is not a node or port GUID")
        if guid in seen_at:
            raise MKeyFileError(f"{where}: GUID {guid:#018x} is listed twice (first on line {seen_at[guid]})")
        entries.append((guid, key, [p for p in paths if p is not None]))
        seen_at[guid] = n
    return default, entries


def parse(text: str, source: str = "<mkeys>") -> KeyChain:
    """A `KeyChain` from key file text (see the module docstring); MKeyFileError names
    ``source:line``."""
    default, entries = _entries(text, source)
    chain = KeyChain(default or 0, {g: k for g, k, _p in entries}, source=source)
    for _g, key, paths in entries:  # who was found down each path last time: its key goes first
        for path in paths:
            chain.learn(path=path, key=key)
    return chain


def load(path) -> KeyChain:
    """Read a key file; MKeyFileError if it is unreadable or its contents are bad."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise MKeyFileError(f"{p}: not a text file (UTF-8)") from None
    except OSError as e:
        raise MKeyFileError(f"--mkey-file {p}: {e.strerror or e}") from None
    return parse(text, source=p)


def parse_key(text: str, what: str) -> int:
    """A key given as text (``--mkey``, ``--sm-key``): 64 bits, decimal or 0x hex. A
    BadInput names ``what`` and the problem, never the text (not even part of it: a
    mistyped key is most of the real one)."""
    try:
        key = int(text.strip(), 0)
    except ValueError:
        raise BadInput(f"{what}: not a number (decimal or 0x hex); the value is not shown") from None
    if not 0 <= key <= MKEY_MAX:
        raise BadInput(f"{what}: a key is 64 bits (0 .. 2^64-1); the value is not shown")
    return key


def load_key_file(path, what: str) -> int:
    """One key from a file (``--sm-key-file``), read and checked whole: exactly one
    non-comment line holding a key as `parse_key` reads it (``#`` comments and blank
    lines allowed). Errors name the file and line, never the key."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise BadInput(f"{what} {p}: not a text file (UTF-8)") from None
    except OSError as e:
        raise BadInput(f"{what} {p}: {e.strerror or e}") from None
    lines = [(n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line]
    if len(lines) != 1:
        raise BadInput(f"{what} {p}: expected one key, found {len(lines)} non-comment lines"
                       + (f" (lines {', '.join(str(n) for n, _ in lines[:5])})" if lines else ""))
    n, line = lines[0]
    return parse_key(line, f"{what} {p}:{n}")


def keychain(m_key: int = 0, m_key_file=None) -> KeyChain:
    """The chain for ``--mkey`` and ``--mkey-file``: the file's keys, and ``m_key``
    (when not 0) as the default."""
    chain = load(m_key_file) if m_key_file else KeyChain()
    if m_key:
        chain.default = m_key
    return chain


# -- assigning keys (OpenSM's m_key, m_key_protection_level, m_key_lease_period, guid2mkey) --------
LEASE_DEFAULT = 60  # seconds; OpenSM's default 0 (never lapses) locks a fabric whose keys are lost for good
LEASE_MAX = 0xFFFF  # PortInfo.M_KeyLeasePeriod is 16 bits


def derive_key(secret: bytes, guid: int) -> int:
    """A node's M_Key from the subnet's secret: HMAC-SHA256(secret, the node GUID as 8
    big-endian bytes), its first 8 bytes as a big-endian integer (the next 8 in the
    2^-64 case of 0, which would mean "no key"). Knowing one node's key tells nothing
    about another's."""
    digest = hmac.new(secret, guid.to_bytes(8, "big"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") or int.from_bytes(digest[8:16], "big")


@dataclasses.dataclass(frozen=True, repr=False)
class Protection:
    """What a sweep sets on every end port (a switch's port 0, every CA port), all three
    in the same SubnSet(PortInfo) (IBA C14-22): M_Key (``key`` for the whole subnet, or
    per node from ``secret``: `derive_key`), M_KeyProtectBits ``level`` (0-3) and
    M_KeyLeasePeriod ``lease`` (seconds, 0 = protection never lapses)."""
    level: int = 2
    lease: int = LEASE_DEFAULT
    key: int = 0
    secret: bytes | None = None

    def __post_init__(self):
        if isinstance(self.level, bool) or not isinstance(self.level, int) or not 0 <= self.level <= 3:
            raise BadInput("M_Key protection level: 0, 1, 2 or 3 (M_KeyProtectBits)")
        if isinstance(self.lease, bool) or not isinstance(self.lease, int) or not 0 <= self.lease <= LEASE_MAX:
            raise BadInput(f"M_Key lease period: 0 .. {LEASE_MAX} seconds (0: the protection never lapses)")
        _check_key(self.key, "the subnet M_Key")
        if self.secret is not None and len(self.secret) < 16:
            raise BadInput("M_Key secret: at least 16 bytes (the per-node keys are derived from it)")
        if not self.key and self.secret is None:
            raise BadInput("M_Key protection needs a key: --mkey KEY (one key for the subnet) or "
                           "--mkey-secret-file FILE (one key per node, derived from the secret)")

    @property
    def per_node(self) -> bool:
        return self.secret is not None

    def key_of(self, guid: int) -> int:
        """The key node ``guid`` is to hold."""
        return derive_key(self.secret, guid) if self.secret is not None else self.key

    def fields(self, guid: int) -> dict:
        """The PortInfo fields of an end port of node ``guid``."""
        return {"m_key": self.key_of(guid), "m_key_protect_bits": self.level, "m_key_lease_period": self.lease}

    def __repr__(self) -> str:  # never the key nor the secret
        return (f"<Protection level {self.level}, lease {self.lease} s, "
                f"{'per-node keys' if self.per_node else 'one subnet key'}>")

    __str__ = __repr__


def load_secret(path) -> bytes:
    """The secret per-node keys derive from: the file's bytes, surrounding white space
    stripped (at least 16 bytes left; `Protection` checks). Never quoted."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read().strip()
    except OSError as e:
        raise BadInput(f"--mkey-secret-file {p}: {e.strerror or e}") from None
    if len(data) < 16:
        raise BadInput(f"--mkey-secret-file {p}: the secret is shorter than 16 bytes")
    return data


@dataclasses.dataclass
class Assigned:
    """What STATE_DIR/guid2mkey holds: the key this SM gave each node (by node GUID), and
    the DR paths it last reached the node by (so that a restarted SM's first NodeInfo down
    a path already carries the key of the node found there last time: at levels 2 and 3
    a wrong key is refused, and each refusal is a violation)."""
    keys: dict[int, int] = dataclasses.field(default_factory=dict)
    paths: dict[int, list[tuple[int, ...]]] = dataclasses.field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<Assigned {len(self.keys)} nodes>"


def _path(token: str) -> tuple[int, ...] | None:
    try:
        hops = tuple(int(h) for h in token.split(","))
    except ValueError:
        return None
    return hops if hops and hops[0] == 0 and len(hops) <= 64 and all(0 <= h <= 255 for h in hops) else None


def load_guid2mkey(path) -> Assigned:
    """STATE_DIR/guid2mkey, read and checked whole: one ``GUID MKEY [DR-PATH ...]`` line per
    node (the key-file grammar, `_entries`, without ``default``). A bad line is
    MKeyFileError naming file:line, never the key. An absent file holds nothing."""
    p = os.fspath(path)
    try:
        text = files.read_state_text(p, "M_Key file")  # a regular file of bounded size
    except FileNotFoundError:
        return Assigned()
    except BadInput as e:
        raise MKeyFileError(str(e)) from None
    default, entries = _entries(text, p)
    if default is not None:
        raise MKeyFileError(f"{p}: a 'default' line: guid2mkey names the key of each node")
    return Assigned({g: k for g, k, _p in entries}, {g: paths for g, _k, paths in entries})


def save_guid2mkey(path, assigned: Assigned) -> None:
    """Replace guid2mkey atomically, mode 0600 (keys are secrets)."""
    lines = ["# M_Keys this SM set: node GUID, key, the DR paths it was reached by. Keep it secret."]
    for g, k in sorted(assigned.keys.items()):
        lines.append(" ".join([f"0x{g:016x}", f"0x{k:016x}",
                               *(",".join(map(str, p)) for p in assigned.paths.get(g, []))]))
    atomicfile.write_bytes(path, ("\n".join(lines) + "\n").encode("ascii"), mode=0o600)


__all__ = ["KeyChain", "MKeyFileError", "parse", "load", "keychain", "parse_key", "load_key_file", "MKEY_MAX",
           "Protection", "Assigned", "derive_key", "load_secret", "load_guid2mkey", "save_guid2mkey", "LEASE_DEFAULT"]
