from collections import deque


def topological_sort(n: int, edges: list[list[int]]) -> list[int]:
    succ = [[] for _ in range(n)]
    indegree = [0] * n
    for u, v in edges:
        succ[u].append(v)
        indegree[v] += 1
    queue = deque(node for node in range(n) if indegree[node] == 0)
    order = []
    while queue:
        node = queue.popleft()
        order.append(node)
        for child in succ[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                queue.append(child)
    return order
