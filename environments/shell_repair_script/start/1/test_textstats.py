from textstats import top_words


def test_counts():
    assert top_words("b a b c b a", 2) == ["b", "a"]


def test_case_and_punctuation():
    assert top_words("The cat. the dog, THE end!", 1) == ["the"]
