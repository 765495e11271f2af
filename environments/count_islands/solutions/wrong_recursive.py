def count_islands(grid: list[list[int]]) -> int:
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    seen = [[False] * cols for _ in range(rows)]

    def sink(y, x):
        if not (0 <= y < rows and 0 <= x < cols) or grid[y][x] != 1 or seen[y][x]:
            return
        seen[y][x] = True
        sink(y + 1, x)
        sink(y - 1, x)
        sink(y, x + 1)
        sink(y, x - 1)

    islands = 0
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == 1 and not seen[r][c]:
                islands += 1
                sink(r, c)
    return islands
