# Depth-first search: reports the length of the first path it happens to find, which is not the shortest.
import sys


def main() -> None:
    data = sys.stdin.buffer.read().split()
    rows, cols = int(data[0]), int(data[1])
    grid = [data[2 + r].decode() for r in range(rows)]
    start = end = None
    for r, line in enumerate(grid):
        if "S" in line:
            start = (r, line.index("S"))
        if "E" in line:
            end = (r, line.index("E"))
    seen = [[False] * cols for _ in range(rows)]
    seen[start[0]][start[1]] = True
    stack = [(start[0], start[1], 0)]
    while stack:
        r, c, d = stack.pop()
        if (r, c) == end:
            print(d)
            return
        for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and not seen[nr][nc] and grid[nr][nc] != "#":
                seen[nr][nc] = True
                stack.append((nr, nc, d + 1))
    print(-1)


main()
