"""What `smagent run` is told (`DaemonOptions`) and what it counts (`Counters`, shown by
`smagent status` and the metrics endpoint)."""
from __future__ import annotations

import collections
import dataclasses

from smagent import sweep as sweepmod
from smagent.sm import statemachine as smstate


@dataclasses.dataclass
class DaemonOptions:
    priority: int = 0
    sm_key: int = smstate.DEFAULT_SM_KEY
    sweep_interval: float = smstate.DEFAULT_SWEEP_INTERVAL_S  # 0: no light sweeps
    poll_interval: float = smstate.DEFAULT_POLL_INTERVAL_S
    poll_retries: int = smstate.DEFAULT_POLL_RETRIES
    trap_settle: float = 0.05  # traps of one event come in bursts (both ends of a link): repair once
    state_dir: str | None = None
    desired_file: str | None = None  # re-read on SIGHUP
    given: dict = dataclasses.field(default_factory=dict)  # lmc, lid_file, routing from the command line
    sweep: sweepmod.SweepOptions = dataclasses.field(default_factory=sweepmod.SweepOptions)
    perfmgr_interval: float = 0.0  # seconds between counter sweeps as MASTER (`smagent.sm.perfmgr`); 0: none
    client_reregister: str = "capable"  # on becoming MASTER: capable | all | off (`smagent.sm.reregister`)
    audit_share: float = 0.01  # the audit's Gets as a share of the light sweeps' (`smagent.sm.audit`); 0: none


@dataclasses.dataclass
class Counters:
    sweeps: int = 0  # sweeps done: the bring-up, every repair (incremental or full), SIGHUP
    repairs: int = 0
    light_sweeps: int = 0
    light_sweep_gets: int = 0  # SMPs of the last light sweep (all Gets)
    traps: int = 0
    bad_m_keys: int = 0  # traps 256: an SMP with a wrong M_Key reached a protected port
    trap_numbers: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    sminfo_gets_answered: int = 0
    sminfo_sets_answered: int = 0
    sweeps_failed: int = 0  # sweeps (and repairs) that ended in an error: see `last_error`
    censuses: int = 0  # PortInfo of every CA port, to find an SM we did not know
    handovers_sent: int = 0
    handovers_received: int = 0
    polls: int = 0
    poll_failures: int = 0
    errors: int = 0
    client_reregisters: int = 0  # end ports sent PortInfo.ClientReregister (on becoming MASTER)
    drifts_found: int = 0  # entries the audit read that differ from what we programmed (`smagent.sm.audit`)
    drifts_repaired: int = 0  # of those, written back by a repair that succeeded
    plan_refusals: int = 0  # sweeps the check of planned tables refused (`sweep.PlanDefects`)
