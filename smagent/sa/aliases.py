"""Alias GUIDs (GUIDInfoRecord Set and Delete, IBA 15.2.5; OpenSM 3.3.23's
osm_sa_guidinfo_record.c): sans-I/O.

A port's GUID table holds GUIDCap GUIDs in blocks of 8, index 0 its own port GUID (read
only); the others are aliases a host registers (an SR-IOV virtual function's port GUID),
each then naming the same port: PathRecords and GUIDInfoRecords answer by it.

A Set or Delete names the port by LID and a block (both components, else
ERR_REQ_INSUFFICIENT_COMPONENTS), and which GUIDs of the block by their components
(GUID0..GUID7). No such port, or a block past GUIDCap: ERR_NO_RECORDS; naming index 0 of
block 0: ERR_REQ_INVALID. A Set stores each GUID named; a 0 asks the SM for one: the one
that index holds, else the one assigned to that index before, else a new one
(00:14:05 (OpenIB) << 40 | a counter, as OpenSM assigns with sm_assigned_guid 0). A GUID
that names another port, or this port at another index, is not stored. A Delete clears
the GUIDs named. Either answers with the request carrying the block as it is now (as
OpenSM: a GUID not stored shows what the index holds). An alias GID joins multicast
groups as its port; a Delete of an alias that is a member is ERR_REQ_DENIED. Aliases go with their port when it leaves the subnet; the GUIDs assigned stay
reserved for their port and index, as OpenSM keeps them.

The ports hold them too, as OpenSM's GUID manager writes them: `wanted` is every block
an alias was set in or deleted from, as the SA holds it, which the running SM hands its
sweeps (`SweepOptions.alias_guids`; `smagent.linkconf.guids` reads, diffs and writes
the blocks through the one apply path). A port that refuses the GUIDInfo Set (ibsim
does) is `refused`: no longer asked, its aliases the SA's alone."""
from __future__ import annotations

from mad.sa import SaStatus
from mad.sa_records import GUIDInfoRecord
from smagent.sa.pathrecords import PathQueryError

BLOCK = 8
OPENIB_OUI = 0x001405  # OSM_VENDOR_ID_OPENIB: the top of the GUIDs the SM assigns
_FIRST_GUID_BIT = next(c.bit for c in GUIDInfoRecord.COMPONENTS if c.name == "guids[0]")  # 4: GUID0


class AliasError(PathQueryError):
    """A Set or Delete refused: ``status`` is the SA status to send."""


def _guid_bits(mask: int) -> int:
    """Which GUIDs of the block a request's ComponentMask names (bit i: GUIDi)."""
    return mask >> _FIRST_GUID_BIT & 0xFF


class AliasGuids:
    """Every port's alias GUIDs."""

    def __init__(self):
        self.tables: dict[int, list[int]] = {}  # port GUID -> its GUIDs by index (0: itself)
        self.by_alias: dict[int, int] = {}  # alias GUID -> port GUID
        self.assigned: dict[tuple[int, int], int] = {}  # (port GUID, index) -> the GUID the SM assigned it
        self._counter = 0
        self.version = 0  # moves when an alias is added or removed
        self.touched: dict[int, set[int]] = {}  # port GUID -> blocks an alias was set in or deleted from
        self.refused: set[int] = set()  # port GUIDs whose port refuses the GUIDInfo Set (never asked again)
        self.dirty: set[int] = set()  # port GUIDs changed since the SM last wrote (it empties it)

    # -- the SA's methods ------------------------------------------------------------
    def set(self, subnet, q: GUIDInfoRecord, mask: int) -> GUIDInfoRecord:
        port_guid, cap = self._port(subnet, q, mask)
        indexes = self._indexes(q, mask, cap)
        table = self.tables.setdefault(port_guid, [port_guid] + [0] * (cap - 1))
        for i in indexes:
            guid = q.guids[i % BLOCK] or table[i] or self.assigned.get((port_guid, i)) or self._new_guid()
            if guid == table[i]:
                continue
            owner = self.by_alias.get(guid, guid if subnet.port_of_guid(guid) is not None else None)
            if owner is not None:  # another port's GUID, or this port's at another index: not stored
                continue
            if q.guids[i % BLOCK] == 0:
                self.assigned[(port_guid, i)] = guid
            self.by_alias.pop(table[i], None)
            table[i], self.by_alias[guid] = guid, port_guid
            self._touch(port_guid, i)
        return q.replace(guids=self.block(port_guid, q.block_num))

    def delete(self, subnet, q: GUIDInfoRecord, mask: int, in_group=lambda guid: False) -> GUIDInfoRecord:
        """``in_group(guid)``: whether a GUID is a multicast group's member (then refused)."""
        port_guid, cap = self._port(subnet, q, mask)
        table = self.tables.get(port_guid)
        if table is None:
            return q  # nothing registered: the request back, unchecked, as OpenSM answers
        indexes = self._indexes(q, mask, cap)
        if any(table[i] and in_group(table[i]) for i in indexes):
            raise AliasError(SaStatus.ERR_REQ_DENIED, "an alias GUID named is a multicast group's member")
        for i in indexes:
            if table[i]:
                self.by_alias.pop(table[i], None)
                table[i] = 0
                self._touch(port_guid, i)
        return q.replace(guids=self.block(port_guid, q.block_num))

    def _touch(self, port_guid: int, index: int) -> None:
        self.touched.setdefault(port_guid, set()).add(index // BLOCK)
        self.dirty.add(port_guid)
        self.version += 1

    def wanted(self) -> dict[int, dict[int, tuple[int, ...]]]:
        """What the ports should hold: port GUID -> {block: its 8 GUIDs} of every block an
        alias was set in or deleted from, but on ports that refused the Set."""
        return {g: {b: tuple(self.block(g, b) or ()) for b in sorted(blocks)}
                for g, blocks in self.touched.items() if g not in self.refused}

    # -- what the other records read -------------------------------------------------
    def port_of(self, guid: int) -> int | None:
        """The port GUID an alias GUID names (None: not an alias)."""
        return self.by_alias.get(guid)

    def block(self, port_guid: int, block: int) -> list[int] | None:
        """Block ``block`` of a port's table (None: no alias was ever set on it)."""
        table = self.tables.get(port_guid)
        return None if table is None else (table[block * BLOCK:(block + 1) * BLOCK] + [0] * BLOCK)[:BLOCK]

    def keep_only(self, present) -> None:
        """Ports no longer in the subnet (``present(port GUID)`` False) lose their aliases."""
        for port_guid in [g for g in self.tables if not present(g)]:
            for guid in self.tables.pop(port_guid)[1:]:
                self.by_alias.pop(guid, None)
            self.touched.pop(port_guid, None)
            self.refused.discard(port_guid)  # the port that comes back may be another HCA
            self.version += 1

    # -- the rules -------------------------------------------------------------------
    @staticmethod
    def _port(subnet, q: GUIDInfoRecord, mask: int) -> tuple[int, int]:
        """(port GUID, its GUIDCap) of the port a Set or Delete names."""
        if mask & GUIDInfoRecord.mask("lid", "block_num") != GUIDInfoRecord.mask("lid", "block_num"):
            raise AliasError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS, "a Set or Delete names LID and BlockNum")
        hit = subnet.port_of_lid(q.lid)
        if hit is None:
            raise AliasError(SaStatus.ERR_NO_RECORDS, f"no port has LID {q.lid}")
        node, port = hit
        pi = node.ports.get(0 if node.is_switch else port)
        return node.port_guid(port), pi.guid_cap if pi is not None else 0

    @staticmethod
    def _indexes(q: GUIDInfoRecord, mask: int, cap: int) -> list[int]:
        """The table indexes a Set or Delete names."""
        if q.block_num >= (cap + BLOCK - 1) // BLOCK:
            raise AliasError(SaStatus.ERR_NO_RECORDS, f"block {q.block_num} is past the port's GUIDCap {cap}")
        named = _guid_bits(mask)
        if q.block_num == 0 and named & 1:
            raise AliasError(SaStatus.ERR_REQ_INVALID, "GUID 0 of block 0 is the port's own, read only")
        first = q.block_num * BLOCK
        return [i for i in range(first, min(first + BLOCK, cap)) if named >> i % BLOCK & 1]

    def _new_guid(self) -> int:
        while True:
            self._counter += 1
            if self._counter >> 32:
                raise AliasError(SaStatus.ERR_NO_RESOURCES, "no more GUIDs to assign")
            guid = OPENIB_OUI << 40 | self._counter
            if guid not in self.by_alias and guid not in self.assigned.values():
                return guid
