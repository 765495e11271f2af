import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    rows, cols = int(data[0]), int(data[1])
    width = cols + 1  # one wall column on the right also guards the left edge of the next row
    # 1 = open and not yet visited. A wall row above and below, and the wall column, keep every move in range.
    free = bytearray(width) + bytearray(width * rows) + bytearray(width)
    start = end = -1
    table = bytes.maketrans(b".SE#", b"\x01\x01\x01\x00")
    for r in range(rows):
        line = data[2 + r]
        base = width * (r + 1)
        free[base:base + cols] = line.translate(table)
        i = line.find(b"S")
        if i >= 0:
            start = base + i
        i = line.find(b"E")
        if i >= 0:
            end = base + i
    frontier = [start]
    free[start] = 0
    steps = 0
    while frontier:
        steps += 1
        following = []
        push = following.append
        for v in frontier:
            for u in (v - 1, v + 1, v - width, v + width):
                if free[u]:
                    if u == end:
                        sys.stdout.write(f"{steps}\n")
                        return
                    free[u] = 0
                    push(u)
        frontier = following
    sys.stdout.write("-1\n")


main()
