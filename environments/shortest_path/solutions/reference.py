import heapq


def shortest_path(n: int, edges: list[list[int]], source: int) -> list[int]:
    succ = [[] for _ in range(n)]
    for u, v, w in edges:
        succ[u].append((v, w))
    dist = [-1] * n
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if dist[u] >= 0:
            continue
        dist[u] = d
        for v, w in succ[u]:
            if dist[v] < 0:
                heapq.heappush(heap, (d + w, v))
    return dist
