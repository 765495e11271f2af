# Correct answers, but tries every start and extends it: O(n^2), far too slow for the large tests.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    a = list(map(int, data[1:1 + n]))
    best = a[0]
    for i in range(n):
        total = 0
        for j in range(i, n):
            total += a[j]
            if total > best:
                best = total
    print(best)


main()
