# Uses 3.14 for pi: off by about 0.05 % of the area, far beyond the 1e-6 tolerance.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    out = ["%.6f" % (3.14 * r * r) for r in map(float, data[1:1 + t])]
    sys.stdout.write("\n".join(out) + "\n")


main()
