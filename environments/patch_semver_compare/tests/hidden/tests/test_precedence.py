"""Pre-release precedence (SemVer 2.0.0, section 11) and the range logic that depends on it."""

import random

from semverlite import Range, Version, compare, max_satisfying, parse, satisfies, sort_versions

# The example chain from section 11 of the specification, lowest first.
SPEC_ORDER = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
              "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]


def test_prerelease_lower_than_release():
    assert parse("1.0.0-alpha") < parse("1.0.0")
    assert parse("1.0.0") > parse("1.0.0-rc.1")
    assert parse("2.0.0-0") < parse("2.0.0")
    assert not parse("1.0.0") < parse("1.0.0-rc.1")


def test_prerelease_of_next_version_is_higher():
    assert parse("1.0.0") < parse("1.0.1-alpha") < parse("1.0.1")


def test_numeric_identifier_lower_than_alphanumeric():
    assert parse("1.0.0-alpha.1") < parse("1.0.0-alpha.beta")
    assert parse("1.0.0-1") < parse("1.0.0-alpha")
    assert parse("1.0.0-rc.99") < parse("1.0.0-rc.a")
    assert parse("1.0.0-alpha.beta") > parse("1.0.0-alpha.1")


def test_numeric_identifiers_still_compare_numerically():
    assert parse("1.0.0-beta.2") < parse("1.0.0-beta.11")
    assert parse("1.0.0-9") < parse("1.0.0-10")


def test_spec_example_chain():
    versions = [parse(text) for text in SPEC_ORDER]
    for lower, higher in zip(versions, versions[1:]):
        assert lower < higher and higher > lower and lower != higher


def test_sorting_shuffled_versions():
    shuffled = SPEC_ORDER + ["0.9.0", "1.0.1-0", "1.0.1"]
    random.Random(7).shuffle(shuffled)
    assert sort_versions(shuffled) == ["0.9.0"] + SPEC_ORDER + ["1.0.1-0", "1.0.1"]
    assert sorted(parse(t) for t in shuffled)[-3:] == [parse("1.0.0"), parse("1.0.1-0"), parse("1.0.1")]


def test_compare_prerelease():
    assert compare("1.0.0-rc.1", "1.0.0") == -1
    assert compare("1.0.0", "1.0.0-rc.1") == 1
    assert compare("1.0.0-alpha.1", "1.0.0-alpha.beta") == -1
    assert compare("1.0.0-alpha.beta", "1.0.0-alpha.1") == 1


def test_max_and_min_with_prereleases():
    versions = [parse(t) for t in ["1.0.0-rc.1", "1.0.0", "1.0.0-beta.11", "1.0.0-beta.2"]]
    assert max(versions) == parse("1.0.0")
    assert min(versions) == parse("1.0.0-beta.2")


def test_caret_excludes_next_major():
    assert not satisfies("2.0.0", "^1.2.3")
    assert not satisfies("0.3.0", "^0.2.3")
    assert not satisfies("0.0.4", "^0.0.3")
    assert satisfies("1.99.0", "^1.2.3")


def test_tilde_and_x_ranges_exclude_upper_bound():
    assert not satisfies("1.3.0", "~1.2.3")
    assert not satisfies("2.0.0", "1.x")
    assert not satisfies("1.3.0", "1.2.x")
    assert Version(1, 5, 0) not in Range("~1.4")


def test_upper_bound_excludes_its_prereleases():
    assert not satisfies("2.0.0-rc.1", "^1.2.3", include_prerelease=True)
    assert not satisfies("1.3.0-alpha", "~1.2.3", include_prerelease=True)
    assert satisfies("1.9.9-rc.1", "^1.2.3", include_prerelease=True)


def test_prerelease_below_release_bound():
    assert satisfies("1.3.0-alpha", ">=1.2.0 <1.3.0", include_prerelease=True)
    assert not satisfies("1.2.0-rc.1", ">=1.2.0", include_prerelease=True)


def test_max_satisfying_with_boundary_versions():
    assert max_satisfying(["1.2.0", "1.9.3", "1.10.0", "2.0.0"], "~1.9") == "1.9.3"
    assert max_satisfying(["1.4.0", "2.0.0", "2.0.0-rc.1"], "^1.0.0", include_prerelease=True) == "1.4.0"


def test_max_satisfying_prefers_release_over_its_prerelease():
    assert max_satisfying(["1.0.0-rc.1", "1.0.0", "0.9.0"], ">=0.9.0", include_prerelease=True) == "1.0.0"
    assert max_satisfying(["1.0.0", "1.0.0-rc.1"], ">=1.0.0-beta.1", include_prerelease=True) == "1.0.0"


def test_prerelease_equality_and_hash():
    assert parse("1.0.0-alpha.1") == parse("1.0.0-alpha.1+build.5")
    assert hash(parse("1.0.0-alpha.1")) == hash(parse("1.0.0-alpha.1+build.5"))
    assert parse("1.0.0-alpha.1") != parse("1.0.0-alpha.01a")
    assert len({parse("1.0.0"), parse("1.0.0+x"), parse("1.0.0-0")}) == 2
