"""Hidden cases for lru_cache_ops: hand-picked edge cases plus seeded random ones. Expected values come from a
plain list simulation (keys kept in recency order, oldest first) that uses no ordered dictionary."""

import random


def oracle(capacity, ops):
    """Simulate the cache with two parallel lists ordered from least to most recently used."""
    keys, values, out = [], [], []
    for op in ops:
        key = op[1]
        try:
            position = keys.index(key)
        except ValueError:
            position = -1
        if op[0] == "get":
            if position < 0:
                out.append(-1)
                continue
            value = values.pop(position)
            keys.pop(position)
            keys.append(key)
            values.append(value)
            out.append(value)
        else:
            if position >= 0:
                keys.pop(position)
                values.pop(position)
            elif len(keys) == capacity:
                keys.pop(0)
                values.pop(0)
            keys.append(key)
            values.append(op[2])
    return out


def P(key, value):
    return ["put", key, value]


def G(key):
    return ["get", key]


FIXED = [
    (2, [P(1, 1), P(2, 2), G(1), P(3, 3), G(2), P(4, 4), G(1), G(3), G(4)], [1, -1, -1, 3, 4]),
    (1, [G(5), P(5, 0), G(5)], [-1, 0]),
    (3, [], []),
    (2, [G(0), G(1), G(0)], [-1, -1, -1]),
    (1, [P(2, 1), G(2), P(3, 2), G(2), G(3)], [1, -1, 2]),
    (2, [P(1, 1), P(2, 2), P(1, 10), P(3, 3), G(1), G(2), G(3)], [10, -1, 3]),  # a put refreshes its key
    (2, [P(1, 1), P(2, 2), P(2, 20), G(1), G(2)], [1, 20]),  # updating a cached key evicts nothing
    (2, [P(1, 1), P(2, 2), G(1), P(3, 3), G(2), G(1), G(3)], [1, -1, 1, 3]),  # a get refreshes its key
    (2, [P(1, 1), P(2, 2), G(9), P(3, 3), G(1), G(2)], [-1, -1, 2]),  # a missed get refreshes nothing
    (1, [P(7, 1), P(7, 2), P(7, 3), G(7)], [3]),
    (3, [P(1, 1), P(2, 2), P(3, 3), P(4, 4), G(4), G(3), G(2), G(1), P(5, 5), G(1), G(2), G(3), G(4), G(5)],
     [4, 3, 2, -1, -1, 2, 3, -1, 5]),
    (3, [P(0, 100000), P(10000, 0), G(10000), G(0)], [0, 100000]),
    (1000, [P(k, k) for k in range(1000)] + [G(0), P(1000, 1000), G(1), G(0), G(1000)], [0, -1, 0, 1000]),
]


def random_ops(rng, count, key_range, get_share):
    return [G(rng.randrange(key_range)) if rng.random() < get_share
            else P(rng.randrange(key_range), rng.randint(0, 10**5)) for _ in range(count)]


def cases(variant):
    out = []
    for k, (capacity, ops, expected) in enumerate(FIXED):
        assert oracle(capacity, ops) == expected, (capacity, ops)
        out.append({"id": f"fixed-{k}", "args": [capacity, ops], "expected": expected})
    rng = random.Random(31337 + variant)
    for k in range(40):
        capacity = rng.randint(1, 6)
        ops = random_ops(rng, rng.randint(1, 60), rng.randint(capacity, 3 * capacity + 2), rng.choice([0.3, 0.5, 0.7]))
        out.append({"id": f"random-{k}", "args": [capacity, ops], "expected": oracle(capacity, ops)})
    for k, (capacity, count, key_range) in enumerate([(50, 5000, 80), (1000, 12000, 1300)]):
        ops = random_ops(rng, count, key_range, 0.5)
        out.append({"id": f"large-{k}", "args": [capacity, ops], "expected": oracle(capacity, ops)})
    return out
