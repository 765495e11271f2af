"""Hidden cases for count_islands: hand-picked edge cases plus seeded random ones. Expected values come from a
union-find over the land cells (each joined to its right and lower neighbours), with no flood fill and no
recursion, so 200 x 200 grids are no problem."""

import random


def oracle(grid):
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    parent = list(range(rows * cols))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    land = 0
    components = 0
    for r in range(rows):
        row = grid[r]
        below = grid[r + 1] if r + 1 < rows else None
        for c in range(cols):
            if not row[c]:
                continue
            land += 1
            here = r * cols + c
            for there, is_land in ((here + 1, c + 1 < cols and row[c + 1]), (here + cols, below and below[c])):
                if is_land:
                    a, b = find(here), find(there)
                    if a != b:
                        parent[a] = b
                        components += 1
    return land - components


def snake(size):
    """One island that winds through the whole grid: full rows joined at alternating ends."""
    grid = []
    for r in range(size):
        if r % 2 == 0:
            grid.append([1] * size)
        else:
            row = [0] * size
            row[-1 if r % 4 == 1 else 0] = 1
            grid.append(row)
    return grid


FIXED = [
    ([], 0),
    ([[]], 0),
    ([[0]], 0),
    ([[1]], 1),
    ([[1, 1, 1, 1, 0], [1, 1, 0, 1, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], 1),
    ([[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 1]], 3),
    ([[1, 1, 0], [0, 1, 0], [0, 0, 1]], 2),
    ([[1, 0], [0, 1]], 2),  # corners do not connect
    ([[1, 0, 1]], 2),  # no wrapping around the edges
    ([[1], [0], [1]], 2),
    ([[1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1]], 13),
    ([[1, 1, 1], [1, 0, 1], [1, 1, 1]], 1),
    ([[1, 1, 1, 1, 1], [1, 0, 0, 0, 1], [1, 0, 1, 0, 1], [1, 0, 0, 0, 1], [1, 1, 1, 1, 1]], 2),
    ([[1, 0, 1], [1, 0, 1], [1, 1, 1]], 1),  # a U: the two arms meet only at the bottom
    ([[0, 1, 0, 1, 1, 0, 1]], 3),
    ([[0] * 200 for _ in range(200)], 0),
    ([[1] * 200 for _ in range(200)], 1),
    (snake(200), 1),  # a path of about 20,000 cells: deep for a recursive flood fill
    ([[1] * 200], 1),
    ([[1] for _ in range(200)], 1),
]


def cases(variant):
    out = []
    for k, (grid, expected) in enumerate(FIXED):
        assert oracle(grid) == expected, k
        out.append({"id": f"fixed-{k}", "args": [grid], "expected": expected})
    rng = random.Random(4096 + variant)
    for k in range(40):
        rows, cols = rng.randint(1, 15), rng.randint(1, 15)
        density = rng.choice([0.3, 0.5, 0.7])
        grid = [[int(rng.random() < density) for _ in range(cols)] for _ in range(rows)]
        out.append({"id": f"random-{k}", "args": [grid], "expected": oracle(grid)})
    r = rng.random
    for k, density in enumerate([0.45, 0.62]):
        grid = [[int(r() < density) for _ in range(200)] for _ in range(200)]
        out.append({"id": f"large-{k}", "args": [grid], "expected": oracle(grid)})
    return out
