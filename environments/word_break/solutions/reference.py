def word_break(s: str, words: list[str]) -> bool:
    vocabulary = set(words)
    lengths = sorted({len(word) for word in vocabulary})
    ok = [True] + [False] * len(s)
    for end in range(1, len(s) + 1):
        for length in lengths:
            if length > end:
                break
            if ok[end - length] and s[end - length:end] in vocabulary:
                ok[end] = True
                break
    return ok[len(s)]
