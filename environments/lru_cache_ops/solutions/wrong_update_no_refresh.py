def lru_cache_ops(capacity: int, ops: list[list]) -> list:
    cache = {}  # dicts keep insertion order: the first key is the least recently used
    results = []
    for op in ops:
        key = op[1]
        if op[0] == "get":
            if key in cache:
                value = cache.pop(key)
                cache[key] = value
                results.append(value)
            else:
                results.append(-1)
        else:
            if key not in cache and len(cache) >= capacity:
                del cache[next(iter(cache))]
            cache[key] = op[2]
    return results
