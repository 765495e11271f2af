"""Hidden cases for word_break: hand-picked edge cases plus seeded random ones. Expected values come from a
breadth-first search over the positions of s that a sequence of words can reach (no boolean table indexed by
prefix length)."""

import random


def oracle(s, words):
    """Can the end of s be reached from position 0 by stepping over words that match at the current position?"""
    seen, frontier = {0}, [0]
    while frontier:
        position = frontier.pop()
        if position == len(s):
            return True
        for word in words:
            nxt = position + len(word)
            if nxt not in seen and s.startswith(word, position):
                seen.add(nxt)
                frontier.append(nxt)
    return False


A = ["a" * k for k in range(1, 11)]

FIXED = [
    ("leetcode", ["leet", "code"], True),
    ("applepenapple", ["apple", "pen"], True),  # a word used twice
    ("catsandog", ["cats", "dog", "sand", "and", "cat"], False),
    ("catsanddog", ["cats", "dog", "sand", "and", "cat"], True),
    ("", ["a"], True),
    ("a", ["a"], True),
    ("a", ["b"], False),
    ("abcd", ["abc", "ab", "cd"], True),  # the longest first word leads nowhere
    ("cars", ["car", "ca", "rs"], True),
    ("aaaaaaa", ["aaaa", "aaa"], True),
    ("aaaaaaa", ["aaaa", "aa"], False),
    ("goalspecial", ["go", "goal", "goals", "special"], True),
    ("bb", ["a", "b", "bbb", "bbbb"], True),
    ("abc", ["abc", "abc", "abc"], True),
    ("abcabc", ["abcabcabc"], False),
    ("ab", ["a", "bc"], False),
    ("a" * 150 + "b", A, False),  # exponentially many ways to split the run of a's, none of them ends well
    ("a" * 299 + "b", A + ["ab"], True),
    ("a" * 300, ["aa", "aaa"], True),
    ("b" + "a" * 299, A, False),
    ("xyzzy" * 60, ["xyzzy", "xy", "zzy", "z"], True),
]


def cases(variant):
    out = []
    for k, (s, words, expected) in enumerate(FIXED):
        assert oracle(s, words) is expected, (s, words)
        out.append({"id": f"fixed-{k}", "args": [s, words], "expected": expected})
    rng = random.Random(6174 + variant)
    for k in range(40):
        alphabet = rng.choice(["ab", "abc", "abcd"])
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 5))]
        s = "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        if s and rng.random() < 0.6:
            i = rng.randrange(len(s))
            s = s[:i] + rng.choice(alphabet) + s[i + 1:]
        out.append({"id": f"random-{k}", "args": [s, words], "expected": oracle(s, words)})
    for k in range(3):
        words = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 20))) for _ in range(1000)]
        words = [w for w in words if "a" in w] if k != 2 else words  # k < 2: "b" alone is not a word
        s = ""
        while len(s) < 290:
            s += rng.choice(words)
        s = s[:300]
        if k == 1:
            s = s[:299] + "c"  # unreachable end, after a long stretch that splits in many ways
        out.append({"id": f"large-{k}", "args": [s, words], "expected": oracle(s, words)})
    return out
