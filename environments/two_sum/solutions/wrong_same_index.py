def two_sum(nums: list[int], target: int) -> list[int]:
    index = {value: i for i, value in enumerate(nums)}
    for i, value in enumerate(nums):
        j = index.get(target - value)
        if j is not None:
            return [i, j]
    return []
