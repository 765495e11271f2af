"""Regenerate tests/cases for prog_max_subarray (deterministic: fixed seeds).

Expected outputs come from oracles independent of solutions/reference.py (which uses prefix sums and a
running minimum): a brute force over every (l, r) pair for small inputs and Kadane's algorithm, written
out as a plain loop, for large ones. Kadane is cross-checked against the brute force on many small random
inputs before anything is written.

The largest test (n = 10^6) uses values in [-10^4, 10^4] to keep the file under 8 MB; other large tests
use the full range of +-10^9.

Run: python3 generator/generate.py
"""

from __future__ import annotations

import random
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"
MAX_N = 1_000_000
MAX_A = 10**9


def brute(a: list[int]) -> int:
    best = a[0]
    for l in range(len(a)):
        total = 0
        for r in range(l, len(a)):
            total += a[r]
            best = max(best, total)
    return best


def kadane(a: list[int]) -> int:
    best = current = a[0]
    for x in a[1:]:
        current = x if current < 0 else current + x
        if current > best:
            best = current
    return best


def oracle(a: list[int]) -> int:
    return brute(a) if len(a) <= 1500 else kadane(a)


def cross_check() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        bound = rng.choice((1, 5, 100, MAX_A))
        shift = rng.choice((0, 0, -bound // 2, bound // 2))
        a = [rng.randint(-bound, bound) + shift for _ in range(rng.randint(1, 25))]
        a = [max(-MAX_A, min(MAX_A, x)) for x in a]
        assert kadane(a) == brute(a), a


def write(case_id: str, a: list[int], expect: int | None = None) -> None:
    assert 1 <= len(a) <= MAX_N and all(-MAX_A <= x <= MAX_A for x in a)
    answer = oracle(a)
    if expect is not None:
        assert answer == expect, (case_id, answer, expect)
    (CASES / f"{case_id}.in").write_text(f"{len(a)}\n{' '.join(map(str, a))}\n")
    (CASES / f"{case_id}.out").write_text(f"{answer}\n")


def main() -> None:
    cross_check()
    CASES.mkdir(parents=True, exist_ok=True)
    for old in CASES.iterdir():
        old.unlink()

    write("01-example", [-2, 1, -3, 4, -1, 2, 1, -5, 4], 6)
    write("02-example", [3, -4, 5, -1, 2], 6)
    write("03-single-negative", [-7], -7)
    write("04-all-negative", [-8, -3, -6, -2, -5, -4], -2)
    write("05-all-zero", [0] * 10, 0)
    write("06-drop-at-end", [5, -10], 5)
    rng = random.Random(7)
    write("07-random-small", [rng.randint(-20, 20) for _ in range(100)])
    rng = random.Random(8)
    write("08-random-medium", [rng.randint(-MAX_A, MAX_A) for _ in range(1500)])
    rng = random.Random(9)
    write("09-large-all-negative", [rng.randint(-MAX_A, -1) for _ in range(200_000)])
    write("10-large-all-max", [MAX_A] * 200_000, 200_000 * MAX_A)
    rng = random.Random(11)
    # A long positive run buried in noise that keeps dipping below zero.
    a = [rng.randint(-MAX_A, MAX_A) for _ in range(200_000)]
    a[50_000:150_000] = [rng.randint(-MAX_A // 2, MAX_A) for _ in range(100_000)]
    write("11-large-mixed", a)
    rng = random.Random(12)
    write("12-max-n-random", [rng.randint(-10_000, 10_000) for _ in range(MAX_N)])
    rng = random.Random(13)
    write("13-max-n-all-negative", [rng.randint(-9_999, -1) for _ in range(MAX_N)])


if __name__ == "__main__":
    main()
