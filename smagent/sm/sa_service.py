"""The SA inside the running SM: class-0x03 MADs from the dispatcher to the sans-I/O
`smagent.sa.SaAgent`, its answers out through the transport, a `Subnet` snapshot
published after every sweep or repair, and the RMPP retransmission deadline kept by the
daemon's loop (and between sweep rounds, so a long sweep does not stall a table).

Only a MASTER serves; a STANDBY or DISCOVERING SM's SA answers "method/attribute not
supported" (never silence: a client would wait for ever)."""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from mad.attributes import SMInfo, SMState
from smagent.errors import SmagentError
from smagent.sa import SaAgent
from smagent.subnet import Subnet
from smagent.transport.address import Address, Incoming

if TYPE_CHECKING:
    from smagent.sm.daemon import Daemon

log = logging.getLogger("smagent.sm")


class SaService:
    def __init__(self, daemon: Daemon):
        self.d = daemon
        self.agent = SaAgent(daemon.opts.sm_key, master=False, sms=self._sms_seen)

    @property
    def deadline(self) -> float:
        """When `tick` has RMPP work (inf: none)."""
        at = self.agent.deadline
        return math.inf if at is None else at

    def on_mad(self, m: Incoming) -> None:
        """A class-0x03 MAD (called inside the transport, perhaps mid-sweep)."""
        d = self.d
        self.agent.master = d._sm is not None and d.sm.state == SMState.MASTER
        self._send(self.agent.handle(m, d.clock()))

    def tick(self) -> None:
        """RMPP segments whose ACK did not come: sent again (or the transfer aborted)."""
        if self.deadline <= self.d.clock():
            self._send(self.agent.on_timeout(self.d.clock()))

    def publish(self, result) -> None:
        """A finished sweep's result becomes the snapshot every answer comes from."""
        self.agent.publish(Subnet.from_sweep(result, generation=self.d.counters.sweeps + 1))

    def status(self) -> dict:
        """The SA's part of `smagent status`: requests answered, RMPP transfers in flight,
        and which snapshot it answers from (the sweep count that published it)."""
        a = self.agent
        return {"answered": a.answered, "tables_in_flight": len(a.senders),
                "snapshot": a.subnet.generation if a.subnet is not None else None}

    def _send(self, out: list[tuple[bytes, Address]]) -> None:
        for raw, addr in out:
            try:
                self.d.t.respond(raw, addr)
            except SmagentError as e:  # never fatal: we may be inside a sweep's batch
                log.warning("SA answer to %s not sent: %s", addr.describe(), e)

    def _sms_seen(self) -> list[tuple[int, SMInfo]]:
        """(LID, SMInfo) of every SM we know: ours first, then the others as they last answered."""
        d = self.d
        if d._sm is None:
            return []
        me = d._local()
        out = [(me[2].lid if me is not None else 0, d.sm.sminfo(d.t.stats.sent, reveal_key=True))]
        out += [(p.lid, SMInfo(guid=p.guid, sm_key=0, act_count=p.act_count, priority=p.priority, sm_state=p.state))
                for p in d.peers.values()]
        return out
