def longest_increasing_subsequence(nums: list[int]) -> int:
    best = run = 0
    for i, value in enumerate(nums):
        run = run + 1 if i > 0 and value > nums[i - 1] else 1
        best = max(best, run)
    return best
