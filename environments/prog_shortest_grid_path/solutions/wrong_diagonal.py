# Breadth-first search, but with all eight neighbours: diagonal moves are counted as one move.
import sys
from collections import deque


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
    dist = [[-1] * cols for _ in range(rows)]
    dist[start[0]][start[1]] = 0
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                nr, nc = r + dr, c + dc
                if 0 <= nr < rows and 0 <= nc < cols and dist[nr][nc] < 0 and grid[nr][nc] != "#":
                    dist[nr][nc] = dist[r][c] + 1
                    queue.append((nr, nc))
    print(dist[end[0]][end[1]])


main()
