"""Hidden cases for two_sum: hand-picked edge cases plus seeded random ones. Every small input is checked by
a brute-force count over all pairs to have exactly one answer; the large ones are built so that only the
planted pair works and are checked by a counting argument over a multiset."""

import random
from collections import Counter


def all_pairs(nums, target):
    """Every pair of indices i < j with nums[i] + nums[j] == target (brute force, obviously correct)."""
    return [[i, j] for i in range(len(nums)) for j in range(i + 1, len(nums)) if nums[i] + nums[j] == target]


def count_pairs(nums, target):
    """The number of index pairs adding up to target, counted over the multiset of values (for large inputs)."""
    counts = Counter(nums)
    total = 0
    for value, k in counts.items():
        other = target - value
        if other == value:
            total += k * (k - 1)
        else:
            total += k * counts.get(other, 0)
    return total // 2


FIXED = [
    ([2, 7, 11, 15], 9, [0, 1]),
    ([3, 2, 4], 6, [1, 2]),  # 3 + 3 would reuse index 0
    ([3, 3], 6, [0, 1]),
    ([1, 2], 3, [0, 1]),
    ([-1, -2, -3, -4, -5], -8, [2, 4]),
    ([0, 4, 3, 0], 0, [0, 3]),
    ([1, 5, 5, 2], 10, [1, 2]),
    ([4, 1, 4], 8, [0, 2]),
    ([10**9, -10**9, 5], 0, [0, 1]),
    ([10**9, 3, 10**9], 2 * 10**9, [0, 2]),
    ([-10**9, 7, -10**9], -2 * 10**9, [0, 2]),
    ([5, 75, 25], 100, [1, 2]),
    ([8, 1, 6, 3, 2], 5, [3, 4]),  # sorting would renumber the indices
    ([7, 0, -7, 2], 0, [0, 2]),
    ([1, 1, 1, 9], 10, None),  # not unique: only used to test the brute-force count below
]


def build(rng, n, low, high, i, j):
    """n values with exactly one pair (i, j) adding up to the target: every other value v is drawn so that
    target - v is not among the values already placed, and later values are checked against it in turn."""
    a, b = rng.randint(low, high), rng.randint(low, high)
    target = a + b
    nums = [0] * n
    nums[i], nums[j] = a, b
    placed = Counter([a, b])
    for k in range(n):
        if k in (i, j):
            continue
        while True:
            v = rng.randint(low, high)
            if placed[target - v] == 0:
                break
        nums[k] = v
        placed[v] += 1
    return nums, target


def cases(variant):
    out = []
    for k, (nums, target, expected) in enumerate(FIXED):
        pairs = all_pairs(nums, target)
        if expected is None:
            assert len(pairs) > 1 and count_pairs(nums, target) == len(pairs)
            continue
        assert pairs == [expected] and count_pairs(nums, target) == 1, (nums, target)
        out.append({"id": f"fixed-{k}", "args": [nums, target], "expected": expected})
    rng = random.Random(4241 + variant)
    for k in range(40):
        n = rng.randint(2, 40)
        i, j = sorted(rng.sample(range(n), 2))
        span = rng.choice([5, 30, 1000, 10**9])
        nums, target = build(rng, n, -span, span, i, j)
        pairs = all_pairs(nums, target)
        assert pairs == [[i, j]], (nums, target)
        out.append({"id": f"random-{k}", "args": [nums, target], "expected": [i, j]})
    n = 20000
    for k, (i, j) in enumerate([(n - 2, n - 1), tuple(sorted(rng.sample(range(n), 2)))]):
        nums, target = build(rng, n, -10**9, 10**9, i, j)
        assert count_pairs(nums, target) == 1 and nums[i] + nums[j] == target
        out.append({"id": f"large-{k}", "args": [nums, target], "expected": [i, j]})
    return out


def check(args, expected, actual):
    """Any order of the two indices is right; exactly one pair exists, so compare as sorted pairs."""
    if not isinstance(actual, list) or len(actual) != 2:
        return False
    if not all(type(x) is int for x in actual):
        return False
    return sorted(actual) == sorted(expected)
