def knapsack_01(weights: list[int], values: list[int], capacity: int) -> int:
    best = [0] * (capacity + 1)
    for weight, value in zip(weights, values):
        for room in range(capacity, weight - 1, -1):
            candidate = best[room - weight] + value
            if candidate > best[room]:
                best[room] = candidate
    return best[capacity]
