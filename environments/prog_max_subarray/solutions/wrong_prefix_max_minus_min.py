# Largest prefix sum minus smallest prefix sum, without requiring the smallest one to come first.
import sys
from itertools import accumulate


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    prefix = [0] + list(accumulate(map(int, data[1:1 + n])))
    print(max(prefix[1:]) - min(prefix[:-1]))


main()
