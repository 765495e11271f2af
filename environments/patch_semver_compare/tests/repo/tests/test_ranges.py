import pytest

from semverlite import InvalidRange, Range, Version, max_satisfying, satisfies, sort_versions


def test_comparator_set():
    assert satisfies("1.5.0", ">=1.2.0 <2.0.0")
    assert not satisfies("2.0.1", ">=1.2.0 <2.0.0")
    assert not satisfies("1.1.9", ">=1.2.0 <2.0.0")


def test_operator_with_space():
    assert satisfies("1.2.3", ">= 1.2.3")


def test_not_equal():
    assert satisfies("1.2.4", ">=1.2.0 !=1.2.3")
    assert not satisfies("1.2.3", ">=1.2.0 !=1.2.3")


def test_caret():
    assert satisfies("1.2.3", "^1.2.3")
    assert satisfies("1.9.0", "^1.2.3")
    assert not satisfies("1.2.2", "^1.2.3")
    assert not satisfies("3.0.0", "^1.2.3")


def test_caret_zero_major():
    assert satisfies("0.2.9", "^0.2.3")
    assert not satisfies("0.3.1", "^0.2.3")
    assert satisfies("0.0.3", "^0.0.3")
    assert not satisfies("0.0.5", "^0.0.3")


def test_tilde():
    assert satisfies("1.2.9", "~1.2.3")
    assert not satisfies("1.4.0", "~1.2.3")
    assert satisfies("1.9.3", "~1.9")


def test_x_ranges():
    assert satisfies("1.2.7", "1.2.x")
    assert satisfies("1.7.0", "1.x")
    assert not satisfies("2.1.0", "1.x")
    assert satisfies("42.0.0", "*")


def test_exact():
    assert satisfies("1.2.3", "1.2.3")
    assert satisfies("1.2.3", "=1.2.3")
    assert not satisfies("1.2.4", "1.2.3")


def test_or():
    assert satisfies("3.2.0", "^1.0 || >=3.1.0")
    assert not satisfies("2.5.0", "^1.0 || >=3.1.0")


def test_prerelease_excluded_by_default():
    assert not satisfies("1.5.0-beta.1", ">=1.2.0")
    assert not satisfies("1.2.4-alpha", ">=1.2.3-beta.1 <1.3.0")


def test_prerelease_allowed_by_matching_comparator():
    assert satisfies("1.2.3-beta.2", ">=1.2.3-beta.1 <1.3.0")
    assert not satisfies("1.2.3-alpha.9", ">=1.2.3-beta.1 <1.3.0")


def test_include_prerelease():
    assert satisfies("1.5.0-beta.1", ">=1.2.0", include_prerelease=True)


@pytest.mark.parametrize("text", [">=", "^", "1.2.3.4", ">=1.2", "~>1.0", "abc"],
                         ids=["bare_operator", "bare_caret", "four_parts", "partial_after_operator", "gem_style", "word"])
def test_invalid_ranges(text):
    with pytest.raises(InvalidRange):
        Range(text)


def test_range_str():
    assert str(Range("^1.2.3 || 1.x")) == ">=1.2.3 <2.0.0-0 || >=1.0.0 <2.0.0-0"


def test_contains_operator():
    assert "1.4.0" in Range("~1.4")
    assert Version(1, 6, 0) not in Range("~1.4")


def test_max_satisfying_releases():
    assert max_satisfying(["1.2.0", "1.9.3", "2.0.0"], "~1.9") == "1.9.3"
    assert max_satisfying(["1.2.0", "1.9.3", "1.10.0", "3.0.0"], "^1.0.0") == "1.10.0"


def test_max_satisfying_none():
    assert max_satisfying(["0.1.0", "0.2.0"], ">=1.0.0") is None


def test_max_satisfying_skips_invalid_strings():
    assert max_satisfying(["1.0", "latest", "1.0.1"], "*") == "1.0.1"


def test_sort_versions_releases():
    assert sort_versions(["1.10.0", "1.2.0", "0.9.1", "1.9.0"]) == ["0.9.1", "1.2.0", "1.9.0", "1.10.0"]
    assert sort_versions(["1.0.0", "2.0.0"], reverse=True) == ["2.0.0", "1.0.0"]
