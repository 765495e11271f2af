def longest_increasing_subsequence(nums: list[int]) -> int:
    def best(i, previous):
        if i == len(nums):
            return 0
        skip = best(i + 1, previous)
        if previous is None or nums[i] > previous:
            return max(skip, 1 + best(i + 1, nums[i]))
        return skip

    return best(0, None)
