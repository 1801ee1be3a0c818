"""Captures written by smagent.transport.pcap (framing from mad.framing), checked two ways:

* without tshark: our framing reproduces the reference capture that tshark 4.0.17 read
  (vectors/tshark/demo.erf) byte for byte, the reader reads ERF, pcap 247 and exported-PDU
  files, and bad files give a CaptureError naming the file and the record;
* with tshark (marker ``tshark``; skipped only when tshark is not installed): tshark
  decodes our capture's attribute values as we do, flags no frame as malformed or expert,
  and dissects every vector exactly as recorded in the vector's ``decoded_tshark``.
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from mad import framing as FR
from mad import smp as S
from mad.errors import MadError, MadLengthError
from smagent.transport.pcap import CaptureError, CaptureWriter, Record, erf_timestamp, read_capture

HERE = Path(__file__).parents[1]  # tests/
VECTORS = {}
for _f in sorted((HERE / "vectors").glob("*.jsonl")):
    for _line in _f.read_text().splitlines():
        if _line.strip():
            _v = json.loads(_line)
            VECTORS[_v["name"]] = _v

# the reference capture the vectors README ships (read-only, outside the repo)
DEMO_DIR = HERE / "vectors" / "tshark"  # copied from shared/vectors/tshark: data, always present
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (Debian package tshark)")
def needs_demo(f):  # the reference captures are part of the repository (tests/vectors/tshark)
    return f


def mad_of(name: str) -> bytes:
    return bytes.fromhex(VECTORS[name]["hex"])


def write_vectors(path: Path, names, ts0: float = 1_700_000_000.0) -> None:
    """One record per vector, with the LIDs a transport would pass: LID-routed requests
    go local (route.slid) -> remote (route.dlid); responses come back remote -> local."""
    with CaptureWriter(path) as w:
        for i, name in enumerate(names):
            v = VECTORS[name]
            inbound = v["direction"] == "response"
            if v.get("route"):
                r = v["route"]
                remote, local = (r["slid"], r["dlid"]) if inbound else (r["dlid"], r["slid"])
                w.write(mad_of(name), inbound=inbound, dlid=remote, slid=local, ts=ts0 + i)
            else:
                w.write(mad_of(name), inbound=inbound, dlid=0xFFFF, ts=ts0 + i)


# =====================================================================================
# framing and capture files, no tshark needed
# =====================================================================================
def test_frame_layout():
    mad = mad_of("2sw4hca/pre_dr_switchinfo_presm/resp")
    pkt = FR.frame(mad, 0xFFFF, 0xFFFF)
    assert len(pkt) == FR.PACKET_SIZE == 290
    lrh = FR.LRH.decode(pkt)
    assert (lrh.vl, lrh.lver, lrh.sl, lrh.lnh, lrh.pkt_len) == (15, 0, 0, 2, 72)
    assert (lrh.dlid, lrh.slid) == (0xFFFF, 0xFFFF)
    bth = FR.BTH.decode(pkt, FR.LRH.LAYOUT.size)
    assert (bth.opcode, bth.p_key, bth.dest_qp, bth.resv8a, bth.tver) == (0x64, 0xFFFF, 0, 0, 0)
    deth = FR.DETH.decode(pkt, FR.LRH.LAYOUT.size + FR.BTH.LAYOUT.size)
    assert (deth.q_key, deth.src_qp) == (0, 0)
    assert pkt[28:284] == mad
    assert FR.unframe(pkt, verify_crc=True) == (mad, 0xFFFF, 0xFFFF)
    assert FR.LRH.LAYOUT.size == 8 and FR.BTH.LAYOUT.size == 12 and FR.DETH.LAYOUT.size == 8


def test_frame_without_crc():
    mad = mad_of("2sw4hca/post_lid_portinfo_sw_p3/resp")
    pkt = FR.frame(mad, 2, 1, crc=False)
    assert len(pkt) == 284 and FR.LRH.decode(pkt).pkt_len == 71
    assert FR.unframe(pkt) == (mad, 2, 1)
    with_icrc_only = FR.frame(mad, 2, 1)[:-2]
    assert FR.unframe(with_icrc_only, verify_crc=True) == (mad, 2, 1)


def _demo_erf_packets():
    data = (DEMO_DIR / "demo.erf").read_bytes()
    off, out = 0, []
    while off < len(data):
        rlen, _lctr, wlen = struct.unpack_from(">HHH", data, off + 10)
        out.append(data[off + 16:off + 16 + wlen])
        off += rlen
    return out


def _demo_names():
    return [line.split(": ", 1)[1].strip() for line in (DEMO_DIR / "demo-frames.txt").read_text().splitlines()]


@needs_demo
def test_framing_matches_reference_capture():
    """tools/mad2pcap.py's frames (which tshark read) equal ours byte for byte, CRCs included."""
    packets = _demo_erf_packets()
    names = _demo_names()
    assert len(packets) == len(names) == 7
    for psn, (name, pkt) in enumerate(zip(names, packets)):
        v = VECTORS[name]
        slid, dlid = (v["route"]["slid"], v["route"]["dlid"]) if v.get("route") else (0xFFFF, 0xFFFF)
        assert FR.frame(mad_of(name), slid, dlid, psn=psn) == pkt, name
        assert FR.unframe(pkt, verify_crc=True) == (mad_of(name), slid, dlid)


@needs_demo
def test_capture_writer_matches_reference_capture(tmp_path):
    """Our ERF writer reproduces demo.erf exactly (record header, 8-byte padding, CRCs)."""
    out = tmp_path / "demo.erf"
    write_vectors(out, _demo_names())
    # demo.erf frames LID-routed responses remote->local, as write_vectors does
    assert out.read_bytes() == (DEMO_DIR / "demo.erf").read_bytes()


@needs_demo
@pytest.mark.parametrize("name", ["demo.erf", "demo-dlt247.pcap", "demo-exported-pdu.pcap"])
def test_read_reference_captures(name):
    recs = list(read_capture(DEMO_DIR / name, verify_crc=True))
    names = _demo_names()
    assert [r.mad for r in recs] == [mad_of(n) for n in names]
    assert [r.ts for r in recs] == [1_700_000_000.0 + i for i in range(len(names))]
    assert (recs[0].slid, recs[0].dlid) == (2, 1)  # 36port/post_lid_switchinfo/resp: S36 -> H1
    assert (recs[4].slid, recs[4].dlid) == (0xFFFF, 0xFFFF)


@needs_demo
def test_user_dlt_is_refused_with_a_reason():
    with pytest.raises(CaptureError, match=r"demo-user0\.pcap: pcap link type 147"):
        list(read_capture(DEMO_DIR / "demo-user0.pcap"))


def test_capture_roundtrip_and_timestamps(tmp_path):
    names = [n for n in VECTORS if n.startswith("36port/")]
    path = tmp_path / "all.erf"
    write_vectors(path, names, ts0=1_700_000_000.25)
    recs = list(read_capture(path))
    assert len(recs) == len(names)
    for i, (name, rec) in enumerate(zip(names, recs)):
        assert isinstance(rec, Record)
        assert rec.mad == mad_of(name)
        assert abs(rec.ts - (1_700_000_000.25 + i)) < 1e-6
        assert S.decode(rec.mad).transaction_id == int(VECTORS[name]["tid"], 16)
        v = VECTORS[name]
        if v.get("route"):  # the packet's LRH: source and destination as on the wire
            assert (rec.slid, rec.dlid) == (v["route"]["slid"], v["route"]["dlid"])
        else:
            assert (rec.slid, rec.dlid) == (0xFFFF, 0xFFFF)


def test_capture_writer_lid_directions(tmp_path):
    mad = mad_of("2sw4hca/post_lid_portinfo_sw_p3/req")
    path = tmp_path / "lids.erf"
    w = CaptureWriter(path)
    w.write(mad, inbound=False, dlid=2, slid=1, ts=5.5)
    w.write(mad, inbound=True, dlid=2, slid=1, ts=6.0)
    w.write(mad, inbound=False, dlid=7)  # local LID unknown: 0; ts: now
    w.close()
    w.close()  # idempotent
    assert w.closed and w.count == 3
    a, b, c = read_capture(path)
    assert (a.slid, a.dlid, a.ts) == (1, 2, 5.5)
    assert (b.slid, b.dlid, b.ts) == (2, 1, 6.0)
    assert (c.slid, c.dlid) == (0, 7) and c.ts > 1e9
    with pytest.raises(ValueError, match="closed"):
        w.write(mad, inbound=False, dlid=1)


def test_capture_writer_rejects_non_mads(tmp_path):
    with CaptureWriter(tmp_path / "x.erf") as w:
        with pytest.raises(MadLengthError):
            w.write(b"\x01" * 255, inbound=False, dlid=1)
    assert (tmp_path / "x.erf").read_bytes() == b""


def test_erf_timestamp():
    assert erf_timestamp(1.5) == (1 << 32) | (1 << 31)
    assert erf_timestamp(2.0) == 2 << 32
    assert erf_timestamp(0.9999999999999) == 1 << 32  # rounding carries into the seconds


# -- bad files ------------------------------------------------------------------------------------
def _good_erf(tmp_path, n=3) -> bytes:
    p = tmp_path / "good.erf"
    write_vectors(p, list(VECTORS)[:n])
    return p.read_bytes()


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d[:-5], r"record 3 .*truncated ERF record"),
    (lambda d: d + b"\0" * 7, r"record 4 .*truncated ERF header"),
    (lambda d: d[:312 + 8] + b"\x02" + d[312 + 9:], r"record 2 .*ERF record type 2"),
    (lambda d: d[:312 + 10] + b"\x00\x08" + d[312 + 12:], r"record 2 .*shorter than its header"),
])
def test_bad_erf_files(tmp_path, mutate, message):
    data = mutate(_good_erf(tmp_path))
    p = tmp_path / "bad.erf"
    p.write_bytes(data)
    with pytest.raises(CaptureError, match=message) as ei:
        list(read_capture(p))
    assert str(p) in str(ei.value)
    assert isinstance(ei.value, ValueError)


def _patch_lrh(data: bytes, record: int, **fields) -> bytes:
    """Rewrite LRH fields of ERF record ``record`` (1-based; our records are 312 bytes)."""
    off = 312 * (record - 1) + 16
    lrh = FR.LRH.decode(data, off)
    for k, x in fields.items():
        setattr(lrh, k, x)
    return data[:off] + FR.LRH.LAYOUT.encode(lrh) + data[off + FR.LRH.LAYOUT.size:]


def test_malformed_packets_name_the_record(tmp_path):
    good = _good_erf(tmp_path)
    p = tmp_path / "bad.erf"
    p.write_bytes(_patch_lrh(good, 2, pkt_len=70))
    with pytest.raises(CaptureError, match=r"bad\.erf: record 2: LRH: PktLen 70"):
        list(read_capture(p))
    p.write_bytes(_patch_lrh(good, 3, lver=1))
    with pytest.raises(CaptureError, match=r"record 3: LRH: link version 1"):
        list(read_capture(p))
    # CRCs are only checked on request
    corrupt = bytearray(good)
    corrupt[16 + 100] ^= 0xFF
    p.write_bytes(bytes(corrupt))
    assert len(list(read_capture(p))) == 3
    with pytest.raises(CaptureError, match=r"record 1: ICRC"):
        list(read_capture(p, verify_crc=True))


def test_foreign_packets_are_skipped(tmp_path):
    good = _good_erf(tmp_path)
    grh = _patch_lrh(good, 2, lnh=3)
    p = tmp_path / "mixed.erf"
    p.write_bytes(grh)
    assert len(list(read_capture(p))) == 2
    rc = bytearray(good)
    rc[312 + 16 + 8] = 0x04  # BTH opcode: RC SEND only
    p.write_bytes(bytes(rc))
    assert len(list(read_capture(p))) == 2


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(CaptureError, match="nope.erf"):
        list(read_capture(tmp_path / "nope.erf"))
    (tmp_path / "empty.erf").write_bytes(b"")
    assert list(read_capture(tmp_path / "empty.erf")) == []


def test_pcap_247_reader(tmp_path):
    """A classic pcap with link type 247, written by hand (tshark 4.0 cannot read it, ibdump
    and newer Wireshark can): little- and big-endian, micro- and nanosecond magic."""
    mad = mad_of("2sw4hca/pre_dr_nodedesc_sw0/resp")
    pkt = FR.frame(mad, 0xFFFF, 0xFFFF)
    for endian, magic, frac, unit in (("<", 0xA1B2C3D4, 500000, 1e-6), (">", 0xA1B2C3D4, 250000, 1e-6),
                                      ("<", 0xA1B23C4D, 5, 1e-9)):
        data = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, 247)
        data += struct.pack(endian + "IIII", 100, frac, len(pkt), len(pkt)) + pkt
        p = tmp_path / "x.pcap"
        p.write_bytes(data)
        (rec,) = read_capture(p)
        assert rec.mad == mad and abs(rec.ts - (100 + frac * unit)) < 1e-9
        p.write_bytes(data[:-10])
        with pytest.raises(CaptureError, match=r"x\.pcap: record 1 .*truncated packet"):
            list(read_capture(p))
        p.write_bytes(data[:20] + struct.pack(endian + "I", 1) + data[24:])
        with pytest.raises(CaptureError, match="link type 1"):
            list(read_capture(p))


def test_unframe_rejects_junk():
    pkt = FR.frame(mad_of("2sw4hca/pre_dr_nodedesc_sw0/resp"), 1, 2)
    for bad in (b"", pkt[:7], pkt[:100], pkt + b"\0", pkt[:-3], None, 12, "x" * 290):
        with pytest.raises(MadError):
            FR.unframe(bad)
    with pytest.raises(FR.NotAMadPacket):
        b = bytearray(pkt)
        b[8 + 7] = 5  # DestQP 5
        FR.unframe(bytes(b))
    with pytest.raises(MadLengthError):
        FR.frame(b"\0" * 10, 1, 2)


# =====================================================================================
# tshark as the independent decoder
# =====================================================================================
def tshark_fields(path: Path, fields: list[str], *extra: str) -> list[list[str]]:
    cmd = [TSHARK, "-r", str(path), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
           *extra, *[a for f in fields for a in ("-e", f)]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout
    return [line.split("\t") for line in out.splitlines()]


def _int(s: str) -> int:
    return int(s, 0)


def _ints(s: str) -> list[int]:
    return [int(x, 0) for x in s.split(",")]


SAMPLE = {
    "switchinfo": "2sw4hca/pre_dr_switchinfo_presm/resp",  # DR SwitchInfo GetResp
    "lft_set": "36port/opensm/set_lft_S36_b0/req",  # LFT SubnSet (OpenSM, directed route)
    "portinfo": "2sw4hca/post_lid_portinfo_sw_p3/resp",  # LID-routed PortInfo GetResp
    "nodedesc": "36port/pre_dr_nodedesc_sw_1hop/resp",  # NodeDescription GetResp ("S36")
    "mft": "36port/post_lid_mft/b0_p1/resp",
    "sminfo": "2sw4hca/post_lid_sminfo/resp",
    "error": "2sw4hca/pre_dr_err_lft_badblock/resp",
}


@pytest.mark.tshark
@needs_tshark
def test_tshark_decodes_our_capture_as_we_do(tmp_path):
    names = SAMPLE
    order = list(names)
    path = tmp_path / "sample.erf"
    write_vectors(path, [names[k] for k in order])
    fields = ["frame.number", "infiniband.lrh.dlid", "infiniband.lrh.slid", "infiniband.lrh.pktlen",
              "infiniband.bth.opcode", "infiniband.mad.attributeid", "infiniband.mad.attributemodifier",
              "infiniband.mad.method", "infiniband.mad.transactionid", "infiniband.smpdirected.hopcount",
              "infiniband.smpdirected.smpstatus", "infiniband.mad.status",
              "infiniband.switchinfo.linearfdbcap", "infiniband.switchinfo.linearfdbtop",
              "infiniband.switchinfo.multicastfdbcap", "infiniband.linearforwardingtable.port",
              "infiniband.portinfo.lid", "infiniband.portinfo.mastersmlid", "infiniband.portinfo.portstate",
              "infiniband.portinfo.capabilitymask", "infiniband.nodedescription.nodestring",
              "infiniband.multicastforwardingtable.portmask", "infiniband.sminfo.guid",
              "infiniband.sminfo.smstate"]
    rows = {order[int(r[0]) - 1]: dict(zip(fields, r)) for r in tshark_fields(path, fields)}
    assert len(rows) == len(order)
    ours = {k: S.decode(mad_of(names[k])) for k in order}

    for k, row in rows.items():
        smp = ours[k]
        assert _int(row["infiniband.mad.attributeid"]) == smp.attribute_id
        assert _int(row["infiniband.mad.attributemodifier"]) == smp.attribute_modifier
        assert _int(row["infiniband.mad.method"]) == smp.method
        assert _int(row["infiniband.mad.transactionid"]) == smp.transaction_id
        assert _int(row["infiniband.mad.status"]) == smp.status_word
        assert _int(row["infiniband.lrh.pktlen"]) == 72 and _int(row["infiniband.bth.opcode"]) == 0x64
        if smp.directed:
            assert _int(row["infiniband.smpdirected.hopcount"]) == smp.hop_count
            assert _int(row["infiniband.smpdirected.smpstatus"]) == smp.status_word
            assert _int(row["infiniband.lrh.dlid"]) == _int(row["infiniband.lrh.slid"]) == 0xFFFF
        else:
            assert row["infiniband.smpdirected.hopcount"] == ""
            route = VECTORS[names[k]]["route"]
            assert (_int(row["infiniband.lrh.slid"]), _int(row["infiniband.lrh.dlid"])) == (route["slid"], route["dlid"])

    si = ours["switchinfo"].attribute()
    row = rows["switchinfo"]
    assert _int(row["infiniband.switchinfo.linearfdbcap"]) == si.linear_fdb_cap == 30720
    assert _int(row["infiniband.switchinfo.linearfdbtop"]) == si.linear_fdb_top
    assert _int(row["infiniband.switchinfo.multicastfdbcap"]) == si.multicast_fdb_cap == 1024
    assert _int(row["infiniband.smpdirected.hopcount"]) == ours["switchinfo"].hop_count == 0

    lft = ours["lft_set"].attribute()
    assert _ints(rows["lft_set"]["infiniband.linearforwardingtable.port"]) == lft.ports
    assert lft.ports == VECTORS[names["lft_set"]]["decoded"]["ports"]
    assert _int(rows["lft_set"]["infiniband.mad.method"]) == 0x02

    pi = ours["portinfo"].attribute()
    row = rows["portinfo"]
    assert _int(row["infiniband.portinfo.lid"]) == pi.lid
    assert _int(row["infiniband.portinfo.mastersmlid"]) == pi.master_sm_lid
    assert _int(row["infiniband.portinfo.portstate"]) == pi.port_state
    assert _int(row["infiniband.portinfo.capabilitymask"]) == pi.capability_mask

    nd = ours["nodedesc"].attribute()
    assert rows["nodedesc"]["infiniband.nodedescription.nodestring"] == nd.node_string == "S36"

    mft = ours["mft"].attribute()
    assert _ints(rows["mft"]["infiniband.multicastforwardingtable.portmask"]) == mft.port_masks[:16]

    sm = ours["sminfo"].attribute()
    assert _int(rows["sminfo"]["infiniband.sminfo.guid"]) == sm.guid
    assert _int(rows["sminfo"]["infiniband.sminfo.smstate"]) == sm.sm_state == 3

    assert _int(rows["error"]["infiniband.smpdirected.smpstatus"]) == ours["error"].status_word == 0x801C


@pytest.mark.tshark
@needs_tshark
def test_tshark_no_malformed_or_expert_frames(tmp_path):
    path = tmp_path / "all.erf"
    write_vectors(path, list(VECTORS))
    out = subprocess.run([TSHARK, "-r", str(path), "-Y", "_ws.malformed || _ws.expert"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    assert out.strip() == "", out
    count = subprocess.run([TSHARK, "-r", str(path), "-T", "fields", "-e", "frame.number"],
                           check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert len(count) == len(VECTORS)


BYTES_FIELDS = {"infiniband.smpdirected.initialpath", "infiniband.smpdirected.returnpath"}
TEXT_FIELDS = {"infiniband.nodedescription.nodestring"}


@pytest.mark.tshark
@needs_tshark
def test_tshark_dissects_every_vector_as_recorded(tmp_path):
    """Every vector, framed by us: tshark's dissection equals the recorded decoded_tshark
    field by field, and tshark shows no field the recording lacks."""
    names = list(VECTORS)
    path = tmp_path / "all.erf"
    write_vectors(path, names)
    fields = sorted({k for v in VECTORS.values() for k in v["decoded_tshark"]})
    rows = tshark_fields(path, ["frame.number", *fields])
    assert len(rows) == len(names)
    compared = 0
    for row in rows:
        name = names[int(row[0]) - 1]
        recorded = VECTORS[name]["decoded_tshark"]
        live = dict(zip(fields, row[1:]))
        for key in fields:
            text = live[key]
            if key not in recorded:
                assert text == "", f"{name}: tshark shows {key}={text!r}, not in the recording"
                continue
            want = recorded[key]
            if key in BYTES_FIELDS or key in TEXT_FIELDS:
                got = text
            elif isinstance(want, list):
                got = _ints(text)
            else:
                got = _int(text)
            assert got == want, f"{name}: {key}"
            compared += 1
    assert compared > 20 * len(names)


@needs_tshark
@pytest.mark.parametrize("suffix", [".erf", ".pcap"])
def test_record_a_session_tshark_agrees(live_cli, tmp_path, suffix):
    """`--record` on a real session (the simulator, a dry-run sweep): tshark decodes every
    frame of both written formats (ERF type 21, and pcap link type 252 written with
    scapy) as the SMPs we sent and received, attribute by attribute, nothing malformed."""
    import json as _json
    cap = tmp_path / f"session{suffix}"
    r = live_cli("--record", cap, "sweep", "--dry-run", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    sent = _json.loads(r.stdout)["smps_sent"]
    ours = [(rec.mad[3], int.from_bytes(rec.mad[16:18], "big")) for rec in read_capture(cap)]
    assert len(ours) == 2 * sent  # every request and its response
    out = subprocess.run([TSHARK, "-r", str(cap), "-T", "fields", "-e", "infiniband.mad.method",
                          "-e", "infiniband.mad.attributeid"], capture_output=True, text=True, timeout=120)
    theirs = [tuple(int(x, 0) for x in line.split("\t")) for line in out.stdout.splitlines() if line]
    assert theirs == ours
    bad = subprocess.run([TSHARK, "-r", str(cap), "-Y", "_ws.malformed || _ws.expert"], capture_output=True,
                         text=True, timeout=120)
    assert bad.stdout.strip() == ""


@pytest.mark.tshark
@needs_tshark
def test_tshark_reads_a_recorded_gmp_session_as_we_do(tmp_path):
    """GMPs recorded by a transport: framed on QP1 with the GSI Q_Key, and tshark's own
    ClassPortInfo and PortCounters dissectors read the fields where mad.gmp and
    mad.perfmgt put them (an independent witness of both layouts)."""
    from mad import gmp, perfmgt
    from mad.header import GSI_QKEY
    from smagent.transport.address import Address
    from smagent.transport.base import Request
    from smagent.transport.immediate import ImmediateTransport

    cpi = gmp.ClassPortInfo(base_version=1, class_version=1, capability_mask=0x1300, capability_mask2=0x12345,
                            resp_time_value=0x11, redirect_lid=0x2345, redirect_qp=0x654321, trap_lid=0x77,
                            trap_q_key=GSI_QKEY, trap_sl=5)
    pc = perfmgt.PortCounters(port_select=3, symbol_error_counter=0x1234, link_downed_counter=9,
                              port_xmit_discards=0x55, vl15_dropped=0x66, port_xmit_data=0x1020304,
                              port_rcv_pkts=0x50607)

    class Agents(ImmediateTransport):
        def _answer_to(self, raw, addr):
            return gmp.response_to(raw, data=cpi if raw[17] == 1 else pc)

    path = tmp_path / "gmp.erf"
    t = Agents(recorder=CaptureWriter(path))
    t.execute([Request.gmp(perfmgt.get(1, tid=0x10), Address.gsi(4)),
               Request.gmp(perfmgt.port_counters_get(3, tid=0x11), Address.gsi(4))], check=True)
    t.close()
    fields = ["infiniband.bth.destqp", "infiniband.deth.q_key", "infiniband.mad.mgmtclass", "infiniband.mad.method",
              "infiniband.lrh.dlid", "infiniband.classportinfo.capabilitymask",
              "infiniband.classportinfo.capabilitymask2", "infiniband.classportinfo.resptimevalue",
              "infiniband.classportinfo.redirectlid", "infiniband.classportinfo.redirectqp",
              "infiniband.classportinfo.traplid", "infiniband.classportinfo.trapqkey",
              "infiniband.classportinfo.trapsl", "infiniband.portcounters.portselect",
              "infiniband.portcounters.symbolerrorcounter", "infiniband.portcounters.linkdownedcounter",
              "infiniband.portcounters.portxmitdiscards", "infiniband.portcounters.vl15dropped",
              "infiniband.portcounters.portxmitdata", "infiniband.portcounters.portrcvpkts"]
    rows = [dict(zip(fields, r)) for r in tshark_fields(path, fields)]
    assert len(rows) == 4  # two requests, two answers
    for row in rows:
        assert _int(row["infiniband.bth.destqp"]) == 1 and _int(row["infiniband.deth.q_key"]) == GSI_QKEY
        assert _int(row["infiniband.mad.mgmtclass"]) == 0x04
    assert [_int(r["infiniband.mad.method"]) for r in rows] == [0x01, 0x01, 0x81, 0x81]  # one window
    c = rows[2]
    assert [_int(c[f"infiniband.classportinfo.{k}"]) for k in (
        "capabilitymask", "capabilitymask2", "resptimevalue", "redirectlid", "redirectqp", "traplid", "trapqkey",
        "trapsl")] == [0x1300, 0x12345, 0x11, 0x2345, 0x654321, 0x77, GSI_QKEY, 5]
    p = rows[3]
    assert [_int(p[f"infiniband.portcounters.{k}"]) for k in (
        "portselect", "symbolerrorcounter", "linkdownedcounter", "portxmitdiscards", "vl15dropped", "portxmitdata",
        "portrcvpkts")] == [3, 0x1234, 9, 0x55, 0x66, 0x1020304, 0x50607]
