from textkit import slugify


def test_single_word():
    assert slugify("Hello") == "hello"


def test_two_words():
    assert slugify("hello world") == "hello-world"


def test_digits_are_kept():
    assert slugify("Release 2") == "release-2"
