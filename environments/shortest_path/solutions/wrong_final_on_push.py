import heapq


def shortest_path(n: int, edges: list[list[int]], source: int) -> list[int]:
    succ = [[] for _ in range(n)]
    for u, v, w in edges:
        succ[u].append((v, w))
    dist = [-1] * n
    dist[source] = 0
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        for v, w in succ[u]:
            if dist[v] < 0:  # settled as soon as it is first seen
                dist[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return dist
