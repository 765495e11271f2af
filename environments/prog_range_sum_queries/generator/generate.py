"""Regenerate tests/cases for prog_range_sum_queries (deterministic: fixed seeds).

Expected outputs come from an oracle independent of solutions/reference.py: a direct slice sum for small
inputs and a Fenwick tree for large ones. The Fenwick tree is cross-checked against the direct sum on many
small random inputs before anything is written.

Run: python3 generator/generate.py
"""

from __future__ import annotations

import random
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"
MAX_N = MAX_Q = 200_000
MAX_A = 10**9


def brute(a: list[int], queries: list[tuple[int, int]]) -> list[int]:
    return [sum(a[l - 1:r]) for l, r in queries]


def fenwick(a: list[int], queries: list[tuple[int, int]]) -> list[int]:
    n = len(a)
    tree = [0] * (n + 1)
    for i, value in enumerate(a, 1):
        while i <= n:
            tree[i] += value
            i += i & -i

    def prefix(i: int) -> int:
        total = 0
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total

    return [prefix(r) - prefix(l - 1) for l, r in queries]


def oracle(a: list[int], queries: list[tuple[int, int]]) -> list[int]:
    if len(a) * len(queries) <= 5_000_000:
        return brute(a, queries)
    return fenwick(a, queries)


def random_queries(rng: random.Random, n: int, q: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(q):
        l, r = rng.randint(1, n), rng.randint(1, n)
        out.append((min(l, r), max(l, r)))
    return out


def cross_check() -> None:
    rng = random.Random(1)
    for _ in range(500):
        n = rng.randint(1, 40)
        a = [rng.randint(-MAX_A, MAX_A) for _ in range(n)]
        queries = random_queries(rng, n, rng.randint(1, 40))
        assert fenwick(a, queries) == brute(a, queries), (a, queries)


def write(case_id: str, a: list[int], queries: list[tuple[int, int]]) -> None:
    n, q = len(a), len(queries)
    assert 1 <= n <= MAX_N and 1 <= q <= MAX_Q
    assert all(-MAX_A <= x <= MAX_A for x in a)
    assert all(1 <= l <= r <= n for l, r in queries)
    lines = [f"{n} {q}", " ".join(map(str, a))] + [f"{l} {r}" for l, r in queries]
    (CASES / f"{case_id}.in").write_text("\n".join(lines) + "\n")
    (CASES / f"{case_id}.out").write_text("\n".join(map(str, oracle(a, queries))) + "\n")


def main() -> None:
    cross_check()
    CASES.mkdir(parents=True, exist_ok=True)
    for old in CASES.iterdir():
        old.unlink()

    write("01-example", [1, 2, 3, 4, 5], [(1, 5), (2, 4), (3, 3)])
    write("02-example", [-3, 7, -2, 10], [(1, 1), (1, 2), (2, 4), (1, 4)])
    write("03-single-element", [-42], [(1, 1)])
    write("04-every-range", [5, -1, 0, 8, -9, 3], [(l, r) for l in range(1, 7) for r in range(l, 7)])
    rng = random.Random(4)
    a = [rng.randint(-10, 10) for _ in range(10)]
    write("05-random-tiny", a, random_queries(rng, 10, 30))
    rng = random.Random(5)
    a = [rng.randint(-MAX_A, MAX_A) for _ in range(1000)]
    write("06-random-medium", a, random_queries(rng, 1000, 1000))
    rng = random.Random(7)
    # Long ranges over extreme values: sums reach about 2*10^14; an O(n*q) answer must add up about
    # 4*10^10 numbers here.
    a = [MAX_A if rng.random() < 0.97 else -MAX_A for _ in range(MAX_N)]
    queries = [(rng.randint(1, 50), rng.randint(MAX_N - 50, MAX_N)) for _ in range(MAX_Q)]
    queries[:4] = [(1, MAX_N), (1, MAX_N // 2), (MAX_N // 2 + 1, MAX_N), (MAX_N, MAX_N)]
    write("07-max-long-ranges", a, queries)
    rng = random.Random(8)
    a = [rng.randint(-MAX_A, MAX_A) for _ in range(MAX_N)]
    write("08-max-random", a, random_queries(rng, MAX_N, MAX_Q))
    rng = random.Random(9)
    # Mostly -10^9, half of the queries of length 1, the rest random.
    a = [-MAX_A if rng.random() < 0.9 else rng.randint(-MAX_A, MAX_A) for _ in range(MAX_N)]
    queries = [(l, l) for l in (rng.randint(1, MAX_N) for _ in range(MAX_Q // 2))]
    queries += random_queries(rng, MAX_N, MAX_Q - len(queries))
    rng.shuffle(queries)
    write("09-max-mixed-lengths", a, queries)

if __name__ == "__main__":
    main()
