def two_sum(nums: list[int], target: int) -> list[int]:
    seen = {}
    for j, value in enumerate(nums):
        i = seen.get(target - value)
        if i is not None:
            return [i, j]
        seen[value] = j
    return []
