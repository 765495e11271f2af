import sys
from itertools import accumulate
from operator import sub


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    # prefix[j] - min(prefix[0..j-1]) is the best sum of a subarray ending at j (j >= 1).
    prefix = [0]
    prefix += accumulate(map(int, data[1:1 + n]))
    lowest_before = accumulate(prefix[:-1], min)
    sys.stdout.write(f"{max(map(sub, prefix[1:], lowest_before))}\n")


main()
