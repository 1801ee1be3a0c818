"""Tables being worked out: a GetTable whose records take long to find (every pair's
PathRecord on a large fabric: 140,625 on a 375-node tree) is not answered inside `handle`,
which would hold every other request, trap and repair up for as long; it becomes a
`TableJob`, whose records come out of a generator a chunk at a time (`SaAgent.work`,
called by the owner between its other work with a time budget), fed to its RMPP sender,
which sends them as the window allows.

One requester may have at most `PER_REQUESTER` tables pending or being sent (by its LID:
every process of a host counts together); more are answered ERR_NO_RESOURCES at once, as
OpenSM answers a request it has no resources for, so one host cannot queue unbounded work.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Callable, Iterator

from mad.rmpp import RmppSender
from smagent.transport.address import Address

PER_REQUESTER = 4  # tables pending or being sent per requester LID


@dataclass
class TableJob:
    """One GetTable being worked out: the generator of its data's chunks, the key its whole
    answer is kept under, the snapshot's answers it comes from, and the RMPP sender (with
    its address) the chunks are fed to."""
    chunks: Iterator[bytes]
    key: tuple
    source: object  # what it is worked out from (a new snapshot's answers are not this one's)
    sender: RmppSender
    addr: Address


class Pending:
    """The jobs by (requester LID, TID), worked in turn."""

    def __init__(self) -> None:
        self.jobs: collections.OrderedDict[tuple[int, int], TableJob] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self.jobs)

    def add(self, lid: int, tid: int, job: TableJob) -> None:
        self.jobs[(lid, tid)] = job

    def holds(self, lid: int, tid: int) -> bool:
        return (lid, tid) in self.jobs

    def work(self, more: Callable[[], bool], feed: Callable[[TableJob, bytes, bool], None]) -> None:
        """Chunks of the jobs, one chunk of each in turn, handed to ``feed`` (with whether
        the job is done), while ``more()`` says so (at least one chunk). A job whose
        transfer has ended (its requester sent STOP or ABORT, or never ACKed) is dropped."""
        while self.jobs:
            key, job = next(iter(self.jobs.items()))
            self.jobs.move_to_end(key)
            if job.sender.finished:
                del self.jobs[key]
                continue
            chunk = next(job.chunks, None)
            if chunk is None:
                del self.jobs[key]
            feed(job, chunk or b"", chunk is None)
            if not more():
                break
