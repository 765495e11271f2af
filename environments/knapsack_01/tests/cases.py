"""Hidden cases for knapsack_01: hand-picked edge cases plus seeded random ones. Small inputs (n <= 14) are
solved by brute force over every subset; the large ones by a dynamic program over total value (the lightest
way to reach each total value), which is not the reference's table over capacities."""

import random


def brute(weights, values, capacity):
    """Enumerate every subset as a (weight, value) pair and keep the best one that fits."""
    subsets = [(0, 0)]
    for w, v in zip(weights, values):
        subsets += [(sw + w, sv + v) for sw, sv in subsets]
    return max(sv for sw, sv in subsets if sw <= capacity)


def by_value(weights, values, capacity):
    """lightest[t] = the least weight of a set of items worth exactly t."""
    infinity = float("inf")
    lightest = [0] + [infinity] * sum(values)
    for w, v in zip(weights, values):
        if v == 0:
            continue
        lightest[v:] = [min(a, b + w) for a, b in zip(lightest[v:], lightest)]
    return max(t for t, weight in enumerate(lightest) if weight <= capacity)


FIXED = [
    ([1, 3, 4, 5], [1, 4, 5, 7], 7, 9),
    ([10, 20, 30], [60, 100, 120], 50, 220),  # the best value per weight (item 0) is not in the optimum
    ([5], [10], 4, 0),
    ([5], [10], 5, 10),
    ([], [], 10, 0),
    ([], [], 0, 0),
    ([2], [3], 0, 0),
    ([2], [3], 4, 3),  # each item at most once
    ([1, 2, 3], [6, 10, 12], 5, 22),
    ([1, 1, 1], [0, 0, 0], 3, 0),
    ([4, 5, 1], [1, 2, 3], 4, 3),
    ([10**4], [10**4], 10**4, 10**4),
    ([10**4, 10**4], [1, 2], 10**4 - 1, 0),
    ([3, 4, 5], [30, 50, 60], 8, 90),
    ([6, 3, 4, 2], [30, 14, 16, 9], 10, 46),
    ([1] * 100, [1] * 100, 10**4, 100),
    ([7, 7, 7, 7], [1, 2, 3, 4], 21, 9),
]


def cases(variant):
    out = []
    for k, (weights, values, capacity, expected) in enumerate(FIXED):
        assert by_value(weights, values, capacity) == expected, (weights, values, capacity)
        assert len(weights) > 14 or brute(weights, values, capacity) == expected
        out.append({"id": f"fixed-{k}", "args": [weights, values, capacity], "expected": expected})
    rng = random.Random(1729 + variant)
    for k in range(40):
        n = rng.randint(1, 12)
        top = rng.choice([5, 30, 1000])
        weights = [rng.randint(1, top) for _ in range(n)]
        values = [rng.randint(0, rng.choice([10, 100])) for _ in range(n)]
        capacity = rng.randint(0, sum(weights))
        expected = brute(weights, values, capacity)
        assert by_value(weights, values, capacity) == expected
        out.append({"id": f"random-{k}", "args": [weights, values, capacity], "expected": expected})
    for k in range(2):
        weights = [rng.randint(1, 1000) for _ in range(100)]
        values = [rng.randint(0, 30) for _ in range(100)]
        capacity = rng.randint(9000, 10**4) if k else rng.randint(2000, 5000)
        out.append({"id": f"large-{k}", "args": [weights, values, capacity],
                    "expected": by_value(weights, values, capacity)})
    return out
