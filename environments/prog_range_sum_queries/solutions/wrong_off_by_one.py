# Prefix sums, but the left end is treated as exclusive: prefix[r] - prefix[l] drops a_l.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n, q = int(data[0]), int(data[1])
    prefix = [0] * (n + 1)
    for i in range(n):
        prefix[i + 1] = prefix[i] + int(data[2 + i])
    out = []
    pos = 2 + n
    for _ in range(q):
        l, r = int(data[pos]), int(data[pos + 1])
        pos += 2
        out.append(prefix[r] - prefix[l])
    sys.stdout.write("\n".join(map(str, out)) + "\n")


main()
