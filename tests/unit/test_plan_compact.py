"""Compact plans (issue 28): one record per LFT block, port and group of equal link
tables; the per-entry records on demand (--detail, --lids, --plan-file); the text plan of
a large fabric by kind and switch. On a fresh 648-host fat tree in the simulator (every
SL2VL pair, VLArb and P_Key table is written there)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from smagent.fdb import lft as linear
from smagent.fdb import mft as mfttab
from smagent.sweep import planjson

FT2 = str(Path(__file__).resolve().parents[2] / "fixtures" / "ft2-648.net")


@pytest.fixture(scope="module")
def ft2_runs(tmp_path_factory):
    """The CLI's dry runs of the fresh 648-host tree: compact JSON, detailed JSON (with
    the plan file), text, detailed text."""
    from click.testing import CliRunner

    from smagent.cli import main
    d = tmp_path_factory.mktemp("compact")
    plan_file = d / "plan.jsonl"

    def run(*args):
        res = CliRunner().invoke(main, ["--topology", FT2, "sweep", "--dry-run", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output[-2000:]
        return res.stdout
    return {"compact": run("--json"), "detail": run("--json", "--detail", "--plan-file", str(plan_file)),
            "plan_file": plan_file.read_text(), "text": run(), "text_detail": run("--detail")}


def test_the_plan_json_of_a_fresh_648_host_tree_is_under_2_mb(ft2_runs):
    assert len(ft2_runs["compact"].encode()) < 2 * 1024 * 1024
    assert len(ft2_runs["detail"].encode()) > 10 * 1024 * 1024  # the per-entry view it replaces


def test_lft_blocks_decode_to_exactly_the_per_entry_records(ft2_runs):
    compact = json.loads(ft2_runs["compact"])["plan"]
    detail = json.loads(ft2_runs["detail"])["plan"]
    blocks = [c for c in compact if c["table"] == "LFTBlock"]
    entries = [c for c in detail if c["table"] == "LFT"]
    assert len(blocks) == 594 and len(entries) > 30000  # 54 switches x 11 blocks
    decoded = [e for b in blocks for e in linear.lft_block_entries(b)]
    # the same records, in the same order (the plan adds each one's derived `action`)
    assert decoded == [{k: v for k, v in e.items() if k != "action"} for e in entries]
    assert sum(b["changed"] for b in blocks) == len(entries)


def test_every_compact_record_expands_to_the_detailed_ones(ft2_runs):
    compact = json.loads(ft2_runs["compact"])["plan"]
    detail = json.loads(ft2_runs["detail"])["plan"]
    assert {c["table"] for c in compact} == {"PortInfoSet", "SwitchInfo", "LFTBlock", "MFTBlock", "SL2VLGroup",
                                            "VLArbGroup", "P_KeyGroup"}
    assert len(compact) * 10 < len(detail)
    assert planjson.canonical(e for c in compact for e in planjson.expand(c)) == planjson.canonical(detail)


def test_the_plan_file_holds_the_detailed_records_one_per_line(ft2_runs):
    lines = ft2_runs["plan_file"].splitlines()
    assert [json.loads(x) for x in lines] == json.loads(ft2_runs["detail"])["plan"]


def test_a_large_text_plan_is_summarised_by_kind_and_switch(ft2_runs):
    text, full = ft2_runs["text"].splitlines(), ft2_runs["text_detail"].splitlines()
    plan = [x for x in text if not x.startswith("# ")]
    assert text[0].startswith("# plan: ") and "--detail" in text[0]
    # a line for the PortInfo Sets, one per switch (54), one for the CA ports' link tables
    assert len(plan) == 1 + 54 + 1, plan[:5]
    assert plan[0].startswith("SubnSet(PortInfo): 648 CA ports, ")
    assert any(x.startswith("L0: SwitchInfo, LFT 11 blocks (") for x in plan)
    assert sum(x.startswith("SubnSet(") for x in full) > 80000  # --detail: every Set's line, as before


def test_each_switch_line_counts_what_the_detailed_plan_holds(ft2_runs):
    """The summary's counts per switch are the detailed records', counted another way:
    LFT blocks and their entries, MFT blocks, and one Set per SL2VL, VLArb and P_Key record."""
    import collections
    want: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    lft_blocks, mft_blocks = collections.defaultdict(set), collections.defaultdict(set)
    for r in json.loads(ft2_runs["detail"])["plan"]:
        name = r.get("switch") or r["node"]
        if r["table"] == "LFT":
            lft_blocks[name].add(r["block"])
            want[name]["LFT entries"] += 1
        elif r["table"] == "MFT":
            mft_blocks[name].add((r["block"], r["position"]))
        elif r["table"] == "SwitchInfo":  # a record per field, one Set
            want[name]["SwitchInfo"] = 1
        elif r["table"] != "PortInfo":
            want[name][r["table"]] += 1
    for name in lft_blocks:
        want[name]["LFT"] = len(lft_blocks[name])
    for name in mft_blocks:
        want[name]["MFT"] = len(mft_blocks[name])
    got = {}
    for line in ft2_runs["text"].splitlines():
        name, sep, rest = line.partition(": ")
        if not sep or line.startswith(("#", "SubnSet(", "CA ports")):
            continue
        c = collections.Counter()
        for part in rest.split(", "):
            if part == "SwitchInfo":
                c[part] = 1
            elif m := re.fullmatch(r"LFT (\d+) blocks? \((\d+) entr(?:y|ies)\)", part):
                c["LFT"], c["LFT entries"] = int(m[1]), int(m[2])
            else:
                kind, n = re.fullmatch(r"(\w+) (\d+)(?: blocks?)?", part).groups()
                c[kind] = int(n)
        got[name] = c
    switches = {n for n in want if n[0] in "LS"}
    assert switches and set(got) == switches
    for name in switches:
        assert got[name] == want[name], name


def test_lids_gives_the_entries_of_those_lids_only(cli):
    r = cli("--transport", "sim", "sweep", "--dry-run", "--json", "--lids", "3-4")
    full = cli("--transport", "sim", "sweep", "--dry-run", "--json", "--detail")
    lft = [c for c in r.json()["plan"] if c["table"].startswith("LFT")]
    want = [c for c in full.json()["plan"] if c["table"] == "LFT" and c["lid"] in (3, 4)]
    assert lft == want and want


@pytest.mark.parametrize("bad", ["3-x", "9-2", "0xC000"])
def test_a_bad_lid_range_is_refused_before_any_smp(cli, bad):
    r = cli("--transport", "sim", "sweep", "--dry-run", "--lids", bad)
    assert r.exit_code == 2 and "--lids" in r.output


def test_an_unwritable_plan_file_is_refused_before_any_smp(cli, tmp_path):
    r = cli("--transport", "sim", "sweep", "--dry-run", "--plan-file", str(tmp_path / "no" / "such" / "f"))
    assert r.exit_code == 2 and "--plan-file" in r.output


@pytest.mark.parametrize("ports", [bytes([255] * 64), bytes(range(64)), bytes([1, 1, 1, 1, 2] * 12 + [3] * 4),
                                   bytes([7, 7, 7] + [9] * 61), bytes([0xFC, 0xFD, 0xFE, 0xFF, 0, 1, 2, 3] * 8),
                                   bytes([1, 1, 1, 1, 2, 3, 4, 5] * 8), bytes([255, 0, 1, 2, 3, 4] + [5] * 58),
                                   bytes(range(192, 256)), bytes([5, 6, 7, 5, 6, 7, 8] * 9 + [1])])
def test_packed_ports_round_trip(ports):
    text = linear.pack_ports(ports)
    assert linear.unpack_ports(text) == ports and len(text) <= 2 * len(ports)


def test_runs_counting_up_are_packed_too():
    # a leaf switch of the 11,664-host tree: remote LIDs spread over uplinks 19..36
    leaf = bytes([0xFF, 1, 0]) + bytes(range(2, 0x25)) + bytes([0x13] * 27)
    assert linear.pack_ports(leaf) == "ff010002{+35}13{27}"
    assert linear.pack_ports(bytes(range(0x13, 0x25)) * 3 + bytes(range(0x13, 0x1D))) == \
        "13{+18}13{+18}13{+18}13{+10}"
    # 255 is not followed by 0 in a run: two runs
    assert linear.pack_ports(bytes([0xFC, 0xFD, 0xFE, 0xFF, 0, 1, 2, 3])) == "fc{+4}00{+4}"


@pytest.mark.parametrize("text", ["f", "ff{", "zz", "ff{3}x", "fe{+3}", "ff{+}", "01{+2x}"])
def test_unpacking_anything_else_is_an_error(text):
    with pytest.raises(ValueError):
        linear.unpack_ports(text)


def test_ranges_round_trip():
    assert planjson.ranges([5, 1, 2, 3, 7, 8]) == "1-3,5,7-8"
    assert planjson.unranges("1-3,5,7-8") == [1, 2, 3, 5, 7, 8] and planjson.unranges("") == []


def test_mft_blocks_decode_to_exactly_the_per_entry_records(ft2_runs):
    compact = json.loads(ft2_runs["compact"])["plan"]
    detail = json.loads(ft2_runs["detail"])["plan"]
    blocks = [c for c in compact if c["table"] == "MFTBlock"]
    entries = [c for c in detail if c["table"] == "MFT"]
    # the IPoIB broadcast group 0xC000: one record per (switch, block, position) its tree uses
    assert len(blocks) == len({(c["switch"], c["block"], c["position"]) for c in entries}) > 54
    assert not [c for c in compact if c["table"] == "MFT"]
    first = blocks[0]
    assert (first["block"], first["mlids"], first["old"]) == (0, "0xc000-0xc01f", [])  # read, all zero
    assert first["changed"] == 1 and len(first["new"]) == 1 and first["new"][0]  # 0xC000 only: one word
    decoded = [e for b in blocks for e in mfttab.mft_block_entries(b)]
    assert decoded == [{k: v for k, v in e.items() if k != "action"} for e in entries]
    assert sum(b["changed"] for b in blocks) == len(entries)


@pytest.mark.parametrize("old, new", [(None, [0x8001] + [0] * 31), ([0] * 32, [0] * 31 + [0xFFFF]),
                                      ([5] * 32, [5] * 16 + [6] * 16), ([1, 2] * 16, [1, 2] * 16)])
def test_an_mft_block_record_expands_to_its_changed_mlids(old, new):
    c = mfttab.MftChange(0x10, "S", (0,), 3, 1, old, new)
    rec = mfttab.mft_block_json(c)
    assert rec["changed"] == len(mfttab.mft_entries_json(c))
    assert mfttab.mft_block_entries(json.loads(json.dumps(rec))) == mfttab.mft_entries_json(c)
    assert planjson.expand(rec) == [planjson.decorate(e) for e in mfttab.mft_entries_json(c)]
    assert all(e["mlid"] == f"0x{0xC000 + 3 * 32 + i:04x}" for i, e in enumerate(mfttab.mft_entries_json(
        mfttab.MftChange(0x10, "S", (0,), 3, 1, None, new))))


def test_an_lft_block_record_of_a_bytearray_block():
    c = linear.BlockChange(0x10, "S", (0,), 2, bytearray([255] * 64), bytearray(range(64)))
    rec = linear.lft_block_json(c)
    assert (rec["changed"], rec["old"], rec["new"]) == (64, "ff{64}", "00{+64}")
    assert linear.lft_block_entries(rec)[5] == {"switch": "S", "guid": "0x0000000000000010", "table": "LFT",
                                                "block": 2, "lid": 133, "old": 255, "new": 5}
