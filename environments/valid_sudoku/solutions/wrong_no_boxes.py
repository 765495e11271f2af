def valid_sudoku(board: list[list[str]]) -> bool:
    for i in range(9):
        row = [d for d in board[i] if d != "."]
        col = [board[r][i] for r in range(9) if board[r][i] != "."]
        if len(set(row)) != len(row) or len(set(col)) != len(col):
            return False
    return True
