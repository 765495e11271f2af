def valid_sudoku(board: list[list[str]]) -> bool:
    for i in range(9):
        row = board[i]
        col = [board[r][i] for r in range(9)]
        box = [board[3 * (i // 3) + r][3 * (i % 3) + c] for r in range(3) for c in range(3)]
        if len(set(row)) != 9 or len(set(col)) != 9 or len(set(box)) != 9:
            return False
    return True
