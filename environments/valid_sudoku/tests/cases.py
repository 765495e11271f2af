"""Hidden cases for valid_sudoku: hand-picked edge cases plus seeded random ones. Expected values come from
comparing every pair of filled cells (same digit and same row, column or box means invalid), with no sets
or counters per unit."""

import random


def oracle(board):
    filled = [(r, c, board[r][c]) for r in range(9) for c in range(9) if board[r][c] != "."]
    for i, (r1, c1, d1) in enumerate(filled):
        for r2, c2, d2 in filled[i + 1:]:
            if d1 == d2 and (r1 == r2 or c1 == c2 or (r1 // 3 == r2 // 3 and c1 // 3 == c2 // 3)):
                return False
    return True


def parse(rows):
    return [list(row) for row in rows]


EXAMPLE = ["53..7....", "6..195...", ".98....6.", "8...6...3", "4..8.3..1", "7...2...6", ".6....28.", "...419..5",
           "....8..79"]
SOLVED = ["534678912", "672195348", "198342567", "859761423", "426853791", "713924856", "961537284", "287419635",
          "345286179"]
EMPTY = ["." * 9] * 9


def with_cell(rows, r, c, digit):
    rows = list(rows)
    rows[r] = rows[r][:c] + digit + rows[r][c + 1:]
    return rows


FIXED = [
    (EXAMPLE, True),
    (with_cell(EXAMPLE, 0, 0, "8"), False),
    (EMPTY, True),
    (with_cell(EMPTY, 4, 4, "5"), True),
    (SOLVED, True),  # a full valid board: boxes (0, 1) and (1, 0) hold the same digits, as they must
    (with_cell(with_cell(EMPTY, 2, 0, "7"), 2, 8, "7"), False),  # row only
    (with_cell(with_cell(EMPTY, 0, 5, "3"), 8, 5, "3"), False),  # column only
    (with_cell(with_cell(EMPTY, 3, 3, "9"), 5, 5, "9"), False),  # box only
    (with_cell(with_cell(EMPTY, 6, 6, "1"), 8, 8, "1"), False),  # box only, bottom right
    (with_cell(with_cell(EMPTY, 0, 3, "4"), 3, 0, "4"), True),  # boxes (0, 1) and (1, 0) are different boxes
    (with_cell(with_cell(EMPTY, 0, 2, "2"), 0, 3, "2"), False),
    (with_cell(with_cell(EMPTY, 1, 1, "6"), 4, 4, "6"), True),  # a diagonal is not a unit
    (with_cell(with_cell(EMPTY, 2, 2, "6"), 3, 3, "6"), True),
    (with_cell(with_cell(SOLVED, 0, 0, "6"), 0, 2, "5"), False),  # two cells of a row swapped: columns break
    (with_cell(SOLVED, 8, 8, "."), True),
    (["123456789", "456789123", "789123456", "214365897", "365897214", "897214365", "531642978", "642978531",
      "978531642"], True),
    (["123456789", "912345678", "891234567", "789123456", "678912345", "567891234", "456789123", "345678912",
      "234567891"], False),  # a Latin square: rows and columns fine, boxes not
    (["........1", "........2", "........3", "........4", "........5", "........6", "........7", "........8",
      "........9"], True),
    (["1........", ".1.......", "..1......", "...1.....", "....1....", ".....1...", "......1..", ".......1.",
      "........1"], False),
]


def solved_board(rng):
    """A random full valid board: a pattern solution with digits relabelled and rows, columns, bands and
    stacks shuffled (each keeps it valid)."""
    digits = list("123456789")
    rng.shuffle(digits)
    bands = rng.sample(range(3), 3)
    stacks = rng.sample(range(3), 3)
    rows = [3 * b + r for b in bands for r in rng.sample(range(3), 3)]
    cols = [3 * s + c for s in stacks for c in rng.sample(range(3), 3)]
    return [[digits[(3 * (r % 3) + r // 3 + c) % 9] for c in cols] for r in rows]


def cases(variant):
    out = []
    for k, (rows, expected) in enumerate(FIXED):
        board = parse(rows)
        assert oracle(board) is expected, k
        out.append({"id": f"fixed-{k}", "args": [board], "expected": expected})
    rng = random.Random(1999 + variant)
    for k in range(40):
        solution = solved_board(rng)
        keep = rng.choice([0.2, 0.4, 0.7, 1.0])
        board = [[d if rng.random() < keep else "." for d in row] for row in solution]
        if k % 2:  # put a digit somewhere it may clash: in an empty or a filled cell
            r, c = rng.randrange(9), rng.randrange(9)
            if k % 4 == 1:  # copy a digit from the same box, from another row and column
                r2 = 3 * (r // 3) + (r % 3 + rng.randint(1, 2)) % 3
                c2 = 3 * (c // 3) + (c % 3 + rng.randint(1, 2)) % 3
                board[r][c] = solution[r2][c2]
                board[r2][c2] = solution[r2][c2]
            else:
                board[r][c] = rng.choice("123456789")
        out.append({"id": f"random-{k}", "args": [board], "expected": oracle(board)})
    return out
