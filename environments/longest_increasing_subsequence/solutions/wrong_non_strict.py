from bisect import bisect_right


def longest_increasing_subsequence(nums: list[int]) -> int:
    tails = []
    for value in nums:
        i = bisect_right(tails, value)
        if i == len(tails):
            tails.append(value)
        else:
            tails[i] = value
    return len(tails)
