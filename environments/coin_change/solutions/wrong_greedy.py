def coin_change(coins: list[int], amount: int) -> int:
    count = 0
    for coin in sorted(coins, reverse=True):
        take, amount = divmod(amount, coin)
        count += take
    return count if amount == 0 else -1
