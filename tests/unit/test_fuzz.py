"""Fuzz smoke test: ~20,000 mutated and random inputs through the codec, the framing and
the capture reader (bench/fuzz.py has the 1,000,000-input run). Only codec errors may
escape (MadError; for captures CaptureError or another ValueError), no input may take
longer than its time budget, and every MAD that decodes must re-encode and round-trip."""
import importlib.util
import io
from pathlib import Path

import pytest

_FUZZ = Path(__file__).resolve().parents[2] / "bench" / "fuzz.py"


def _load():
    spec = importlib.util.spec_from_file_location("smagent_bench_fuzz", _FUZZ)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fuzz = _load()


@pytest.mark.parametrize("seed", [11, 12])
def test_fuzz_codec_and_captures(seed):
    out = io.StringIO()
    res = fuzz.run(10_000, seed, budget_ms=1000, out=out)
    assert res["failures"] == 0, out.getvalue()[:4000]
    # every kind of input ran, and some of each outcome happened (the mutators are not
    # so gentle that everything decodes, nor so harsh that nothing does)
    assert all(v > 0 for v in res["by_kind"].values()), res
    assert res["outcomes"]["ok"] > 500 and res["outcomes"]["codec_error"] > 500, res


def test_golden_vectors_round_trip():
    for raw in fuzz.golden_mads():
        try:
            fuzz.check_mad(raw)
        except fuzz.MadError:
            pass  # an attribute the codec does not decode (e.g. vendor-specific) is fine


def test_mutators_are_deterministic():
    import random
    a = [fuzz.mutate_mad(random.Random(5), fuzz.golden_mads()[0]) for _ in range(3)]
    assert a[0] == a[1] == a[2]


def test_hang_budget_is_enforced():
    import signal
    import time
    old = signal.signal(signal.SIGALRM, fuzz._alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(fuzz.Hang):
            time.sleep(1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
