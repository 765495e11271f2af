"""Hidden cases for {{name}}. Runs in the trusted runner (as root, standard library only), never in the
submission's process. Return JSON values only; compute every expected value with an oracle written
differently from the reference, and assert that the oracle agrees with the hand-written cases."""

import random


def oracle(numbers):
    """Obviously correct, written without the reference's trick."""
    total = 0
    for n in numbers:
        if n % 2 == 0:
            total += n
    return total


FIXED = [
    ([1, 2, 3, 4], 6),
    ([], 0),
    ([-2, -3], -2),
    ([1, 3, 5], 0),
    ([0], 0),
]


def cases(variant):
    out = []
    for i, (numbers, expected) in enumerate(FIXED):
        assert oracle(numbers) == expected, numbers
        out.append({"id": f"fixed-{i}", "args": [numbers], "expected": expected})
    rng = random.Random(1009 + variant)  # seeded: a variant is a different, reproducible draw
    for i in range(30):
        numbers = [rng.randint(-1000, 1000) for _ in range(rng.randint(0, 50))]
        out.append({"id": f"random-{i}", "args": [numbers], "expected": oracle(numbers)})
    big = [rng.randint(-10**9, 10**9) for _ in range(10**5)]
    out.append({"id": "large", "args": [big], "expected": oracle(big)})
    return out


# Optional: def check(args, expected, actual) -> bool, when several answers are right. It sees plain data
# only and must return False (never raise) on a value of the wrong type.
