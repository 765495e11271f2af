import sys
from math import pi


def main() -> None:
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    out = ["%.6f" % (pi * r * r) for r in map(float, data[1:1 + t])]
    sys.stdout.write("\n".join(out) + "\n")


main()
