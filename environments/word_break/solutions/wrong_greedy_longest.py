def word_break(s: str, words: list[str]) -> bool:
    vocabulary = sorted(set(words), key=len, reverse=True)
    position = 0
    while position < len(s):
        for word in vocabulary:
            if s.startswith(word, position):
                position += len(word)
                break
        else:
            return False
    return True
