"""The one apply path for every write to the forwarding tables: the sweep (and so the
desired-state apply), `lft load`, `lft set`, `lft restore`, `mft set` and `rft set`.

An apply, in order:

1. **back up** what it overwrites (`backup.save_before_apply`: LFT blocks, MFT units, RFT
   blocks, the SwitchInfo fields it changes) into ``STATE_DIR/backups``, keeping the newest
   ``keep`` there (`backup.prune`: never this apply's, nor an interrupted apply's);
2. **journal** every unit it is about to write (``STATE_DIR/apply.journal``; moved into
   ``STATE_DIR/journals`` when it finishes, the newest ``keep`` kept);
3. **write** SwitchInfo, then LFT blocks in stages, the destination's side first, so that
   no pair routable before and after is black-holed or loops meanwhile
   (`smagent.planning.update_order`; a block whose entries need different stages is written
   once per stage), in chunks of ``chunk`` (each chunk's confirmed final writes journalled as
   it comes back, so an interrupted run is known to within a chunk; flushed per chunk,
   fsynced once the LFT phase ends),
   then RFT blocks (clearing phase first), then MFT units, then the link phase's per-port
   tables (SL2VL, VLArb, P_Key: `smagent.fdb.porttables`; backed up and journalled alike);
4. **check the read-back**: the GetResp of every Set is what the switch now holds, and
   must equal what was written; a difference is a problem.

Without a state directory (the in-process simulator, a replay) steps 1 and 2 are skipped.
A full disk (`atomicfile.no_space`) during steps 1 and 2 stops a one-shot command (an
OSError: the CLI's exit 3 names the file and what was sent); under the running SM
(`atomicfile.tolerate_full_disk`) it is a warning ("no backup written", "journal not
written") and the apply goes on.
The sweep calls the steps one by one (`Apply`), inside its own timed phases; the table
commands call `apply`.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from smagent.fdb import porttables as linktab
from smagent.config import atomicfile, files as paths
from smagent.fdb import backup, lft as linear, tops
from smagent.fdb import mft
from smagent.fdb import rft
from smagent.fdb.journal import Journal, JournalError
from smagent.fdb.plan import Plan  # noqa: F401 - also the name callers use (fdb.apply.Plan)
from smagent.fdb.switch import interleave
from smagent.planning import update_order

JOURNAL_CHUNK = 1024  # LFT blocks written between two journal records (and fsyncs)


class Apply:
    """One apply, step by step: `start` (backup, journal), `switchinfo`, `lft`, `rft`,
    `mft`, `links` (each returns its problems), `finish`."""

    def __init__(self, transport, plan: Plan, *, state_dir=None, topology=None, chunk: int = JOURNAL_CHUNK,
                 keep: int | None = None):
        self.t, self.plan, self.topology, self.chunk = transport, plan, topology, chunk
        self.state = Path(state_dir) if state_dir else None
        self.keep = keep  # backups and finished journals kept; None: paths.state_keep()
        self.journal: Journal | None = None
        self.backup_file: str | None = None
        self.problems: list[str] = []
        self.lft_written = 0
        # what each step confirmed: SwitchInfo (change, value read back), LFT/RFT/MFT changes
        self.written: dict[str, list] = {"tops": [], "lft": [], "rft": [], "mft": [], "links": []}

    def start(self) -> None:
        """Back up what the plan overwrites and journal what it writes; nothing to do
        without a state directory or with an empty plan."""
        p = self.plan
        if self.state is None or not p:
            return
        keep = self.keep if self.keep is not None else paths.state_keep()
        try:
            saved = backup.save_before_apply(self.t, self.topology, p.lft, paths.StateDir(self.state).backups,
                                             switchinfo=p.tops, mft_units=p.mft, rft_blocks=p.rft,
                                             link_tables=p.links)
        except OSError as e:  # a full disk: the running SM goes on without (atomicfile.tolerated)
            if not atomicfile.tolerated(e, "no backup written"):
                raise
            saved = None
        self.backup_file = str(saved) if saved else None
        self.journal = Journal(paths.StateDir(self.state).journal, keep=keep)
        try:
            interrupted = Journal.pending(self.journal.path, set_aside=False)
        except JournalError:  # unreadable: which backup it needs is unknown, so delete none
            pass              # (begin moves it aside)
        else:
            backup.prune(paths.StateDir(self.state).backups, keep, [saved, interrupted and interrupted.backup])
        # a switch's SL2VL pairs written unread ride in their representative's record
        units = p.lft + p.rft + p.mft + [c for c in p.links if c.same_as is None]
        self._journal("begin", units, backup=self.backup_file)

    def switchinfo(self) -> list[str]:
        return self._note(tops.write(self.t, self.plan.tops, written=self.written["tops"]))

    def lft(self) -> list[str]:
        """LFT blocks in stages, the destination's side first (`planning.update_order`), so no
        pair routable before and after breaks while they go out; each stage's Sets
        interleaved over switches and sent together, journalled per chunk as they come back."""
        problems: list[str] = []
        with self._closing_on_error():
            for stage in self._lft_stages():
                unanswered = False
                for i in range(0, len(stage), self.chunk):
                    batch = stage[i:i + self.chunk]
                    written, p = linear.write_lft_blocks(self.t, interleave([c for c, _final in batch]), ordered=True)
                    problems += p
                    self.lft_written += len(written)  # Sets, a block's partial writes included
                    done = {id(c) for c in written}
                    # a block written with part of its new entries is not done until its last write
                    finished = [c for c, final in batch if final and id(c) in done]
                    self.written["lft"] += finished
                    # flushed per chunk, fsynced once (the begin record already names every block)
                    self._journal("written_many", finished, sync=False)
                    unanswered = unanswered or len(written) < len(batch)
                if unanswered:
                    break  # a later stage relies on this one's entries: the repair passes re-plan the rest
            if self.plan.lft:
                self._journal("sync")
        return self._note(problems)

    def _lft_stages(self) -> list[list[tuple]]:
        """(change to send, whether it is the block's last write) per stage; one stage when
        the fabric's links are not known (a table command on one switch)."""
        changes = self.plan.lft
        if self.topology is None or not changes:
            return [[(c, True) for c in changes]] if changes else []
        nodes, links = self.topology.nodes, self.topology.links
        # the switch beyond each port of the switches that change: `update_order` follows the
        # next hops of changed entries only (a repair changes a few switches of thousands)
        peer = {}
        for g in dict.fromkeys(c.switch for c in changes):
            for p in range(1, nodes[g].num_ports + 1 if g in nodes else 0):
                far = links.get((g, p))
                if far is not None and far[0] in nodes and nodes[far[0]].is_switch:
                    peer[(g, p)] = far[0]
        order = update_order.staged([update_order.Change(c.switch, c.block, c.old, bytes(c.new)) for c in changes],
                                    peer)
        return [[(c if w.final else dataclasses.replace(c, new=w.content), w.final)
                 for w in stage for c in (changes[w.index],)] for stage in order.stages]

    def rft(self) -> list[str]:
        return self._write(rft.write_rft_blocks, self.plan.rft, "rft")

    def mft(self) -> list[str]:
        """MFT units in two stages, ports a tree loses before ports it gains
        (`planning.update_order.mft_staged`), so no intermediate state closes a circle that
        copies go round; a unit is journalled when its last write comes back."""
        changes = self.plan.mft
        problems: list[str] = []
        with self._closing_on_error():
            for stage in update_order.mft_staged([update_order.MaskChange(c.old, c.new) for c in changes]):
                sent = [(changes[w.index] if w.final else dataclasses.replace(changes[w.index], new=list(w.masks)),
                         w.final) for w in stage]
                written, p = mft.write_mft_units(self.t, [c for c, _final in sent])
                problems += p
                done = {id(c) for c in written}
                finished = [changes[w.index] for w, (c, final) in zip(stage, sent) if final and id(c) in done]
                self.written["mft"] += finished
                self._journal("written_many", finished)
                if len(written) < len(sent):
                    break  # the growing stage relies on the pruning one: the next sweep re-plans
        return self._note(problems)

    def links(self, failed: set[int] | None = None, refused: list | None = None) -> list[str]:
        """The per-port tables of the link phase, in batches (`porttables.BATCH`); journalled by unit.
        ``failed`` collects the GUIDs of nodes a Set got no answer from; ``refused`` the
        changes of an optional kind a port refused (`porttables.write`)."""
        with self._closing_on_error():
            written: list = []
            problems = linktab.write(self.t, self.plan.links, written, failed, refused)
            self.written["links"] += written
            self._journal("written_many", linktab.confirmed_units(written))
        return self._note(problems)

    def _write(self, writer, changes, kind: str) -> list[str]:
        with self._closing_on_error():
            written, problems = writer(self.t, changes)
            self.written[kind] += written
            self._journal("written_many", written)
        return self._note(problems)

    def finish(self, ok: bool | None = None) -> None:
        """Close the journal; mark it done if the apply was clean (``ok``: the caller's
        verdict, default: no write problem). A failed apply stays pending: the next sweep
        says so."""
        if ok if ok is not None else not self.problems:
            self._journal("done")
        if self.journal is not None:
            self.journal.close()

    def _journal(self, method: str, *args, **kw) -> None:
        """One journal write; on a full disk under the running SM, a warning and no more
        journal for this apply (`atomicfile.tolerated`): what it holds stays on disk."""
        if self.journal is None:
            return
        try:
            getattr(self.journal, method)(*args, **kw)
        except OSError as e:
            if not atomicfile.tolerated(e, "journal not written"):
                raise
            with contextlib.suppress(OSError):
                self.journal.close()
            self.journal = None

    def _note(self, problems: list[str]) -> list[str]:
        self.problems += problems
        return problems

    @contextlib.contextmanager
    def _closing_on_error(self):
        try:
            yield
        except BaseException:
            if self.journal is not None:
                self.journal.close()  # what was confirmed is on disk; the rest stays pending
            raise


def apply(transport, plan: Plan, *, state_dir=None, topology=None, chunk: int = JOURNAL_CHUNK) -> Apply:
    """Run every step of one apply; the result's ``problems`` lists what went wrong."""
    a = Apply(transport, plan, state_dir=state_dir, topology=topology, chunk=chunk)
    a.start()
    a.switchinfo()
    a.lft()
    a.rft()
    a.mft()
    a.links()
    a.finish()
    return a
