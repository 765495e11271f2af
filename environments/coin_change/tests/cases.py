"""Hidden cases for coin_change: hand-picked edge cases plus seeded random ones, every expected value
computed by a breadth-first oracle that shares no code with a dynamic-programming solution."""

import random


def oracle(coins, amount):
    """Fewest coins by breadth-first search over reachable sums (brute force, obviously correct)."""
    if amount == 0:
        return 0
    seen, frontier, steps = {0}, [0], 0
    while frontier:
        steps += 1
        nxt = []
        for total in frontier:
            for coin in coins:
                t = total + coin
                if t == amount:
                    return steps
                if t < amount and t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
    return -1


FIXED = [
    ([1, 2, 5], 11, 3),
    ([2], 3, -1),
    ([1], 0, 0),
    ([1], 1, 1),
    ([1], 2, 2),
    ([1, 3, 4], 6, 2),  # greedy takes 4 + 1 + 1
    ([3, 7], 11, -1),
    ([5, 3], 7, -1),
    ([186, 419, 83, 408], 6249, 20),
    ([2, 5, 10, 1], 27, 4),
    ([7], 10000, -1),
    ([1, 7, 10], 14, 2),  # greedy takes 10 + 1 * 4
    ([9, 6, 5, 1], 11, 2),
    ([2, 4, 6, 8], 9999, -1),
]


def cases(variant):
    out = []
    for i, (coins, amount, expected) in enumerate(FIXED):
        assert oracle(coins, amount) == expected, (coins, amount)
        out.append({"id": f"fixed-{i}", "args": [coins, amount], "expected": expected})
    rng = random.Random(7919 + variant)
    for i in range(40):
        coins = rng.sample(range(1, 40), rng.randint(1, 5))
        amount = rng.randint(0, 400)
        out.append({"id": f"random-{i}", "args": [coins, amount], "expected": oracle(coins, amount)})
    for i in range(3):
        coins = rng.sample(range(2, 500), rng.randint(4, 12))
        amount = rng.randint(5000, 10000)
        out.append({"id": f"large-{i}", "args": [coins, amount], "expected": oracle(coins, amount)})
    return out
