import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    groups: dict[bytes, list[bytes]] = {}
    for word in data[1:1 + n]:
        key = bytes(sorted(word))
        group = groups.get(key)
        if group is None:
            groups[key] = [word]
        else:
            group.append(word)
    ordered = []
    for words in groups.values():
        words.sort()
        ordered.append((-len(words), words[0], words))
    ordered.sort(key=lambda item: (item[0], item[1]))
    lines = [str(len(ordered)).encode()]
    lines += [str(len(words)).encode() + b" " + b" ".join(words) for _, _, words in ordered]
    sys.stdout.write(b"\n".join(lines).decode() + "\n")


main()
