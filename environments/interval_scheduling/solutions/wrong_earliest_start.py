def interval_scheduling(intervals: list[list[int]]) -> int:
    count = 0
    free_from = None
    for start, end in sorted(intervals):
        if free_from is None or start >= free_from:
            count += 1
            free_from = end
    return count
