"""What a sweep is asked to do (`SweepOptions`) and what a running SM's earlier sweeps
left (`KnownState`, the tables a repair plans against)."""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Sequence

from smagent import discovery, linkconf as links, routing
from smagent.config import mkeys
from smagent.config.drainfile import Entry as Drained
from smagent.planning import multicast
from smagent.planning.multicast import Group as McastGroup
from smagent.routing.auto import AutoMemory

if TYPE_CHECKING:
    from smagent.sweep.desired import DesiredState


REPAIR_PASSES = 4  # passes after the first over what did not finish, on a lossy fabric


@dataclasses.dataclass
class SweepOptions:
    lmc: int = 0
    lid_file: str | None = None
    routing: str | routing.RoutingSpec = "auto"  # parsed by routing.parse_spec (a RoutingSpec as it is)
    # a running SM's memory of auto's choice, passed from sweep to sweep (`smagent.routing.auto`);
    # None: every sweep chooses afresh
    routing_memory: AutoMemory | None = None
    dry_run: bool = False
    force: bool = False
    # multicast: a group file path, a parsed multicast.GroupSpec, or None for the default
    # group (0xC000, every CA port); multicast=False leaves every MFT alone
    mcast_groups: str | os.PathLike[str] | multicast.GroupSpec | None = None
    multicast: bool = True
    # groups hosts joined through the SA (`smagent.sa.groups`), programmed besides the
    # configured ones (an MLID those use is theirs); and MLIDs of joined groups that died:
    # their entries are removed, not kept as unconfigured multicast
    mcast_joined: tuple[McastGroup, ...] = ()
    mcast_released: frozenset[int] = frozenset()
    # where LFT blocks are saved before they are overwritten, the apply journal lives
    # (smagent.fdb.backup, smagent.fdb.journal) and, without lid_file, the LIDs are kept
    # (<state_dir>/guid2lid); None: none of these (the in-process simulator's default)
    state_dir: str | None = None
    progress: Callable[[str], object] | None = None  # called with the phase name when a phase starts: the CLI's status line
    desired: DesiredState | None = None  # static LFT entries, groups, SwitchInfo settings
    links: links.LinkOptions | Literal[False] | None = None  # None: OpenSM's defaults; False: configure no link
    # MFT entries of MLIDs outside the configured groups: kept and reported (False), or
    # removed (True; also desired state `multicast_prune: true`)
    prune_multicast: bool = False
    # a KnownState (what an earlier sweep left): plan against it with no discovery and no
    # table reads; the running SM's repairs, after it updated the topology itself
    known: KnownState | None = None
    # write even if the planned tables break pairs the current tables deliver, or loop
    # (smagent.sweep.plancheck); a dry run only reports them
    allow_defects: bool = False
    # passes after the first over what did not finish (Sets lost, ports not ACTIVE), made
    # only while the transport observes loss (`smagent.transport.retry`); 0: none
    repair_passes: int = REPAIR_PASSES
    # a smagent.config.partitions.PartitionConfig (parsed: `partitions.load`, before any SMP); wins
    # over a desired state's partitions; None: the desired state's, else the default partition
    partitions: object = None
    # a smagent.config.qospolicy.QosPolicy (parsed: `qospolicy.load`, before any SMP): path SLs and
    # per-port-class SL2VL/VLArb tables; wins over a desired state's qos_policy
    qos_policy: object = None
    # M_Key protection to set on every end port (a smagent.config.mkeys.Protection: key or secret,
    # level, lease; smagent.sweep.protect); None: keys are used as given, never set
    mkey_protection: mkeys.Protection | None = None
    # collect every per-port table unit read or confirmed written (P_Key, SL2VL, VLArb) in
    # `SweepResult.link_tables`: the running SM's SA answers its table records from them;
    # off elsewhere (a fresh 11,664-host fabric writes 2 million SL2VL pairs)
    keep_link_tables: bool = False
    # nodes and cables the running SM keeps drained (`smagent.config.drainfile`): taken out of
    # the topology right after discovery (or the known state), so that no route, tree or port
    # table is planned over them while they are still cabled
    drained: tuple[Drained, ...] = ()
    # alias GUIDs to hold in the ports' GUIDInfo blocks: port GUID -> {block: its 8 GUIDs}
    # (`smagent.linkconf.guids`; the running SM's SA hands what hosts registered)
    alias_guids: Mapping[int, Mapping[int, Sequence[int]]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class KnownState:
    """What the switches hold as far as our own sweeps know: the topology (PortInfo and
    SwitchInfo as the last Sets answered), LFT blocks {(switch, block): bytes} and MFT
    units {(switch, block, position): masks}. A block missing is unknown (it is written).
    ``links``: GUIDs of nodes whose SL2VL/VLArb/P_Key tables are unknown (read again)."""
    topology: discovery.Topology
    lft: dict[tuple[int, int], bytes]
    mft: dict[tuple[int, int, int], list[int]]
    links: set[int] = dataclasses.field(default_factory=set)
    # the ports the sweep found as planned: (what it planned with, {(guid, port): (its PortInfo,
    # the peer's, OperationalVLs)}): a repair plans only the others (`smagent.sweep.ports`)
    settled: tuple | None = None
