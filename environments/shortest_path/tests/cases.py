"""Hidden cases for shortest_path: hand-picked edge cases plus seeded random ones. Expected values come from
Bellman-Ford: relax every edge, round after round, until nothing changes (no priority queue). To keep the
large cases fast, edges are relaxed in order of how many hops their tail is from the source, which changes
the number of rounds but not the result."""

import random


def oracle(n, edges, source):
    hops = [-1] * n
    hops[source] = 0
    frontier = [source]
    succ = [[] for _ in range(n)]
    for u, v, _ in edges:
        succ[u].append(v)
    while frontier:
        nxt = []
        for u in frontier:
            for v in succ[u]:
                if hops[v] < 0:
                    hops[v] = hops[u] + 1
                    nxt.append(v)
        frontier = nxt
    ordered = sorted((e for e in edges if hops[e[0]] >= 0), key=lambda e: hops[e[0]])
    infinity = float("inf")
    dist = [infinity] * n
    dist[source] = 0
    for _ in range(n):
        changed = False
        for u, v, w in ordered:
            if dist[u] + w < dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            break
    return [d if d != infinity else -1 for d in dist]


FIXED = [
    (1, [], 0, [0]),
    (3, [[0, 1, 4], [0, 2, 1], [2, 1, 2]], 0, [0, 3, 1]),
    (3, [[1, 0, 1]], 0, [0, -1, -1]),  # edges are one way
    (3, [[0, 1, 1]], 0, [0, 1, -1]),
    (2, [[0, 1, 5], [0, 1, 3]], 0, [0, 3]),  # parallel edges
    (2, [[0, 0, 7], [0, 1, 0]], 0, [0, 0]),  # a loop and a zero weight
    (3, [[0, 2, 10], [0, 1, 1], [1, 2, 1]], 0, [0, 1, 2]),  # the first edge found is not the shortest way
    (4, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 10]], 0, [0, 1, 2, 3]),
    (4, [[0, 3, 10], [0, 1, 1], [1, 2, 1], [2, 3, 1]], 3, [-1, -1, -1, 0]),
    (3, [[0, 1, 2], [1, 2, 2], [0, 2, 5]], 1, [-1, 0, 2]),
    (5, [[0, 1, 2], [0, 2, 5], [1, 2, 1], [2, 3, 1], [1, 3, 7], [3, 4, 3]], 0, [0, 2, 3, 4, 7]),
    (4, [[0, 1, 10**6], [1, 2, 10**6], [2, 3, 10**6]], 0, [0, 10**6, 2 * 10**6, 3 * 10**6]),
    (4, [[2, 3, 1], [3, 2, 1]], 0, [0, -1, -1, -1]),
    (4, [[0, 1, 0], [1, 2, 0], [2, 0, 0], [2, 3, 0]], 0, [0, 0, 0, 0]),
    (6, [[0, 1, 7], [0, 2, 9], [0, 5, 14], [1, 2, 10], [1, 3, 15], [2, 3, 11], [2, 5, 2], [3, 4, 6],
         [4, 5, 9]], 0, [0, 7, 9, 20, 26, 11]),
    (5, [[0, 1, 1], [0, 2, 1], [1, 3, 5], [2, 3, 1], [3, 4, 1], [4, 0, 1]], 2, [3, 4, 0, 1, 2]),
]


def random_graph(rng, n, m, top):
    r = rng.random
    return [[int(r() * n), int(r() * n), int(r() * (top + 1))] for _ in range(m)]


def cases(variant):
    out = []
    for k, (n, edges, source, expected) in enumerate(FIXED):
        assert oracle(n, edges, source) == expected, (n, edges, source)
        out.append({"id": f"fixed-{k}", "args": [n, edges, source], "expected": expected})
    rng = random.Random(65537 + variant)
    for k in range(40):
        n = rng.randint(1, 12)
        edges = random_graph(rng, n, rng.randint(0, 3 * n), rng.choice([0, 3, 20, 10**6]))
        source = rng.randrange(n)
        out.append({"id": f"random-{k}", "args": [n, edges, source], "expected": oracle(n, edges, source)})
    for k, (n, m, top) in enumerate([(10**4, 5 * 10**4, 10**6), (2000, 20000, 10)]):
        edges = random_graph(rng, n, m, top)
        source = rng.randrange(n)
        out.append({"id": f"large-{k}", "args": [n, edges, source], "expected": oracle(n, edges, source)})
    return out
