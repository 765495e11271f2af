"""Hidden cases for merge_intervals: hand-picked edge cases plus seeded random ones. Expected values come from
a coverage oracle that marks every covered point on a doubled, compressed axis (so that [1, 2] and [3, 4],
which leave the gap (2, 3), stay apart) and reads off the covered runs; it never sorts and merges intervals."""

import random


def oracle(intervals):
    """Merged intervals from point coverage: each interval [a, b] covers positions 2a..2b of the doubled axis,
    and a merged interval is a maximal run of covered positions. Positions are compressed to the doubled
    endpoints plus the point just after each, which is enough to see every gap."""
    if not intervals:
        return []
    keys = sorted({p for a, b in intervals for p in (2 * a, 2 * b, 2 * b + 1)})
    rank = {p: k for k, p in enumerate(keys)}
    delta = [0] * (len(keys) + 1)
    for a, b in intervals:
        delta[rank[2 * a]] += 1
        delta[rank[2 * b] + 1] -= 1
    out, depth, start = [], 0, None
    for k, p in enumerate(keys):
        depth += delta[k]
        if depth > 0 and start is None:
            start = p
        elif depth == 0 and start is not None:
            out.append([start // 2, (keys[k - 1]) // 2])
            start = None
    assert start is None
    return out


FIXED = [
    ([[1, 3], [2, 6], [8, 10], [15, 18]], [[1, 6], [8, 10], [15, 18]]),
    ([[4, 5], [1, 4]], [[1, 5]]),
    ([], []),
    ([[5, 5]], [[5, 5]]),
    ([[1, 2], [2, 3]], [[1, 3]]),  # touching closed intervals share the point 2
    ([[1, 2], [3, 4]], [[1, 2], [3, 4]]),  # the gap (2, 3) keeps them apart
    ([[1, 10], [2, 3], [4, 5]], [[1, 10]]),  # containment: the end must not shrink
    ([[2, 3], [1, 10], [11, 12]], [[1, 10], [11, 12]]),
    ([[6, 8], [1, 9], [2, 4], [4, 7]], [[1, 9]]),
    ([[1, 4], [1, 4], [1, 4]], [[1, 4]]),
    ([[3, 3], [3, 3], [2, 2], [4, 4]], [[2, 2], [3, 3], [4, 4]]),
    ([[-5, -3], [-4, 0], [1, 1], [-10, -10]], [[-10, -10], [-5, 0], [1, 1]]),
    ([[-10**9, 10**9], [0, 0]], [[-10**9, 10**9]]),
    ([[10**9, 10**9], [-10**9, -10**9]], [[-10**9, -10**9], [10**9, 10**9]]),
    ([[5, 6], [1, 2], [3, 4]], [[1, 2], [3, 4], [5, 6]]),  # unsorted, no overlaps
    ([[1, 5], [0, 0]], [[0, 0], [1, 5]]),
    ([[0, 0], [0, 1]], [[0, 1]]),
    ([[1, 3], [5, 7], [2, 6]], [[1, 7]]),  # the last interval bridges the first two
]


def cases(variant):
    out = []
    for k, (intervals, expected) in enumerate(FIXED):
        assert oracle(intervals) == expected, intervals
        out.append({"id": f"fixed-{k}", "args": [intervals], "expected": expected})
    rng = random.Random(90210 + variant)
    for k in range(40):
        n = rng.randint(1, 25)
        span = rng.choice([10, 30, 200])
        intervals = []
        for _ in range(n):
            a = rng.randint(-span, span)
            intervals.append([a, a + rng.randint(0, rng.choice([0, 3, 10, span // 2]))])
        out.append({"id": f"random-{k}", "args": [intervals], "expected": oracle(intervals)})
    for k, (span, length) in enumerate([(10**9, 4 * 10**5), (10**7, 1500)]):
        intervals = []
        for _ in range(10**4):
            a = rng.randint(-span, span - length)
            intervals.append([a, a + rng.randint(0, length)])
        out.append({"id": f"large-{k}", "args": [intervals], "expected": oracle(intervals)})
    return out
