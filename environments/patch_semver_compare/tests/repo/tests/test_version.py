import pytest

from semverlite import InvalidVersion, Version, compare, parse


def test_parse_components():
    v = Version.parse("1.22.333-rc.1.x-y+build.007")
    assert (v.major, v.minor, v.patch) == (1, 22, 333)
    assert v.prerelease == ("rc", 1, "x-y")
    assert v.build == ("build", "007")
    assert v.is_prerelease


def test_parse_plain_release():
    v = parse(" 0.9.12 ")
    assert v == Version(0, 9, 12)
    assert v.prerelease == () and v.build == () and not v.is_prerelease


@pytest.mark.parametrize(
    "text",
    ["1.0", "1.0.0.0", "01.0.0", "1.00.0", "1.0.0-", "1.0.0-01", "1.0.0-a..b", "1.0.0+", "1.0.0+a_b", "v1.0.0", ""],
    ids=["two_parts", "four_parts", "leading_zero_major", "leading_zero_minor", "empty_prerelease",
         "leading_zero_numeric_identifier", "empty_identifier", "empty_build", "bad_build_char", "v_prefix", "empty"],
)
def test_parse_rejects_invalid(text):
    with pytest.raises(InvalidVersion):
        Version.parse(text)


def test_alphanumeric_identifier_may_start_with_zero():
    assert Version.parse("1.0.0-0a").prerelease == ("0a",)


def test_str_roundtrip():
    for text in ["0.0.0", "1.2.3", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92",
                 "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85"]:
        assert str(Version.parse(text)) == text


def test_repr():
    assert repr(Version.parse("1.2.3-rc.1")) == "Version('1.2.3-rc.1')"


def test_rejects_negative_component():
    with pytest.raises(ValueError):
        Version(1, -1, 0)


def test_release_ordering():
    assert parse("1.9.0") < parse("1.10.0") < parse("1.10.1") < parse("2.0.0")
    assert parse("2.0.0") > parse("1.99.99")


def test_numeric_identifiers_compare_numerically():
    assert parse("1.0.0-alpha.2") < parse("1.0.0-alpha.10")
    assert parse("1.0.0-rc.9") < parse("1.0.0-rc.11")


def test_alphanumeric_identifiers_compare_lexically():
    assert parse("1.0.0-alpha") < parse("1.0.0-beta") < parse("1.0.0-rc")
    assert parse("1.0.0-Beta") < parse("1.0.0-alpha")  # ASCII order: uppercase first


def test_shorter_prerelease_is_lower():
    assert parse("1.0.0-alpha") < parse("1.0.0-alpha.1")
    assert parse("1.0.0-alpha.beta") < parse("1.0.0-alpha.beta.1")


def test_build_metadata_ignored_in_precedence():
    assert parse("1.0.0+a") == parse("1.0.0+b")
    assert hash(parse("1.0.0+a")) == hash(parse("1.0.0"))
    assert parse("1.0.0-rc.1+x") == parse("1.0.0-rc.1+y")


def test_not_equal_to_strings():
    assert parse("1.0.0") != "1.0.0"


def test_compare_releases():
    assert compare("1.2.3", "1.2.4") == -1
    assert compare("1.2.3", Version(1, 2, 3)) == 0
    assert compare("2.0.0", "1.9.9") == 1


def test_bump():
    v = parse("1.2.3")
    assert str(v.bump_major()) == "2.0.0"
    assert str(v.bump_minor()) == "1.3.0"
    assert str(v.bump_patch()) == "1.2.4"


def test_bump_finishes_prerelease():
    assert str(parse("2.0.0-rc.1").bump_major()) == "2.0.0"
    assert str(parse("1.3.0-beta").bump_minor()) == "1.3.0"
    assert str(parse("1.2.4-alpha.3+b9").bump_patch()) == "1.2.4"
    assert str(parse("1.2.4-alpha").bump_minor()) == "1.3.0"


def test_finalize_drops_prerelease_and_build():
    assert str(parse("3.1.4-rc.2+sha.abc").finalize()) == "3.1.4"
