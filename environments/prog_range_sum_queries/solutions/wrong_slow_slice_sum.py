# Correct answers, but O(n * q): each query sums its slice, which is far too slow for the largest tests.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n, q = int(data[0]), int(data[1])
    a = list(map(int, data[2:2 + n]))
    out = []
    pos = 2 + n
    for _ in range(q):
        l, r = int(data[pos]), int(data[pos + 1])
        pos += 2
        out.append(sum(a[l - 1:r]))
    sys.stdout.write("\n".join(map(str, out)) + "\n")


main()
