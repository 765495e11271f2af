from collections import OrderedDict


def lru_cache_ops(capacity: int, ops: list[list]) -> list:
    cache = OrderedDict()
    results = []
    for op in ops:
        key = op[1]
        if op[0] == "get":
            if key in cache:
                cache.move_to_end(key)
                results.append(cache[key])
            else:
                results.append(-1)
        else:
            if len(cache) >= capacity:
                cache.popitem(last=False)
            cache[key] = op[2]
            cache.move_to_end(key)
    return results
