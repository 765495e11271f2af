def interval_scheduling(intervals: list[list[int]]) -> int:
    chosen = []
    for start, end in sorted(intervals, key=lambda interval: interval[1] - interval[0]):
        if all(end <= s or e <= start for s, e in chosen):
            chosen.append((start, end))
    return len(chosen)
