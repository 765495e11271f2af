"""Regenerate tests/cases for prog_circle_area (deterministic: fixed seeds).

Expected outputs are computed exactly, independently of solutions/reference.py: the radius is read as a
Decimal (it has at most 3 decimals, so it is exact), pi comes from Machin's formula to 60 digits, and the
area pi * r^2 is rounded half-even to 6 decimals. Random radii whose exact area lies so near a rounding
tie that double precision could round it the other way are redrawn (see near_tie), so a careful float
computation prints exactly the expected digits and the tolerance is never needed for a right answer.
tests/config.json sets the 1e-6 float tolerance.

Run: python3 generator/generate.py
"""

from __future__ import annotations

import math
import random
from decimal import ROUND_HALF_EVEN, Decimal, getcontext
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"
MAX_T = 100_000
MAX_MILLI = 10_000_000  # r <= 10^4, in thousandths
getcontext().prec = 80
MICRO = Decimal("0.000001")


def arctan_inverse(x: int) -> Decimal:
    """arctan(1/x) by its Taylor series."""
    total, term, n, sign = Decimal(0), Decimal(1) / x, 1, 1
    x2 = x * x
    while term > Decimal(10) ** -75:
        total += sign * term / n
        term /= x2
        n += 2
        sign = -sign
    return total


PI = 16 * arctan_inverse(5) - 4 * arctan_inverse(239)
assert str(PI).startswith("3.14159265358979323846264338327950288419716939937510582097494459")


def exact_area(radius: str) -> Decimal:
    r = Decimal(radius)
    return PI * r * r


def near_tie(radius: str) -> bool:
    """True when the exact area is so close to a rounding tie at the 6th decimal that a double-precision
    computation such as pi * r * r might round it the other way. The bound: math.pi, float(r) (unless r
    is exactly a double) and each of the two products are off by at most 2^-53 relative."""
    area = exact_area(radius)
    micro_units = area / MICRO
    exact_double = (Decimal(radius) * 8) == (Decimal(radius) * 8).to_integral_value()
    relative = Decimal(3 if exact_double else 5) * Decimal(2) ** -53 * Decimal("1.01")
    margin = Decimal("0.001") + area * relative / MICRO  # in units of 1e-6; below 0.2 for the largest areas
    return abs(micro_units - micro_units.to_integral_value(rounding="ROUND_FLOOR") - Decimal("0.5")) < margin


def oracle(radius: str) -> str:
    return str(exact_area(radius).quantize(MICRO, rounding=ROUND_HALF_EVEN))


def fmt(milli: int, rng: random.Random | None = None) -> str:
    """The radius milli/1000 written with between the needed and 3 decimals."""
    whole, frac = divmod(milli, 1000)
    digits = f"{frac:03d}".rstrip("0")
    if rng is not None and rng.random() < 0.3:
        digits = digits.ljust(rng.randint(len(digits), 3), "0")
    return f"{whole}.{digits}" if digits else str(whole)


def random_radius(rng: random.Random, low: int, high: int, step: int = 1) -> str:
    """A random radius in [low, high] thousandths, a multiple of step thousandths, away from rounding ties."""
    while True:
        radius = fmt(rng.randrange(low, high + 1, step), rng)
        if not near_tie(radius):
            return radius


def self_check() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        radius = random_radius(rng, 0, MAX_MILLI)
        expected = float(oracle(radius))
        area = math.pi * float(radius) ** 2
        assert math.isclose(area, expected, rel_tol=1e-9, abs_tol=6e-7), (radius, area, expected)
        assert "%.6f" % area == oracle(radius), (radius, area)
    assert oracle("1") == "3.141593" and oracle("0.001") == "0.000003" and oracle("0") == "0.000000"


def write(case_id: str, radii: list[str]) -> None:
    assert 1 <= len(radii) <= MAX_T
    for radius in radii:
        assert Decimal(radius) >= 0 and Decimal(radius) <= 10_000 and -Decimal(radius).as_tuple().exponent <= 3
        assert not near_tie(radius), radius
    (CASES / f"{case_id}.in").write_text(f"{len(radii)}\n" + "".join(r + "\n" for r in radii))
    (CASES / f"{case_id}.out").write_text("".join(oracle(r) + "\n" for r in radii))


def main() -> None:
    self_check()
    CASES.mkdir(parents=True, exist_ok=True)
    for old in CASES.iterdir():
        if old.suffix in (".in", ".out"):
            old.unlink()

    write("01-example", ["1", "2.5", "0"])
    write("02-example", ["10", "0.001"])
    write("03-zero-radius", ["0", "0.0", "0.000", "0.00"])
    # With pi = 3.14 (or 22/7, or 3.1416) every one of these is off by far more than the tolerance.
    write("04-pi-precision", ["1", "2", "3", "5", "10", "100", "1000", "10000", "1.000", "7.5"])
    rng = random.Random(5)
    write("05-tiny-radii", ["0.001", "0.002", "0.01", "0.05", "0.1", "0.123", "0.3"]
          + [random_radius(rng, 1, 600) for _ in range(50)])
    rng = random.Random(6)
    write("06-random-fractional", [random_radius(rng, 0, 100_000) for _ in range(1000)])
    rng = random.Random(7)
    write("07-random-integers", [random_radius(rng, 0, MAX_MILLI, 1000) for _ in range(1000)])
    write("08-largest-radii", ["10000", "10000.000", "9999.998", "9999.75", "9999", "8765.431", "5000.01", "1234.567"])
    rng = random.Random(9)
    write("09-max-random", [random_radius(rng, 0, rng.choice((1000, 100_000, MAX_MILLI))) for _ in range(MAX_T)])
    rng = random.Random(10)
    write("10-max-small-radii", [random_radius(rng, 0, 999) for _ in range(MAX_T)])


if __name__ == "__main__":
    main()
