# Kadane's algorithm with the best sum started at 0: it silently allows the empty subarray, so an array of
# only negative numbers gets 0 instead of its largest element.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    best = current = 0
    for x in map(int, data[1:1 + n]):
        current = max(0, current + x)
        best = max(best, current)
    print(best)


main()
