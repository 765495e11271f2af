# Collects the words in a set first, so repeated words are printed only once.
import sys
from collections import defaultdict


def main() -> None:
    data = sys.stdin.read().split()
    n = int(data[0])
    groups = defaultdict(list)
    for word in set(data[1:1 + n]):
        groups["".join(sorted(word))].append(word)
    ordered = sorted((sorted(words) for words in groups.values()), key=lambda ws: (-len(ws), ws[0]))
    out = [str(len(ordered))] + [f"{len(ws)} " + " ".join(ws) for ws in ordered]
    print("\n".join(out))


main()
