#!/usr/bin/env python3
"""Codec throughput: MADs per second, one core, median of N runs.

Two real MADs from the golden vectors, each way:

* a directed-route SwitchInfo SubnGetResp (ibsim's answer to ``smpquery -D switchinfo 0``):
  decode = ``mad.smp.decode(raw).attribute()`` (header, DR fields and the SwitchInfo);
  encode = ``mad.smp.encode(mad.smp.response_to(request, value=switchinfo))``;
* an LFT SubnSet (OpenSM's block 0 to S36, DR path 0,1):
  decode = ``mad.smp.decode(raw).attribute()``;
  encode = ``mad.smp.encode(mad.smp.dr(SubnSet, LFT, path, block, lft_value))``.

For comparison the same work through construct itself: the compiled structs
(``Layout.construct.compile()``: SMP layout, then the attribute layout on its data) and
construct's plain interpreted parse/build (the codec's reference path).

    python bench/codec.py                    # 5 runs, ~0.2 s each
    python bench/codec.py --runs 7 --number 50000 --json out.json

Target: >= 50,000 MADs/s each way for the generated codec. Never run from the tests.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runnable from a checkout without installing

import construct  # noqa: E402

from mad import attributes as A  # noqa: E402
from mad import smp as S  # noqa: E402
from mad.header import Method  # noqa: E402

TARGET = 50_000
VECTORS = REPO / "tests" / "vectors"
SWITCHINFO_RESP = "2sw4hca/pre_dr_switchinfo_presm/resp"
SWITCHINFO_REQ = "2sw4hca/pre_dr_switchinfo_presm/req"
LFT_SET = "36port/opensm/set_lft_S36_b0/req"


def load_vectors() -> dict[str, bytes]:
    out = {}
    for f in sorted(VECTORS.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                v = json.loads(line)
                out[v["name"]] = bytes.fromhex(v["hex"])
    return out


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"cpu {cpu}"
    return "not pinned (no sched_setaffinity)"


def measure(fn, number: int, runs: int) -> dict:
    fn()  # warm up (and fail early)
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        rates.append(number / (time.perf_counter() - t0))
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates), "runs": runs,
            "number": number}


def cases(vec: dict[str, bytes]):
    si_raw, si_req_raw, lft_raw = vec[SWITCHINFO_RESP], vec[SWITCHINFO_REQ], vec[LFT_SET]
    si_req = S.decode(si_req_raw)
    si_resp = S.decode(si_raw)
    si_value = si_resp.attribute()
    lft_smp = S.decode(lft_raw)
    lft_value = lft_smp.attribute()
    lft_path, lft_block, lft_tid = lft_smp.path, lft_smp.attribute_modifier, lft_smp.transaction_id

    # sanity: every path reproduces the real bytes before it is timed
    def si_encode():
        return S.encode(S.response_to(si_req, value=si_value))

    def lft_encode():
        return S.encode(S.dr(Method.SET, A.AttrID.LINEAR_FORWARDING_TABLE, lft_path, lft_block, lft_value,
                             tid=lft_tid))

    # ibsim's answer differs from response_to(request) only in the TID's high half,
    # which umad2sim rewrote on the way
    fixed = dataclasses.replace(S.response_to(si_req, value=si_value), transaction_id=si_resp.transaction_id)
    assert S.encode(fixed) == si_raw, "SwitchInfo GetResp does not re-encode to ibsim's bytes"
    assert lft_encode() == lft_raw, "LFT SubnSet does not re-encode to OpenSM's bytes"

    # construct's own compiled parsers/builders for the same work
    dr_c = S.DrSmp.LAYOUT.construct.compile()
    si_c = A.SwitchInfo.LAYOUT.construct.compile()
    lft_c = A.LinearForwardingTable.LAYOUT.construct.compile()
    dr_names, si_names, lft_names = S.DrSmp.LAYOUT.names, A.SwitchInfo.LAYOUT.names, A.LinearForwardingTable.LAYOUT.names

    def c_decode(attr_c):
        def run(raw):
            smp = dr_c.parse(raw)
            return smp, attr_c.parse(smp.data)
        return run

    si_smp_dict = {n: getattr(si_resp, n) for n in dr_names}
    si_attr_dict = {n: getattr(si_value, n) for n in si_names}
    lft_smp_dict = {n: getattr(lft_smp, n) for n in dr_names}
    lft_attr_dict = {n: getattr(lft_value, n) for n in lft_names}

    def c_encode(smp_c, attr_c, smp_dict, attr_dict):
        def run():
            d = dict(smp_dict)
            d["data"] = attr_c.build(attr_dict)
            return smp_c.build(d)
        return run

    c_si_dec, c_lft_dec = c_decode(si_c), c_decode(lft_c)
    c_si_enc = c_encode(dr_c, si_c, si_smp_dict, si_attr_dict)
    c_lft_enc = c_encode(dr_c, lft_c, lft_smp_dict, lft_attr_dict)
    assert c_si_enc() == si_raw and c_lft_enc() == lft_raw
    assert c_lft_dec(lft_raw)[1].ports == lft_value.ports

    def ref_decode(raw):
        smp = S.DrSmp.LAYOUT.decode_construct(raw)
        return A.layout_for(smp.attribute_id).decode_construct(smp.data)

    return [
        # (group, case, direction, fn)
        ("smagent codec", "DR SwitchInfo GetResp", "decode", lambda: S.decode(si_raw).attribute()),
        ("smagent codec", "DR SwitchInfo GetResp", "encode", si_encode),
        ("smagent codec", "DR LFT SubnSet", "decode", lambda: S.decode(lft_raw).attribute()),
        ("smagent codec", "DR LFT SubnSet", "encode", lft_encode),
        ("construct compiled", "DR SwitchInfo GetResp", "decode", lambda: c_si_dec(si_raw)),
        ("construct compiled", "DR SwitchInfo GetResp", "encode", c_si_enc),
        ("construct compiled", "DR LFT SubnSet", "decode", lambda: c_lft_dec(lft_raw)),
        ("construct compiled", "DR LFT SubnSet", "encode", c_lft_enc),
        ("construct interpreted", "DR SwitchInfo GetResp", "decode", lambda: ref_decode(si_raw)),
        ("construct interpreted", "DR LFT SubnSet", "decode", lambda: ref_decode(lft_raw)),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per case; the median is reported (default 5)")
    ap.add_argument("--number", type=int, default=40_000, help="MADs per run for the codec (default 40000)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)

    pinned = pin_one_core()
    results = []
    print(f"# mad codec throughput: python {platform.python_version()}, construct {construct.__version__}, "
          f"{pinned}, median of {args.runs} runs")
    print(f"{'implementation':<22} {'MAD':<22} {'way':<7} {'median MADs/s':>14} {'min':>10} {'max':>10}")
    for group, case, way, fn in cases(load_vectors()):
        # construct is ~10-100x slower: fewer iterations keep each run under a second
        number = args.number if group == "smagent codec" else max(args.number // 20, 500)
        r = measure(fn, number, args.runs)
        results.append({"implementation": group, "mad": case, "direction": way, **r})
        print(f"{group:<22} {case:<22} {way:<7} {r['median']:>14,.0f} {r['min']:>10,.0f} {r['max']:>10,.0f}")
    ours = [r for r in results if r["implementation"] == "smagent codec"]
    worst = min(r["median"] for r in ours)
    verdict = "meets" if worst >= TARGET else "BELOW"
    print(f"# slowest codec case: {worst:,.0f} MADs/s, {verdict} the {TARGET:,}/s target")
    if args.json:
        Path(args.json).write_text(json.dumps({"target": TARGET, "pinned": pinned, "results": results}, indent=1))
    return 0 if worst >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
