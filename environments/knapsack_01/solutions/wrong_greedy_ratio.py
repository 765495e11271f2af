def knapsack_01(weights: list[int], values: list[int], capacity: int) -> int:
    items = sorted(zip(weights, values), key=lambda item: item[1] / item[0], reverse=True)
    total = 0
    for weight, value in items:
        if weight <= capacity:
            capacity -= weight
            total += value
    return total
