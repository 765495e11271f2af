"""Writes ../tests/probes.json, the hidden probes of patch_rate_limiter, from SETUP and PROBES below.

Run it again whenever the repository, the hidden tests or the solutions change:

    python3 generator/make_probes.py

Each entry of PROBES is (id, covers, expr); deepgym.probes explains the rules the probes must meet and
refuses to write the file otherwise. Expected values are computed from solutions/reference.diff, never typed.
"""

from __future__ import annotations

SETUP = r'''
from throttle import Decision, KeyedRateLimiter, ManualClock, MonotonicClock, TokenBucket


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def bucket_run(capacity, rate, tokens, steps):
    """Run ``steps`` against a new bucket on its own ManualClock (starting at 0) and list what each
    step returns. Steps: ("advance", seconds), ("acquire", n), ("tokens",), ("wait", n) for
    time_until_available(n), ("sleep", n) to advance the clock by time_until_available(n) (returns the
    time slept), ("drain",) to acquire one token at a time until refused (returns how many)."""
    clock = ManualClock()
    bucket = TokenBucket(capacity, rate, clock=clock, tokens=tokens)
    results = []
    for step in steps:
        kind = step[0]
        if kind == "advance":
            clock.advance(step[1])
            continue
        if kind == "acquire":
            results.append(bucket.try_acquire(*step[1:]))
        elif kind == "tokens":
            results.append(bucket.tokens)
        elif kind == "wait":
            results.append(bucket.time_until_available(*step[1:]))
        elif kind == "sleep":
            wait = bucket.time_until_available(*step[1:])
            clock.advance(wait)
            results.append(wait)
        elif kind == "drain":
            taken = 0
            while bucket.try_acquire():
                taken += 1
            results.append(taken)
        else:
            raise ValueError(step)
    return results


def limiter_run(capacity, rate, steps, max_keys=100):
    """Like bucket_run for a KeyedRateLimiter. Steps: ("advance", seconds), ("hit", key[, cost]) (returns
    [allowed, remaining, retry_after]), ("peek", key), ("has", key), ("len",), ("reset", key)."""
    clock = ManualClock()
    limiter = KeyedRateLimiter(capacity, rate, clock=clock, max_keys=max_keys)
    results = []
    for step in steps:
        kind, args = step[0], step[1:]
        if kind == "advance":
            clock.advance(*args)
        elif kind == "hit":
            decision = limiter.hit(*args)
            results.append([decision.allowed, decision.remaining, decision.retry_after])
        elif kind == "peek":
            results.append(limiter.peek(*args))
        elif kind == "has":
            results.append(args[0] in limiter)
        elif kind == "len":
            results.append(len(limiter))
        elif kind == "reset":
            limiter.reset(*args)
        else:
            raise ValueError(step)
    return results
'''

PROBES = [
    # --- a burst takes exactly the capacity; a request is granted whenever n tokens are there
    ("burst_uses_the_whole_capacity", ["test_burst_uses_the_whole_capacity"],
     r'''bucket_run(5, 1.0, None, [("acquire",)] * 6 + [("tokens",), ("wait", 1)])'''),
    ("capacity_one_bucket", ["test_capacity_one_bucket_allows_one_request"],
     r'''bucket_run(1, 1.0, None, [("acquire",), ("acquire",), ("wait", 1), ("advance", 1.0), ("acquire",), ("acquire",)])'''),
    ("acquire_every_token_at_once", ["test_acquire_every_token_at_once"],
     r'''[bucket_run(3, 1.0, None, [("acquire", 3), ("tokens",)]), bucket_run(4, 2.0, 2, [("acquire", 2), ("tokens",), ("advance", 1.0), ("acquire", 2), ("acquire", 1)])]'''),
    ("wait_agrees_with_acquire", ["test_time_until_available_agrees_with_try_acquire"],
     r'''bucket_run(4, 1.0, 2, [("wait", 2), ("acquire", 2), ("wait", 1), ("acquire",), ("advance", 1.0), ("wait", 1), ("acquire",), ("wait", 1)])'''),
    # --- the refill rate does not depend on how often the bucket is looked at
    ("frequent_polling_keeps_the_rate", ["test_frequent_polling_keeps_the_configured_rate"],
     r'''bucket_run(100, 8.0, 0, [("advance", 0.1875), ("drain",)] * 16)'''),
    ("refill_independent_of_reads", ["test_refill_does_not_depend_on_how_often_the_bucket_is_read"],
     r'''[bucket_run(100, 4.0, 0, [("advance", 0.1875), ("tokens",)] * 12), bucket_run(100, 4.0, 0, [("advance", 2.25), ("tokens",)]), bucket_run(100, 4.0, 0, [("advance", 0.0625), ("wait", 1), ("acquire",)] * 12 + [("tokens",)])]'''),
    ("long_run_average_rate", ["test_long_run_average_rate"],
     r'''(lambda counts: [sum(counts), counts[:8]])(bucket_run(10, 4.0, 0, [("advance", 0.125), ("drain",)] * 100))'''),
    ("no_token_before_its_interval", ["test_frequent_polling_keeps_the_configured_rate", "issue"],
     r'''bucket_run(100, 2.0, 0, [("advance", 0.375), ("acquire",), ("advance", 0.0625), ("acquire",), ("advance", 0.0625), ("acquire",), ("advance", 0.4375), ("acquire",), ("advance", 0.0625), ("acquire",), ("tokens",)])'''),
    # --- time_until_available counts the part of the next token already earned
    ("wait_counts_partial_progress", ["test_time_until_available_counts_partial_progress"],
     r'''bucket_run(1, 2.0, 0, [("advance", 0.25), ("wait", 1), ("advance", 0.125), ("wait", 1), ("advance", 0.125), ("wait", 1), ("acquire",)])'''),
    ("wait_for_several_tokens", ["test_time_until_available_counts_partial_progress",
                                 "test_time_until_available_agrees_with_try_acquire"],
     r'''bucket_run(8, 2.0, 0, [("advance", 0.75), ("wait", 1), ("wait", 2), ("wait", 3), ("tokens",), ("advance", 0.5), ("wait", 3), ("acquire", 2), ("wait", 2)])'''),
    ("waiting_the_advertised_time_succeeds", ["test_waiting_exactly_the_advertised_time_succeeds"],
     r'''bucket_run(2, 4.0, None, [("drain",)] + [("advance", 0.125), ("acquire",), ("sleep", 1), ("acquire",)] * 10 + [("advance", 0.0625), ("sleep", 2), ("acquire", 2)])'''),
    # --- the keyed limiter's decisions
    ("keyed_limiter_allows_capacity_requests", ["test_keyed_limiter_allows_capacity_requests"],
     r'''limiter_run(3, 4.0, [("hit", "client")] * 4 + [("hit", "other")])'''),
    ("denied_request_retry_after", ["test_denied_request_gets_a_positive_retry_after"],
     r'''limiter_run(2, 4.0, [("hit", "k"), ("hit", "k"), ("hit", "k"), ("advance", 0.125), ("hit", "k"), ("advance", 0.125), ("hit", "k"), ("hit", "k")])'''),
    ("refused_cost_is_not_spent", ["test_refused_cost_is_not_spent"],
     r'''limiter_run(5, 1.0, [("hit", "k", 5), ("hit", "k", 2), ("advance", 0.5), ("hit", "k", 2), ("advance", 1.5), ("hit", "k", 2), ("peek", "k")])'''),
    # --- pass-to-pass: what works today keeps working
    ("starting_tokens_and_whole_interval_refill", ["test_starts_full", "test_starts_with_given_tokens",
                                                   "test_refill_after_whole_intervals", "test_tokens_are_whole_numbers",
                                                   "test_no_token_before_a_whole_interval"],
     r'''[bucket_run(4, 1.0, None, [("tokens",)]), bucket_run(4, 1.0, 1, [("tokens",)]), bucket_run(5, 2.0, 0, [("advance", 0.5), ("tokens",), ("advance", 1.0), ("tokens",)]), bucket_run(5, 1.0, 0, [("advance", 0.75), ("tokens",), ("acquire",)]), [type(t).__name__ for t in bucket_run(5, 1.0, 0, [("advance", 1.5), ("tokens",)])]]'''),
    ("refill_capped_and_refusals_spend_nothing", ["test_refill_capped_at_capacity", "test_refused_request_spends_nothing",
                                                  "test_empty_bucket_refuses", "test_acquire_spends_tokens"],
     r'''[bucket_run(3, 16.0, 0, [("advance", 60), ("tokens",)]), bucket_run(5, 1.0, 1, [("acquire", 3), ("tokens",)]), bucket_run(2, 1.0, 0, [("acquire",)]), bucket_run(10, 1.0, None, [("acquire", 4), ("tokens",)])]'''),
    ("time_until_available_simple_cases", ["test_time_until_available_when_empty", "test_time_until_available_with_plenty",
                                           "test_bucket_recovers_after_waiting"],
     r'''[bucket_run(4, 2.0, 0, [("wait", 1), ("wait", 3)]), bucket_run(5, 1.0, None, [("wait", 2)]), bucket_run(4, 0.5, 0, [("wait", 1), ("wait", 4)])]'''),
    ("bad_arguments_raise", ["test_rejects_bad_capacity", "test_rejects_bad_rate", "test_rejects_bad_initial_tokens",
                             "test_rejects_bad_n", "test_request_above_capacity_can_never_succeed",
                             "test_cost_above_capacity_raises", "test_rejects_bad_parameters"],
     r'''[error_name(lambda: TokenBucket(c, 1.0)) for c in [0, -1, 1.5, True]] + [error_name(lambda: TokenBucket(3, r)) for r in [0, -2.0, "5"]] + [error_name(lambda: TokenBucket(3, 1.0, tokens=t)) for t in [4, -1]] + [error_name(lambda: TokenBucket(5, 1.0, clock=ManualClock()).try_acquire(n)) for n in [0, -1, 2.0, 6]] + [error_name(lambda: TokenBucket(3, 1.0, clock=ManualClock()).time_until_available(4)), error_name(lambda: KeyedRateLimiter(3, 1.0, clock=ManualClock()).hit("a", cost=4)), error_name(lambda: KeyedRateLimiter(0, 1.0)), error_name(lambda: KeyedRateLimiter(3, 0)), error_name(lambda: KeyedRateLimiter(3, 1.0, max_keys=0))]'''),
    ("repr_and_clocks", ["test_repr", "test_manual_clock_starts_where_told", "test_manual_clock_advance_and_set",
                         "test_manual_clock_never_goes_backwards", "test_default_clock", "test_monotonic_clock"],
     r'''[repr(TokenBucket(3, 0.5, clock=ManualClock())), ManualClock().now(), ManualClock(start=12.5).now(), (lambda c: [c.advance(1.5), c.advance(0.25), c.now(), c.set(10), c.now()])(ManualClock()), error_name(lambda: ManualClock(5).advance(-1)), error_name(lambda: ManualClock(5).set(4)), TokenBucket(2, 1000.0).try_acquire(), (lambda c: c.now() <= c.now())(MonotonicClock())]'''),
    ("keyed_limiter_bookkeeping", ["test_first_hit_allowed", "test_keys_are_independent", "test_peek_does_not_spend",
                                   "test_reset_forgets_key", "test_full_buckets_evicted_first",
                                   "test_least_recently_used_evicted_when_none_full"],
     r'''[limiter_run(3, 1.0, [("hit", "a"), ("peek", "a"), ("peek", "a"), ("hit", "b"), ("peek", "new"), ("has", "new"), ("len",), ("reset", "a"), ("has", "a"), ("len",), ("hit", "a"), ("has", "a"), ("len",)]), limiter_run(2, 1.0, [("hit", "a"), ("hit", "b"), ("advance", 5), ("hit", "a"), ("hit", "c"), ("has", "a"), ("has", "b"), ("has", "c"), ("len",)], max_keys=2), limiter_run(2, 0.001, [("hit", "a"), ("hit", "b"), ("hit", "a"), ("hit", "c"), ("has", "a"), ("has", "b"), ("has", "c"), ("len",)], max_keys=2)[4:]]'''),
]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from deepgym.probes import write_probes

    sys.exit(write_probes(Path(__file__).resolve().parent.parent, SETUP, PROBES))
