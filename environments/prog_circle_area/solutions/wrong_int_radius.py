# Reads each radius as an integer, dropping its fractional part.
import math
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    out = ["%.6f" % (math.pi * r * r) for r in (int(float(x)) for x in data[1:1 + t])]
    sys.stdout.write("\n".join(out) + "\n")


main()
