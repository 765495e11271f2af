def topological_sort(n: int, edges: list[list[int]]) -> list[int]:
    succ = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
    state = [0] * n
    order = []

    def visit(node):
        state[node] = 1
        for child in succ[node]:
            if state[child] == 1:
                return False
            if state[child] == 0 and not visit(child):
                return False
        state[node] = 2
        order.append(node)
        return True

    for node in range(n):
        if state[node] == 0 and not visit(node):
            return []
    return order[::-1]
