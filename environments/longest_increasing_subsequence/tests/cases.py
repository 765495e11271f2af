"""Hidden cases for longest_increasing_subsequence: hand-picked edge cases plus seeded random ones. Small
inputs are solved by brute force over every subsequence; the large ones (n = 3000, so that exponential
answers time out) by the quadratic dynamic program indexed by value rank: best[r] is the longest increasing
subsequence so far ending in a value of rank r, and a new value of rank r extends the best of all lower
ranks. No patience sorting or binary search is involved."""

import random
from itertools import combinations


def brute(nums):
    """The longest strictly increasing subsequence by trying every subset of positions, longest first."""
    for size in range(len(nums), 0, -1):
        for chosen in combinations(nums, size):
            if all(a < b for a, b in zip(chosen, chosen[1:])):
                return size
    return 0


def quadratic(nums):
    ranks = {v: r for r, v in enumerate(sorted(set(nums)))}
    best = [0] * len(ranks)
    for v in nums:
        r = ranks[v]
        best[r] = max(best[r], 1 + max(best[:r], default=0))
    return max(best, default=0)


FIXED = [
    ([10, 9, 2, 5, 3, 7, 101, 18], 4),
    ([0, 1, 0, 3, 2, 3], 4),
    ([7, 7, 7, 7, 7, 7, 7], 1),  # strictly increasing: equal values do not chain
    ([], 0),
    ([5], 1),
    ([1, 2], 2),
    ([2, 1], 1),
    ([1, 1, 2, 2, 3, 3], 3),
    ([5, 4, 3, 2, 1], 1),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 10),
    ([-10**9, 10**9], 2),
    ([10**9, -10**9, 0, 10**9], 3),
    ([3, 10, 2, 1, 20], 3),
    ([50, 3, 10, 7, 40, 80], 4),
    ([4, 10, 4, 3, 8, 9], 3),
    ([1, 3, 6, 7, 9, 4, 10, 5, 6], 6),
    ([2, 2, 1, 1, 3, 3, 2, 4], 3),
    ([1, 5, 2, 3], 3),  # a contiguous increasing run would give 2
]


def cases(variant):
    out = []
    for k, (nums, expected) in enumerate(FIXED):
        assert brute(nums) == expected and quadratic(nums) == expected, nums
        out.append({"id": f"fixed-{k}", "args": [nums], "expected": expected})
    rng = random.Random(1618 + variant)
    for k in range(40):
        n = rng.randint(1, 12)
        span = rng.choice([3, 10, 1000])
        nums = [rng.randint(-span, span) for _ in range(n)]
        expected = brute(nums)
        assert quadratic(nums) == expected, nums
        out.append({"id": f"random-{k}", "args": [nums], "expected": expected})
    r = rng.random
    large = [
        [int(r() * 2 * 10**9) - 10**9 for _ in range(3000)],
        [int(r() * 50) for _ in range(3000)],  # many repeated values
        [i // 2 * 3 + int(r() * 4) for i in range(3000)],  # mostly increasing, with ties
    ]
    for k, nums in enumerate(large):
        out.append({"id": f"large-{k}", "args": [nums], "expected": quadratic(nums)})
    return out
