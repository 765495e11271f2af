def knapsack_01(weights: list[int], values: list[int], capacity: int) -> int:
    best = [0] * (capacity + 1)
    for weight, value in zip(weights, values):
        for room in range(weight, capacity + 1):
            best[room] = max(best[room], best[room - weight] + value)
    return best[capacity]
