"""Regenerate tests/cases deterministically: python3 generator/generate.py (from the environment's folder).
Every expected output comes from an oracle, never from the reference solution."""

import random
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"


def oracle(numbers):
    total = 0
    for n in numbers:
        total += n
    return total


def write(case_id, numbers):
    (CASES / f"{case_id}.in").write_text(f"{len(numbers)}\n{' '.join(map(str, numbers))}\n")
    (CASES / f"{case_id}.out").write_text(f"{oracle(numbers)}\n")


def main():
    CASES.mkdir(parents=True, exist_ok=True)
    rng = random.Random(4242)
    write("01-example", [1, 2, 3])
    write("02-single", [-7])
    write("03-negatives", [-10**9] * 5)
    for i in range(4, 8):
        write(f"{i:02d}-random", [rng.randint(-10**9, 10**9) for _ in range(rng.randint(1, 1000))])
    write("08-largest", [rng.randint(-10**9, 10**9) for _ in range(2 * 10**5)])


if __name__ == "__main__":
    main()
