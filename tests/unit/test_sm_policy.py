"""The SM loop's scheduling decisions (smagent.sm.policy), with no simulator at all."""

from smagent.sm import policy


def test_failed_sweeps_are_retried_with_backoff_then_at_the_light_sweeps_pace():
    retries, delays, warned = 0, [], []
    for _ in range(len(policy.RETRY_AFTER_FAILURE) + 3):
        d = policy.after_failure(retries, sweep_interval=10.0)
        retries = d.count
        delays.append(d.delay)
        warned.append(d.gave_up_fast)
    n = len(policy.RETRY_AFTER_FAILURE)
    assert delays == list(policy.RETRY_AFTER_FAILURE) + [10.0] * 3
    assert warned == [False] * n + [True, False, False]  # one warning when the fast schedule runs out
    assert retries == n + 3


def test_without_light_sweeps_a_failed_sweep_stops_after_the_fast_retries():
    n = len(policy.RETRY_AFTER_FAILURE)
    assert policy.after_failure(n - 1, 0.0).delay == policy.RETRY_AFTER_FAILURE[-1]
    assert policy.after_failure(n, 0.0).delay is None


def test_unclean_sweeps_are_followed_by_full_ones_a_few_times_then_at_the_light_pace():
    resweeps, seen = 0, []
    for _ in range(policy.RESWEEPS_AFTER_PROBLEMS + 2):
        d = policy.after_unclean(resweeps, clean=False, trap_settle=0.5, sweep_interval=10.0)
        resweeps = d.count
        seen.append((d.delay, d.fast, d.gave_up_fast))
    k = policy.RESWEEPS_AFTER_PROBLEMS
    assert seen == [(0.5, True, False)] * k + [(10.0, False, True), (10.0, False, False)]
    clean = policy.after_unclean(resweeps, clean=True, trap_settle=0.5, sweep_interval=10.0)
    assert (clean.count, clean.delay) == (0, None)  # a clean sweep resets the count, schedules nothing


def test_unclean_sweeps_without_light_sweeps_stop_after_the_fast_ones():
    k = policy.RESWEEPS_AFTER_PROBLEMS
    assert policy.after_unclean(k, clean=False, trap_settle=0.5, sweep_interval=0.0).delay is None


def test_light_sweep_due():
    assert policy.light_due(100.0, 10.0) == 110.0
    assert policy.light_due(100.0, 0.0) is None
    assert policy.retry_light_due(100.0, 0.0) == 101.0  # the retries run before any light sweep
    assert policy.retry_light_due(100.0, 10.0) == 110.0
