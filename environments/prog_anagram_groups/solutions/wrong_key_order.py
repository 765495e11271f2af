# Breaks ties between groups of equal size by the sorted-letters key instead of the smallest word.
import sys


def main() -> None:
    data = sys.stdin.read().split()
    n = int(data[0])
    groups = {}
    for word in data[1:1 + n]:
        groups.setdefault("".join(sorted(word)), []).append(word)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    out = [str(len(ordered))] + [f"{len(ws)} " + " ".join(sorted(ws)) for _, ws in ordered]
    print("\n".join(out))


main()
