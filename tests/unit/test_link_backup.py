"""The link phase's table writes (SL2VL, VLArb, P_Key: smagent.linkconf) go through the one
apply path (smagent.fdb.apply) like forwarding tables: what they overwrite is saved in
the backup file (a ``links`` section per node), the apply journal lists them (link table
units; a switch's SL2VL pairs written unread ride in their representative's record), and
`lft restore` puts them back. In the in-process simulator, whose ports start at IBA
reset values (identity SL2VL, zero VLArb, P_Key 0x7FFF)."""
import json

import pytest

from smagent import api, linkconf as links
from smagent.model import topogen
from smagent.fdb import backup, journal
from smagent.transport.sim import SimTransport


@pytest.fixture()
def swept(tmp_path):
    state = tmp_path / "state"
    s = api.Session(SimTransport(topogen.two_switch()), state_dir=str(state))
    r = s.sweep(state_dir=str(state))
    assert r.problems == [] and r.link_changes and r.backup_file
    return s, r, state


def _links_of(doc):
    return {(guid, u["table"], u["port"], u["modifier"]): u for guid, sw in doc["switches"].items()
            for u in sw.get("links", ())}


def test_sweep_saves_the_link_tables_it_overwrites(swept):
    s, r, _state = swept
    doc = json.loads(open(r.backup_file).read())
    assert doc["format"] == backup.BACKUP_FORMAT == "smagent-fdb-backup/2"
    saved = _links_of(doc)
    read = [c for c in r.link_changes if c.same_as is None]
    assert len(saved) == len(read) and len(read) < len(r.link_changes)  # unread pairs ride along
    for c in read:
        u = saved[(f"0x{c.guid:016x}", c.kind, c.port, c.modifier)]
        assert u["value"] == links.table_json(c.kind, c.old)  # what the port held before
        assert u.get("also", []) == list(c.also)
    kinds = {u["table"]: u["value"] for u in saved.values()}
    assert kinds["sl2vl"] == list(range(16))  # the reset identity
    assert kinds["pkeys"][0] == 0x7FFF and kinds["vlarb"] == [0] * 64  # 32 (VL, weight) entries, flat
    # a CA's two ports share its GUID and modifiers: told apart by port
    ca_ports = {(g, u["port"]) for (g, t, _p, _m), u in saved.items() if t == "sl2vl" and u["modifier"] == 0}
    assert len(ca_ports) == 4


def test_sweep_journals_the_link_tables(swept):
    _s, r, state = swept
    (done,) = (state / journal.JOURNALS_DIR).glob("apply-*.journal")
    recs = [json.loads(line) for line in done.read_text().splitlines()]
    units = [u for u in recs[0]["blocks"] if u.get("table") in links.TABLES]
    assert len(units) == sum(1 for c in r.link_changes if c.same_as is None)
    assert sum(len(u.get("also", ())) for u in units) == sum(1 for c in r.link_changes if c.same_as is not None)
    written = [u for x in recs if x["event"] == "written" and x.get("table") in links.TABLES for u in x["units"]]
    assert len(written) == len(units) and recs[-1]["event"] == "done"
    assert all(len(u) == 3 for u in written)  # switch, block (modifier) and port


def test_interrupted_link_writes_are_pending_by_port(tmp_path, swept):
    """The P_Key blocks of a CA's two ports: same GUID, same modifier, told apart by port."""
    import dataclasses
    _s, r, _state = swept
    one = next(c for c in r.link_changes if c.kind == "pkeys" and c.port == 1)
    ca = [one, dataclasses.replace(one, port=2, path=one.path[:-1] + (one.path[-1] + 1,))]
    j = journal.Journal(tmp_path / "apply.journal")
    j.begin(ca)
    j.written_many(ca[:1])
    j.close()
    p = journal.Journal.pending(j.path)
    assert [(u["switch"], u["port"], u["block"]) for u in p.remaining] == [(one.guid, 2, one.modifier)]


def test_restore_puts_the_link_tables_back(swept):
    s, r, _state = swept
    sim = s.transport.sim
    res = s.lft_restore(r.backup_file)
    assert res.ok, res.problems
    assert res.sets_sent["sl2vl"] == sum(1 for c in r.link_changes if c.kind == "sl2vl")
    assert res.sets_sent["pkeys"] and res.sets_sent["vlarb"]
    assert any("not read before the sweep wrote them" in n for n in res.notes), res.notes
    assert any("cannot undo" in n and "PortInfo link fields" in n for n in res.notes), res.notes
    for n in sim.nodes.values():
        if n.is_switch:
            assert all(t == list(range(16)) for t in n.sl2vl.values()), n.name  # every pair, unread ones too
        else:
            assert all(n.pkeys[p][0] == 0x7FFF for p in range(1, n.num_ports + 1)), n.name
        assert all(w == 0 for t in n.vlarb.values() for _vl, w in t), n.name
    again = s.lft_restore(r.backup_file)
    assert again.plan == [] and again.ok  # the fabric holds the backup now
    # the restore was an apply: it saved what it overwrote, the sweep's tables
    doc = json.loads(open(res.backup_file).read())
    assert any(u["value"] == [0xFFFF] + [0] * 31 for u in _links_of(doc).values() if u["table"] == "pkeys")


def _rewrite(path, edit):
    doc = json.loads(open(path).read())
    edit(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def _first_links(doc):
    return next(sw for sw in doc["switches"].values() if "links" in sw)


@pytest.mark.parametrize("edit, msg", [
    (lambda d: _first_links(d)["links"][0].update(table="qos"), "link table 'qos'"),
    (lambda d: _first_links(d)["links"][0].update(value=[1, 2]), "expected"),
    (lambda d: _first_links(d).update(routers={}), "unknown sections"),
    (lambda d: d.update(format="smagent-fdb-backup/3"), "not a block backup"),
])
def test_a_backup_this_smagent_cannot_read_whole_is_refused(swept, edit, msg):
    _s, r, _state = swept
    _rewrite(r.backup_file, edit)
    with pytest.raises(backup.BackupError, match=msg):
        backup.load_backup(r.backup_file)


def test_truncated_backup_with_links_is_refused(swept):
    _s, r, _state = swept
    text = open(r.backup_file).read()
    for cut in (len(text) // 2, len(text) - 3):
        with open(r.backup_file, "w") as f:
            f.write(text[:cut])
        with pytest.raises(backup.BackupError, match="not a block backup"):
            backup.load_backup(r.backup_file)


def test_a_version_1_backup_still_loads(swept):
    _s, r, _state = swept
    _rewrite(r.backup_file, lambda d: [d.update(format="smagent-fdb-backup/1")]
             + [sw.pop("links", None) for sw in d["switches"].values()])
    saved = backup.load_backup(r.backup_file)
    assert saved.lft and not saved.links


def test_journal_with_an_unknown_table_is_refused(tmp_path):
    path = tmp_path / "apply.journal"
    path.write_text('{"event":"begin","format":"smagent-apply-journal/1","blocks":[{"table":"gids",'
                    '"switch":"0x0000000000000001","block":0,"new":null}]}\n')
    with pytest.raises(journal.JournalError, match="malformed 'begin'"):
        journal.Journal.pending(path, set_aside=False)
    path.write_text('{"event":"begin","format":"smagent-apply-journal/1","blocks":[]}\n'
                    '{"event":"written","table":"gids","switch":"0x0000000000000001","block":0}\n'
                    '{"event":"written","switch":"0x0000000000000001","block":0}\n')
    with pytest.raises(journal.JournalError, match="not a journal record"):
        journal.Journal.pending(path, set_aside=False)
