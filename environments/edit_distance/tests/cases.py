"""Hidden cases for edit_distance: hand-picked edge cases plus seeded random ones. Expected values come from
the plain recursive definition over suffixes with a memo (no table filled row by row); recursion depth is at
most len(a) + len(b) <= 400."""

import random


def oracle(a, b):
    """Distance between the suffixes a[i:] and b[j:], straight from the definition, memoised."""
    memo = {}

    def d(i, j):
        if i == len(a):
            return len(b) - j
        if j == len(b):
            return len(a) - i
        if (i, j) in memo:
            return memo[i, j]
        if a[i] == b[j]:
            result = d(i + 1, j + 1)  # matching equal first characters is always optimal
        else:
            result = 1 + min(d(i + 1, j), d(i, j + 1), d(i + 1, j + 1))
        memo[i, j] = result
        return result

    return d(0, 0)


FIXED = [
    ("horse", "ros", 3),
    ("intention", "execution", 5),
    ("", "abc", 3),
    ("abc", "", 3),
    ("", "", 0),
    ("a", "a", 0),
    ("a", "b", 1),  # one replacement, not a deletion plus an insertion
    ("abc", "abc", 0),
    ("kitten", "sitting", 3),
    ("flaw", "lawn", 2),
    ("abcdef", "azced", 3),
    ("ab", "ba", 2),
    ("abc", "xyz", 3),
    ("aaaa", "aa", 2),
    ("sunday", "saturday", 3),
    ("abcdefg", "gfedcba", 6),
    ("z" * 200, "", 200),
    ("a" * 100, "b" * 100, 100),  # replacements only
    ("ab" * 100, "ba" * 100, 2),  # drop the first letter, add one at the end
    ("x" * 100, "x" * 200, 100),
]


def mutate(rng, s, edits, alphabet):
    s = list(s)
    for _ in range(edits):
        kind = rng.randrange(3)
        if kind == 0 or not s:
            s.insert(rng.randint(0, len(s)), rng.choice(alphabet))
        elif kind == 1:
            del s[rng.randrange(len(s))]
        else:
            s[rng.randrange(len(s))] = rng.choice(alphabet)
    return "".join(s)


def cases(variant):
    out = []
    for k, (a, b, expected) in enumerate(FIXED):
        assert oracle(a, b) == expected, (a, b)
        out.append({"id": f"fixed-{k}", "args": [a, b], "expected": expected})
    rng = random.Random(8086 + variant)
    for k in range(40):
        alphabet = rng.choice(["ab", "abc", "abcdefghijklmnopqrstuvwxyz"])
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.5:
            b = mutate(rng, a, rng.randint(1, 4), alphabet)
        else:
            b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        out.append({"id": f"random-{k}", "args": [a, b], "expected": oracle(a, b)})
    for k in range(3):
        alphabet = ["ab", "abcd", "abcdefghijklmnopqrstuvwxyz"][k]
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(150, 200)))
        b = mutate(rng, a, 40, alphabet)[:200] if k else "".join(rng.choice(alphabet) for _ in range(200))
        out.append({"id": f"large-{k}", "args": [a, b], "expected": oracle(a, b)})
    return out
