"""Regenerate tests/cases for prog_anagram_groups (deterministic: fixed seeds).

Expected outputs come from oracles independent of solutions/reference.py (which keys groups by the sorted
letters): on small inputs a brute force that compares every word with a representative of every group found
so far by letter counts (collections.Counter), on large inputs grouping by the tuple of the 26 letter
counts. The two are cross-checked on many small random inputs before anything is written.

Run: python3 generator/generate.py
"""

from __future__ import annotations

import random
import string
from collections import Counter
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"
MAX_N = 100_000
MAX_LEN = 20
LETTERS = string.ascii_lowercase


def brute_groups(words: list[str]) -> list[list[str]]:
    groups: list[tuple[Counter, list[str]]] = []
    for word in words:
        counts = Counter(word)
        for rep, members in groups:
            if rep == counts:
                members.append(word)
                break
        else:
            groups.append((counts, [word]))
    return [members for _, members in groups]


def count_groups(words: list[str]) -> list[list[str]]:
    groups: dict[tuple[int, ...], list[str]] = {}
    for word in words:
        counts = [0] * 26
        for ch in word:
            counts[ord(ch) - 97] += 1
        groups.setdefault(tuple(counts), []).append(word)
    return list(groups.values())


def canonical(groups: list[list[str]]) -> list[list[str]]:
    ordered = [sorted(g) for g in groups]
    ordered.sort(key=lambda g: (-len(g), g[0]))
    return ordered


def render(groups: list[list[str]]) -> str:
    return f"{len(groups)}\n" + "".join(f"{len(g)} {' '.join(g)}\n" for g in groups)


def oracle(words: list[str]) -> str:
    groups = brute_groups(words) if len(words) <= 3000 else count_groups(words)
    return render(canonical(groups))


def shuffled(rng: random.Random, word: str) -> str:
    letters = list(word)
    rng.shuffle(letters)
    return "".join(letters)


def random_word(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def cross_check() -> None:
    rng = random.Random(1)
    for _ in range(300):
        alphabet = LETTERS[:rng.randint(1, 5)]
        words = [random_word(rng, alphabet, 1, 4) for _ in range(rng.randint(1, 60))]
        assert canonical(brute_groups(words)) == canonical(count_groups(words)), words
    assert oracle("eat tea tan ate nat bat".split()) == "3\n3 ate eat tea\n2 nat tan\n1 bat\n"


def write(case_id: str, words: list[str]) -> None:
    assert 1 <= len(words) <= MAX_N
    assert all(1 <= len(w) <= MAX_LEN and set(w) <= set(LETTERS) for w in words)
    (CASES / f"{case_id}.in").write_text(f"{len(words)}\n{' '.join(words)}\n")
    (CASES / f"{case_id}.out").write_text(oracle(words))


def families(rng: random.Random, n: int, alphabet: str, low: int, high: int, size_max: int) -> list[str]:
    """About n words: random base words, each followed by up to size_max - 1 rearrangements (some repeated)."""
    words: list[str] = []
    while len(words) < n:
        base = random_word(rng, alphabet, low, high)
        words.append(base)
        for _ in range(min(rng.randint(0, size_max - 1), n - len(words))):
            words.append(rng.choice(words[-3:]) if rng.random() < 0.1 else shuffled(rng, base))
    rng.shuffle(words)
    return words


def main() -> None:
    cross_check()
    CASES.mkdir(parents=True, exist_ok=True)
    for old in CASES.iterdir():
        old.unlink()

    write("01-example", "eat tea tan ate nat bat".split())
    write("02-example", "listen silent abc cab listen zz b".split())
    write("03-single-word", ["a"])
    write("04-repeated-words", "bca abc cba abc abc cba x x".split())
    write("05-no-anagrams", "zebra apple b ab abc abd aab zz z".split())
    # Equal-size groups whose smallest words and sorted-letter keys order differently.
    write("06-tie-order", "ca b dc cb bc ac cd d ba ab bad dab".split())
    rng = random.Random(7)
    write("07-random-small", [random_word(rng, "abc", 1, 4) for _ in range(200)])
    rng = random.Random(8)
    write("08-random-medium", families(rng, 2500, "abcdefgh", 1, 7, 6))
    rng = random.Random(9)
    write("09-max-short-words", [random_word(rng, "abcdef", 1, 6) for _ in range(MAX_N)])
    rng = random.Random(10)
    write("10-max-long-words", families(rng, MAX_N, LETTERS, 15, MAX_LEN, 4))
    rng = random.Random(11)
    # One huge group (rearrangements of a 20-letter word, many repeated) plus a few words that miss it by
    # one letter.
    base = "anagramsareeverywher"
    words = [shuffled(rng, base) for _ in range(MAX_N // 2)]
    words += [rng.choice(words) for _ in range(MAX_N - 3 - len(words))]
    words += [shuffled(rng, base[:-1] + "s"), shuffled(rng, base[:-1]), shuffled(rng, base[:-1] + "z")]
    rng.shuffle(words)
    write("11-max-one-big-group", words)

if __name__ == "__main__":
    main()
