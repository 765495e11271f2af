def {{name}}(numbers: list[int]) -> int:
    return sum(n for n in numbers if n % 2 == 1)
