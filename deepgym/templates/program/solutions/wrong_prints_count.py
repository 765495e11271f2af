import sys

data = sys.stdin.buffer.read().split()
print(len(data) - 1)
