def knapsack_01(weights: list[int], values: list[int], capacity: int) -> int:
    def best(i, room):
        if i == len(weights):
            return 0
        skip = best(i + 1, room)
        if weights[i] <= room:
            return max(skip, values[i] + best(i + 1, room - weights[i]))
        return skip

    return best(0, capacity)
