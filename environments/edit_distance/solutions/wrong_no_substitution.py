def edit_distance(a: str, b: str) -> int:
    # insertions and deletions only: len(a) + len(b) - 2 * LCS
    previous = [0] * (len(b) + 1)
    for ca in a:
        current = [0] * (len(b) + 1)
        for j, cb in enumerate(b, 1):
            current[j] = previous[j - 1] + 1 if ca == cb else max(previous[j], current[j - 1])
        previous = current
    return len(a) + len(b) - 2 * previous[len(b)]
