from collections import deque


def shortest_path(n: int, edges: list[list[int]], source: int) -> list[int]:
    succ = [[] for _ in range(n)]
    for u, v, w in edges:
        succ[u].append((v, w))
    dist = [-1] * n
    dist[source] = 0
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v, w in succ[u]:
            if dist[v] < 0:
                dist[v] = dist[u] + w
                queue.append(v)
    return dist
