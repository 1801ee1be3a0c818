"""Fuzz the codec and the capture reader: only codec errors may escape, nothing may hang.

    python bench/fuzz.py                 # 1,000,000 inputs, seed 1
    python bench/fuzz.py -n 200000 --seed 7 --budget-ms 250

Inputs (mixed, seeded, reproducible):

* ``random``: 256 random bytes, with byte 0 (BaseVersion) and byte 1 (class) often valid
  so decoding gets past the first checks;
* ``golden``: the golden vectors (tests/vectors/*.jsonl, ``hex``) mutated: bit flips,
  byte sets (0x00, 0xFF, random), truncations, extensions, attribute ID / modifier swaps;
* ``frame``: a golden MAD framed (LRH/BTH/DETH/ICRC/VCRC, ``mad.framing.frame``) and
  then mutated, through ``mad.framing.unframe``;
* ``capture``: capture files (fixtures/*.erf and tests/vectors/tshark/*.{erf,pcap})
  mutated (header fields, lengths, truncation, splicing) and read with
  ``smagent.transport.pcap.read_capture``, every record's MAD decoded too.

Every MAD that decodes goes through ``.attribute()``, re-encode (``mad.smp.encode``),
decode of the re-encoding (must equal the first decode), and ``encode_attribute`` of
the decoded attribute. Allowed exceptions: ``mad.errors.MadError`` for MADs and frames;
``smagent.transport.pcap.CaptureError``, ``MadError`` or another ``ValueError`` subclass for
captures. Anything else is a failure, printed with the input as a reproducer hex (and
the kind) and counted; so is an input that takes longer than ``--budget-ms`` (checked
with a SIGALRM timer, which also interrupts a hang). Exit status: 0 clean, 1 failures.

atheris is not used: plain ``random`` keeps the run reproducible from the seed and
needs nothing installed.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mad import smp as smpcodec  # noqa: E402
from mad.attributes import encode_attribute  # noqa: E402
from mad.errors import MadError  # noqa: E402
from mad.framing import frame, unframe  # noqa: E402
from smagent.transport.pcap import CaptureError, read_capture  # noqa: E402

MAD_SIZE = 256


class Hang(Exception):
    """Raised by the SIGALRM handler: the input exceeded its time budget."""


def _alarm(_sig, _frm):
    raise Hang()


# -- corpora -----------------------------------------------------------------------------
def golden_mads() -> list[bytes]:
    out = []
    for f in sorted(glob.glob(str(ROOT / "tests" / "vectors" / "*.jsonl"))):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    h = json.loads(line).get("hex")
                    if h:
                        out.append(bytes.fromhex(h))
    return out


def golden_captures() -> list[bytes]:
    pats = [ROOT / "fixtures" / "*.erf", ROOT / "tests" / "vectors" / "tshark" / "*.erf",
            ROOT / "tests" / "vectors" / "tshark" / "*.pcap"]
    out = []
    for p in pats:
        for f in sorted(glob.glob(str(p))):
            data = Path(f).read_bytes()
            if len(data) > 64 * 1024:  # keep the big fixtures to their first records
                data = data[:64 * 1024]
            out.append(data)
    return out


# -- mutators ----------------------------------------------------------------------------
def mutate(rng: random.Random, data: bytes, *, max_len: int = 512) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        op = rng.randrange(8)
        if op == 0 and b:  # bit flip
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # byte set
            b[rng.randrange(len(b))] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif op == 2 and b:  # truncate
            del b[rng.randrange(len(b) + 1):]
        elif op == 3:  # extend
            b += bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 8, 64))))
        elif op == 4 and len(b) >= 4:  # 16-bit field set in the header area
            i = rng.randrange(min(len(b) - 1, 64))
            v = rng.choice((0, 0xFFFF, 0x8000, rng.randrange(65536)))
            b[i:i + 2] = v.to_bytes(2, "big")
        elif op == 5 and len(b) > 16:  # duplicate a slice
            i = rng.randrange(len(b))
            j = min(len(b), i + rng.randrange(1, 64))
            b[i:i] = b[i:j]
        elif op == 6 and len(b) > 24:  # 32-bit field (modifier, lengths) set
            i = rng.randrange(len(b) - 4)
            b[i:i + 4] = rng.choice((0, 0xFFFFFFFF, rng.randrange(1 << 32))).to_bytes(4, "big")
        elif op == 7 and b:  # delete a byte
            del b[rng.randrange(len(b))]
    return bytes(b[:max_len])


def mutate_mad(rng: random.Random, mad: bytes) -> bytes:
    b = bytearray(mad)
    r = rng.random()
    if r < 0.5:  # in-place only: stays 256 bytes, so it reaches the attribute decoders
        for _ in range(rng.choice((1, 2, 4, 16))):
            i = rng.randrange(len(b))
            if rng.random() < 0.5:
                b[i] ^= 1 << rng.randrange(8)
            else:
                b[i] = rng.randrange(256)
        if rng.random() < 0.3:  # attribute ID swap (bytes 16-17) and modifier (20-23)
            b[16:18] = rng.choice((0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x20,
                                   0x02, 0xFF00, rng.randrange(65536))).to_bytes(2, "big")
        if rng.random() < 0.3:
            b[20:24] = rng.randrange(1 << 32).to_bytes(4, "big")
        return bytes(b)
    return mutate(rng, bytes(b), max_len=600)


def random_mad(rng: random.Random) -> bytes:
    n = MAD_SIZE if rng.random() < 0.9 else rng.randrange(0, 400)
    b = bytearray(rng.getrandbits(8) for _ in range(n))
    if n >= 2 and rng.random() < 0.8:
        b[0] = 1
        b[1] = rng.choice((0x01, 0x81))
    return bytes(b)


# -- targets -----------------------------------------------------------------------------
def check_mad(raw: bytes) -> None:
    """Decode, attribute, re-encode, decode again. Raises only MadError (or AssertionError
    for a round-trip mismatch, which is a failure)."""
    s = smpcodec.decode(raw)
    again = smpcodec.encode(s)
    assert len(again) == MAD_SIZE, f"re-encode gave {len(again)} bytes"
    s2 = smpcodec.decode(again)
    assert smpcodec.encode(s2) == again, "encode(decode(encode(decode(x)))) differs"
    _ = (s.is_response, s.attribute_name, s.method_name, s.status_info, s.tid32)
    if s.directed:
        _ = s.target() if hasattr(s, "target") else None
    v = s.attribute()  # MadError (UnknownAttributeError) for attributes we do not know
    data = encode_attribute(v, s.attribute_modifier)
    assert len(data) == 64, f"encode_attribute gave {len(data)} bytes"


def check_frame(packet: bytes) -> None:
    mad, _slid, _dlid = unframe(packet, verify_crc=bool(packet and packet[-1] & 1))
    try:
        check_mad(mad)
    except MadError:
        pass


def check_capture(data: bytes, path: str) -> None:
    with open(path, "wb") as f:
        f.write(data)
    for rec in read_capture(path, verify_crc=bool(data and data[-1] & 1)):
        try:
            check_mad(rec.mad)
        except MadError:
            pass


# -- the loop ----------------------------------------------------------------------------
def run(n: int, seed: int, budget_ms: int = 500, *, out=sys.stdout, max_report: int = 20,
        capture_share: float = 0.05) -> dict:
    rng = random.Random(seed)
    mads = golden_mads()
    caps = golden_captures()
    if not mads:
        raise SystemExit("no golden vectors found under tests/vectors")
    tmpdir = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    fd, cap_path = tempfile.mkstemp(prefix="smagent-fuzz-", suffix=".cap", dir=tmpdir)
    os.close(fd)
    counts = {"random": 0, "golden": 0, "frame": 0, "capture": 0}
    outcomes = {"ok": 0, "codec_error": 0}
    failures: list[dict] = []
    slowest = 0.0
    old = signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    try:
        for i in range(n):
            r = rng.random()
            if r < capture_share and caps:
                kind = "capture"
                data = mutate(rng, rng.choice(caps), max_len=70 * 1024)
            elif r < 0.35:
                kind = "random"
                data = random_mad(rng)
            elif r < 0.85:
                kind = "golden"
                data = mutate_mad(rng, rng.choice(mads))
            else:
                kind = "frame"
                m = rng.choice(mads)
                data = mutate(rng, frame(m, rng.randrange(1, 0xC000), rng.choice((0xFFFF, rng.randrange(1, 0xC000))),
                                         crc=rng.random() < 0.7), max_len=400)
            counts[kind] += 1
            s0 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, budget_ms / 1000.0)
            try:
                if kind == "capture":
                    check_capture(data, cap_path)
                elif kind == "frame":
                    check_frame(data)
                else:
                    check_mad(data)
                outcomes["ok"] += 1
            except MadError:
                outcomes["codec_error"] += 1
            except Hang:
                failures.append({"i": i, "kind": kind, "error": f"exceeded {budget_ms} ms", "hex": data.hex()})
            except ValueError as e:
                if kind == "capture":  # CaptureError and other ValueError subclasses are allowed there
                    outcomes["codec_error"] += 1
                else:
                    failures.append({"i": i, "kind": kind, "error": f"{type(e).__name__}: {e}",
                                     "hex": data.hex(), "trace": traceback.format_exc(limit=4)})
            except Exception as e:  # noqa: BLE001 - that is what we are looking for
                failures.append({"i": i, "kind": kind, "error": f"{type(e).__name__}: {e}", "hex": data.hex(),
                                 "trace": traceback.format_exc(limit=4)})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            dt = time.perf_counter() - s0
            slowest = max(slowest, dt)
            if failures and len(failures) <= max_report and failures[-1]["i"] == i and out is not None:
                f = failures[-1]
                print(f"FAIL #{i} ({kind}): {f['error']}\n  reproducer hex: {f['hex']}", file=out)
                if "trace" in f:
                    print("  " + f["trace"].replace("\n", "\n  "), file=out)
    finally:
        signal.signal(signal.SIGALRM, old)
        try:
            os.unlink(cap_path)
        except OSError:
            pass
    elapsed = time.perf_counter() - t0
    return {"inputs": n, "seconds": round(elapsed, 2), "inputs_per_s": round(n / elapsed) if elapsed else None,
            "by_kind": counts, "outcomes": outcomes, "failures": len(failures),
            "slowest_ms": round(slowest * 1000, 2), "failure_list": failures}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1_000_000, help="number of inputs (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-ms", type=int, default=500, help="time budget per input (hang detection)")
    ap.add_argument("--capture-share", type=float, default=0.05, help="share of capture-file inputs")
    a = ap.parse_args(argv)
    res = run(a.n, a.seed, a.budget_ms, capture_share=a.capture_share)
    failures = res.pop("failure_list")
    print(json.dumps(res, indent=2))
    print(f"# {res['inputs']} inputs in {res['seconds']} s: {res['inputs_per_s']} inputs/s; "
          f"{res['failures']} failures; slowest input {res['slowest_ms']} ms")
    if failures:
        print(f"# first reproducer ({failures[0]['kind']}): {failures[0]['hex']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
