"""Small statistics over numbers and text."""


def median(values):
    """The median of a non-empty list of numbers (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]


def top_words(text, k):
    """The k most frequent words of text, lowercased, most frequent first; ties in alphabetical order."""
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,;:!?\"'()")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda word: (-counts[word], word))[:k]
