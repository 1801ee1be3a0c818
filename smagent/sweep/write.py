"""The write passes: SwitchInfo, LFT, RFT, MFT and link tables through the one apply path
(`smagent.fdb.apply`: backed up, journalled, read back), and what they leave known."""
from __future__ import annotations

from smagent.config import files as paths
from smagent.fdb import apply as fdbapply
from smagent.sweep.result import SweepResult
from smagent.model.subnet import LINK_TABLE_KINDS, LftBlocks, Subnet
from smagent.sweep.linkconf import note_refused
from smagent.sweep.state import SweepState

JOURNAL_CHUNK = fdbapply.JOURNAL_CHUNK  # LFT blocks between two journal records (tests lower it)


def write_tables(s: SweepState) -> None:
    """SwitchInfo, LFT, RFT and MFT blocks through `smagent.fdb.apply`: what is about to
    be overwritten (the link tables of `write_links` too) is saved first, and the apply
    is journalled as blocks come back."""
    r = s.r
    ap = fdbapply.Apply(s.transport, fdbapply.Plan(r.switch_changes, r.lft_changes, r.rft_changes, r.mft_changes,
                                                   r.link_changes),
                        state_dir=s.opts.state_dir, topology=r.topology, chunk=JOURNAL_CHUNK)
    with s.phase("switchinfo"):
        ap.start()
        r.backup_file = ap.backup_file
        r.problems += ap.switchinfo()
    with s.phase("lft_write"):
        r.problems += ap.lft()  # in chunks, journalled as each comes back
        r.lft_written = ap.lft_written
    with s.phase("rft_write"):
        r.problems += ap.rft()
    with s.phase("mft_write"):
        r.problems += ap.mft()
    s.applied = ap


def settle_unread(s: SweepState) -> None:
    """A unit that could not be read is written all the same (it cannot hold the plan):
    once its write is confirmed the switch holds the plan, and the failed read only cost
    the backup of that unit, a note; else it stays a problem."""
    assert s.applied is not None  # the write phase ran
    written = ({(c.switch, c.block) for c in s.applied.written["lft"]}
               | {(c.switch, c.block, c.position) for c in s.applied.written["mft"]})
    for line, keys in s.unread:
        if keys <= written:
            s.r.notes.append(f"{line} (written since and read back; not in the backup)")
        else:
            s.r.problems.append(line)
    s.unread = []


def write_links(s: SweepState) -> None:
    """SL2VL, VLArb and P_Key tables, before any port is ACTIVE: the last step of the
    apply `write_tables` began (backed up and journalled with it)."""
    ap = s.applied
    assert ap is not None  # write_tables began it
    refused: list = []
    with s.phase("link_write"):
        s.r.problems += ap.links(s.links_failed, refused)
    note_refused(s, {(c.guid, c.port) for c in refused})
    if s.opts.keep_link_tables:  # what the ports hold now: the units read, the confirmed Sets on top
        s.r.link_tables.update(((c.kind, c.guid, c.port, c.modifier), c.new) for c in ap.written["links"]
                               if c.kind in LINK_TABLE_KINDS)
    ap.finish(ok=not s.r.problems)


def known_after(r: SweepResult, ap, links_unknown) -> Subnet:
    """The subnet model an apply left: the tables as planned against, the confirmed writes
    on top (a block written but not confirmed is unknown), SwitchInfo as read back;
    ``links_unknown``: the nodes whose link tables did not answer."""
    # the tables as read, changed ones copied: a block changed becomes unknown unless confirmed
    lft = LftBlocks.of(r.lft_current).updated(((c.switch, c.block) for c in r.lft_changes),
                                              (((c.switch, c.block), bytes(c.new)) for c in ap.written["lft"]))
    mft = dict(r.mft_current)
    for m in r.mft_changes:
        mft.pop((m.switch, m.block, m.position), None)
    mft.update(((m.switch, m.block, m.position), list(m.new)) for m in ap.written["mft"])
    for t, back in ap.written["tops"]:
        r.topology.nodes[t.switch].switch_info = back
    return Subnet.build(r.topology, lft, mft, lmc=r.lid_plan.lmc, sm_lid=r.lid_plan.master_lid,
                        link_tables_unknown=links_unknown)


def note_interrupted_apply(s: SweepState) -> None:
    if not s.opts.state_dir:
        return
    from smagent.fdb.journal import Journal
    pending = Journal.pending(paths.StateDir(s.opts.state_dir).journal)
    if pending is not None:
        s.r.notes.append(f"the previous apply was interrupted with {len(pending.remaining)} of {len(pending.plan)} "
                         f"table blocks unconfirmed; this sweep re-plans from the live tables and finishes it")
