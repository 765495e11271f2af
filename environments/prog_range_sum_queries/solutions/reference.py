import sys
from itertools import accumulate


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n, q = int(data[0]), int(data[1])
    prefix = [0]
    prefix += accumulate(map(int, data[2:2 + n]))
    queries = data[2 + n:2 + n + 2 * q]
    answers = [prefix[r] - prefix[l - 1] for l, r in zip(map(int, queries[0::2]), map(int, queries[1::2]))]
    sys.stdout.write("\n".join(map(str, answers)) + "\n")


main()
