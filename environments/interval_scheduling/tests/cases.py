"""Hidden cases for interval_scheduling: hand-picked edge cases plus seeded random ones. Small inputs are
solved by a brute-force search over sets of pairwise compatible intervals; large ones by a dynamic program
over intervals sorted by start (take an interval and jump to the first one starting at or after its end, or
skip it), which shares nothing with the earliest-end greedy."""

import bisect
import random


def brute(intervals):
    """The largest set of pairwise non-overlapping intervals, by exhaustive search (n <= 16)."""
    n = len(intervals)
    conflict = [0] * n
    for i, (s1, e1) in enumerate(intervals):
        for j, (s2, e2) in enumerate(intervals):
            if i != j and s1 < e2 and s2 < e1:
                conflict[i] |= 1 << j
    best = 0

    def search(i, chosen, count):
        nonlocal best
        if count + n - i <= best:
            return
        if i == n:
            best = count
            return
        if not conflict[i] & chosen:
            search(i + 1, chosen | 1 << i, count + 1)
        search(i + 1, chosen, count)

    search(0, 0, 0)
    return best


def dp(intervals):
    """best[i] = most intervals among those with index >= i in start order."""
    ordered = sorted(intervals)
    starts = [s for s, _ in ordered]
    n = len(ordered)
    best = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        nxt = bisect.bisect_left(starts, ordered[i][1], i + 1)
        best[i] = max(best[i + 1], 1 + best[nxt])
    return best[0]


FIXED = [
    ([], 0),
    ([[1, 2]], 1),
    ([[1, 2], [2, 3], [3, 4], [1, 3]], 3),
    ([[1, 2], [1, 2], [1, 2]], 1),
    ([[1, 2], [2, 3]], 2),  # half-open: touching intervals are compatible
    ([[1, 100], [2, 3], [3, 4], [4, 5]], 3),  # the earliest start is a trap
    ([[1, 5], [4, 7], [6, 10]], 2),  # the shortest is a trap
    ([[-10**9, 10**9]], 1),
    ([[-10**9, 0], [0, 10**9]], 2),
    ([[5, 6], [1, 2], [3, 4]], 3),
    ([[1, 3], [2, 4], [3, 5]], 2),
    ([[1, 10], [2, 3], [4, 5], [6, 7], [8, 9]], 4),
    ([[7, 8], [1, 8], [2, 3], [3, 7]], 3),
    ([[0, 1], [0, 1], [1, 2], [1, 2], [2, 3]], 3),
    ([[-5, -2], [-3, 0], [-1, 4], [3, 6], [5, 9]], 3),
    ([[1, 4], [2, 3], [3, 4]], 2),
]


def cases(variant):
    out = []
    for k, (intervals, expected) in enumerate(FIXED):
        assert brute(intervals) == expected and dp(intervals) == expected, intervals
        out.append({"id": f"fixed-{k}", "args": [intervals], "expected": expected})
    rng = random.Random(5150 + variant)
    for k in range(40):
        n = rng.randint(1, 14)
        span = rng.choice([8, 20, 60])
        intervals = []
        for _ in range(n):
            s = rng.randint(-span, span)
            intervals.append([s, s + rng.randint(1, rng.choice([2, 6, span]))])
        expected = brute(intervals)
        assert dp(intervals) == expected, intervals
        out.append({"id": f"random-{k}", "args": [intervals], "expected": expected})
    r = rng.random
    for k, (n, span, length) in enumerate([(20000, 10**6, 200), (20000, 10**9, 10**6)]):
        intervals = []
        for _ in range(n):
            s = int(r() * 2 * span) - span
            intervals.append([s, s + 1 + int(r() * length)])
        out.append({"id": f"large-{k}", "args": [intervals], "expected": dp(intervals)})
    return out
