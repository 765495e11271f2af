from textkit import slugify


def test_single_word():
    assert slugify("Hello") == "hello"


def test_two_words():
    assert slugify("hello world") == "hello-world"


def test_digits_are_kept():
    assert slugify("Release 2") == "release-2"


def test_punctuation_collapses_to_one_dash():
    assert slugify("Hello, World!") == "hello-world"


def test_no_dash_at_the_ends():
    assert slugify("  spaced out  ") == "spaced-out"


def test_repeated_separators():
    assert slugify("a -- b") == "a-b"
