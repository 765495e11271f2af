# Sorts the words inside each group but prints the groups in the order they first appear in the input.
import sys


def main() -> None:
    data = sys.stdin.read().split()
    n = int(data[0])
    groups = {}
    for word in data[1:1 + n]:
        groups.setdefault("".join(sorted(word)), []).append(word)
    out = [str(len(groups))]
    for words in groups.values():
        words.sort()
        out.append(f"{len(words)} " + " ".join(words))
    print("\n".join(out))


main()
