def word_break(s: str, words: list[str]) -> bool:
    def can(rest, available):
        if not rest:
            return True
        for i, word in enumerate(available):
            if rest.startswith(word) and can(rest[len(word):], available[:i] + available[i + 1:]):
                return True
        return False

    return can(s, sorted(set(words)))
