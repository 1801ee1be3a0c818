"""Bring a fabric up, as named phases over one `SweepState` (see `sweep()` and `plan_phases()`):

    discover -> SM check -> desired state -> LIDs -> route -> ports -> read links, LFTs,
    RFTs, MFTs (and diff) -> SwitchInfo plan || arm ports -> write SwitchInfo, LFT, RFT,
    MFT -> write link tables -> activate -> save LIDs

Every change is planned before anything is sent: a dry run stops after the plan. The
GetResp of each Set carries the attribute as the node now holds it, and that is the
read-back we check (no second Get per block). The sweep does not trace paths: `smagent
verify` (`smagent.verify`) does, from the tables the switches hold.

Unicast: a switch with a LinearForwardingTable gets LFT blocks; one with LinearFDBCap 0
and RandomFDBCap > 0 gets RFT entries and maybe a DefaultPort (`smagent.fdb.rft`).
Multicast: every group (`smagent.planning.multicast`: a group file, or the IPoIB broadcast group
0xC000 with every CA port) gets a spanning tree and MFT entries, diffed and written by
(block, position).

SwitchInfo fields a sweep writes, and why (everything else is echoed as read):

* LinearFDBTop: the highest LID assigned (switches with an LFT only).
* LifeTimeValue: 18, as OpenSM; PortStateChange: cleared when set (`smagent.fdb.tops`).
* DefaultPort: RFT switches only, when `smagent.fdb.rft` picks one (else as read).
* MulticastFDBTop: only on a switch that says it implements it, i.e. port 0's
  PortInfo.CapabilityMask has IsMulticastFDBTopSupported (bit 30, IBA 1.2.1+), as
  OpenSM does (``use_mfttop``); then the highest MLID programmed on that switch, or
  0xBFFF (no entry) when none. Other switches may treat the field as reserved: ibsim
  (no IsMulticastFDBTopSupported) reports 0 and ignores a Set of it (the GetResp still
  says 0, checked on ibsim 0.10); our simulator honours a non-zero top. Writing it
  where it is not supported could only hide entries or fail the read-back.
* DefaultMulticastPrimaryPort / NotPrimaryPort: as read, unless the group file has a
  ``default-multicast`` line for the switch (see `smagent.planning.multicast`).

The package: `options` (SweepOptions), `result` (SweepResult, PortChange, the
JSON and text of a plan), `state` (SweepState, Phase), `tables` (the `TableSource` the
planning phases read: live, or the subnet model a repair passes in), one module per
phase family (`discover`, `lids`, `route`, `ports`, `linktables`, `unicast` (LFT, RFT),
`mcast`, `switchinfo`), `write` (the write passes) and `pipeline` (their order). The
master-SM check and SM discovery are `smagent.discovery.smcheck`.
"""
from __future__ import annotations

# the public names callers use (smagent.sweep.X), wherever they live now
from smagent.discovery.smcheck import OtherMasterSM, check_other_sms, find_sms  # noqa: F401
from smagent.sweep.options import REPAIR_PASSES, SweepOptions  # noqa: F401
from smagent.sweep.pipeline import GUID2LID, plan, sweep  # noqa: F401
from smagent.sweep.result import PlanDefects, PortChange, SweepResult  # noqa: F401
from smagent.sweep.route import routing_input  # noqa: F401
from smagent.sweep.state import PLAN_PHASES, WRITE_PHASES, SweepError, SweepState  # noqa: F401
from smagent.sweep.switchinfo import LIFE_TIME_VALUE  # noqa: F401
from smagent.sweep.tables import KnownTables, LiveTables, TableSource  # noqa: F401
from smagent.sweep.write import JOURNAL_CHUNK  # noqa: F401

__all__ = ["GUID2LID", "JOURNAL_CHUNK", "LIFE_TIME_VALUE", "PLAN_PHASES", "REPAIR_PASSES", "WRITE_PHASES", "KnownTables", "LiveTables",
           "OtherMasterSM", "PlanDefects", "PortChange", "SweepError", "SweepOptions", "SweepResult", "SweepState",
           "TableSource", "check_other_sms", "find_sms", "plan", "routing_input", "sweep"]
