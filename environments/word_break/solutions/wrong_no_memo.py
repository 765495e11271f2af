def word_break(s: str, words: list[str]) -> bool:
    vocabulary = set(words)

    def can(start):
        if start == len(s):
            return True
        for end in range(start + 1, min(len(s), start + 20) + 1):
            if s[start:end] in vocabulary and can(end):
                return True
        return False

    return can(0)
