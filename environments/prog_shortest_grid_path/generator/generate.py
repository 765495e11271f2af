"""Regenerate tests/cases for prog_shortest_grid_path (deterministic: fixed seeds).

Expected outputs come from oracles independent of solutions/reference.py: on small grids a Bellman-Ford
style relaxation (repeat "dist[v] = min(dist[v], dist[u] + 1)" over every pair of neighbours until nothing
changes), on large grids a breadth-first search over a 2-D distance table with a deque. The BFS is
cross-checked against the relaxation on many small random grids before anything is written.

Run: python3 generator/generate.py
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"
MAX_SIDE = 1000
STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))
Grid = list[list[str]]


def find(grid: Grid, char: str) -> tuple[int, int]:
    [pos] = [(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == char]
    return pos


def relax(grid: Grid) -> int:
    rows, cols = len(grid), len(grid[0])
    inf = rows * cols + 1
    dist = [[inf] * cols for _ in range(rows)]
    sr, sc = find(grid, "S")
    er, ec = find(grid, "E")
    dist[sr][sc] = 0
    changed = True
    while changed:
        changed = False
        for r in range(rows):
            for c in range(cols):
                if grid[r][c] == "#" or dist[r][c] == inf:
                    continue
                for dr, dc in STEPS:
                    nr, nc = r + dr, c + dc
                    if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and dist[nr][nc] > dist[r][c] + 1:
                        dist[nr][nc] = dist[r][c] + 1
                        changed = True
    return -1 if dist[er][ec] == inf else dist[er][ec]


def bfs(grid: Grid) -> int:
    rows, cols = len(grid), len(grid[0])
    dist = [[-1] * cols for _ in range(rows)]
    sr, sc = find(grid, "S")
    er, ec = find(grid, "E")
    dist[sr][sc] = 0
    queue = deque([(sr, sc)])
    while queue:
        r, c = queue.popleft()
        for dr, dc in STEPS:
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and dist[nr][nc] < 0 and grid[nr][nc] != "#":
                dist[nr][nc] = dist[r][c] + 1
                queue.append((nr, nc))
    return dist[er][ec]


def oracle(grid: Grid) -> int:
    return relax(grid) if len(grid) * len(grid[0]) <= 2500 else bfs(grid)


def parse(text: str) -> Grid:
    return [list(line) for line in text.strip().splitlines()]


def random_grid(rng: random.Random, rows: int, cols: int, wall: float) -> Grid:
    grid = [["#" if rng.random() < wall else "." for _ in range(cols)] for _ in range(rows)]
    cells = rng.sample(range(rows * cols), 2)
    grid[cells[0] // cols][cells[0] % cols] = "S"
    grid[cells[1] // cols][cells[1] % cols] = "E"
    return grid


def maze(rng: random.Random, rows: int, cols: int) -> Grid:
    """A perfect maze (randomised depth-first carving) on the cells with even coordinates."""
    grid = [["#"] * cols for _ in range(rows)]
    grid[0][0] = "."
    stack = [(0, 0)]
    while stack:
        r, c = stack[-1]
        options = [(r + 2 * dr, c + 2 * dc, dr, dc) for dr, dc in STEPS
                   if 0 <= r + 2 * dr < rows and 0 <= c + 2 * dc < cols and grid[r + 2 * dr][c + 2 * dc] == "#"]
        if not options:
            stack.pop()
            continue
        nr, nc, dr, dc = rng.choice(options)
        grid[r + dr][c + dc] = "."
        grid[nr][nc] = "."
        stack.append((nr, nc))
    return grid


def cross_check() -> None:
    rng = random.Random(1)
    for _ in range(400):
        rows, cols = rng.randint(1, 9), rng.randint(1, 9)
        if rows * cols < 2:
            continue
        grid = random_grid(rng, rows, cols, rng.choice((0.0, 0.2, 0.35, 0.5)))
        assert bfs(grid) == relax(grid), grid
    for _ in range(20):
        grid = maze(rng, 15, 21)
        grid[0][0], grid[14][20] = "S", "E"
        assert bfs(grid) == relax(grid) > 0


def write(case_id: str, grid: Grid, expect: int | None = None) -> None:
    rows, cols = len(grid), len(grid[0])
    assert 1 <= rows <= MAX_SIDE and 1 <= cols <= MAX_SIDE and rows * cols >= 2
    assert all(len(row) == cols and set(row) <= set(".#SE") for row in grid)
    assert sum(row.count("S") for row in grid) == 1 and sum(row.count("E") for row in grid) == 1
    answer = oracle(grid)
    if expect is not None:
        assert answer == expect, (case_id, answer, expect)
    (CASES / f"{case_id}.in").write_text(f"{rows} {cols}\n" + "".join("".join(row) + "\n" for row in grid))
    (CASES / f"{case_id}.out").write_text(f"{answer}\n")
    print(f"{case_id}: {rows}x{cols} -> {answer}")


def main() -> None:
    cross_check()
    CASES.mkdir(parents=True, exist_ok=True)
    for old in CASES.iterdir():
        old.unlink()
    n = MAX_SIDE

    write("01-example", parse("S..#\n.#..\n...E"), 5)
    write("02-example", parse("S#.\n##.\n..E"), -1)
    write("03-adjacent", parse("SE"), 1)
    write("04-no-diagonal-moves", parse("S#\n#E"), -1)
    write("05-detour", parse("S.#...\n.##.#.\n...#E.\n.#....\n"), 8)
    rng = random.Random(6)
    write("06-random-small", random_grid(rng, 12, 17, 0.3))
    rng = random.Random(7)
    write("07-open-medium", random_grid(rng, 60, 45, 0.0))
    rng = random.Random(8)
    grid = maze(rng, 39, 61)
    grid[0][0], grid[38][60] = "S", "E"
    write("08-maze-medium", grid)
    row = [["."] * n]
    row[0][0], row[0][n - 1] = "E", "S"
    write("09-single-row", row, n - 1)
    column = [["."] for _ in range(n)]
    column[n // 2][0] = "#"
    column[0][0], column[n - 1][0] = "S", "E"
    write("10-single-column-blocked", column, -1)

    grid = [["."] * n for _ in range(n)]
    grid[0][0], grid[n - 1][n - 1] = "S", "E"
    write("11-max-open-corners", grid, 2 * (n - 1))
    rng = random.Random(12)
    grid = random_grid(rng, n, n, 0.3)
    write("12-max-random-walls", grid)
    # Serpentine: every other row is a wall with one gap, alternately at the right and left end.
    grid = [["."] * n if r % 2 == 0 else ["#"] * (n - 1) + ["."] if r % 4 == 1 else ["."] + ["#"] * (n - 1)
            for r in range(n)]
    grid[0][0], grid[n - 2][n - 1] = "S", "E"
    write("13-max-serpentine", grid)
    rng = random.Random(14)
    grid = maze(rng, n - 1, n - 1)
    for row in grid:
        row.append(".")
    grid.append(["."] * n)
    grid[rng.randrange(0, n - 1, 2)][rng.randrange(0, n - 1, 2)] = "S"
    grid[n - 1][0] = "E"
    write("14-max-maze", grid)
    # Open grid with E walled off in a corner: the whole grid is explored before the answer is known.
    grid = [["."] * n for _ in range(n)]
    grid[0][0], grid[n - 1][n - 1] = "S", "E"
    grid[n - 2][n - 1] = grid[n - 1][n - 2] = "#"
    write("15-max-unreachable", grid, -1)


if __name__ == "__main__":
    main()
