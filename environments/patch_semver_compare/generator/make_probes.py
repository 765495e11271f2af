"""Writes ../tests/probes.json, the hidden probes of patch_semver_compare, from SETUP and PROBES below.

Run it again whenever the repository, the hidden tests or the solutions change:

    python3 generator/make_probes.py

Each entry of PROBES is (id, covers, expr); deepgym.probes explains the rules the probes must meet and
refuses to write the file otherwise. Expected values are computed from solutions/reference.diff, never typed.
"""

from __future__ import annotations

SETUP = r'''
import semverlite
from semverlite import InvalidRange, InvalidVersion, Range, Version, compare, max_satisfying, parse, satisfies, sort_versions

# The example chain from section 11 of the specification, lowest first.
SPEC_ORDER = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
              "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def operators(a, b):
    """``a < b``, ``a <= b``, ``a > b``, ``a >= b``, ``a == b``, ``a != b`` for two version strings."""
    x, y = parse(a), parse(b)
    return [x < y, x <= y, x > y, x >= y, x == y, x != y]
'''

PROBES = [
    # --- precedence (SemVer 2.0.0, section 11)
    ("prerelease_lower_than_release", ["test_prerelease_lower_than_release"],
     r'''[operators("1.0.0-alpha", "1.0.0"), operators("1.0.0", "1.0.0-rc.1"), operators("2.0.0-0", "2.0.0"), operators("1.0.0+build", "1.0.0-rc.1+build")]'''),
    ("prerelease_of_next_version_is_higher", ["test_prerelease_of_next_version_is_higher"],
     r'''[operators("1.0.0", "1.0.1-alpha"), operators("1.0.1-alpha", "1.0.1"), operators("1.9.9", "2.0.0-0"), operators("0.1.0-rc.1", "0.0.9")]'''),
    ("numeric_identifier_lower_than_alphanumeric", ["test_numeric_identifier_lower_than_alphanumeric"],
     r'''[compare(a, b) for a, b in [("1.0.0-alpha.1", "1.0.0-alpha.beta"), ("1.0.0-1", "1.0.0-alpha"), ("1.0.0-rc.99", "1.0.0-rc.a"), ("1.0.0-alpha.beta", "1.0.0-alpha.1"), ("1.0.0-999999", "1.0.0-0a"), ("1.0.0-x.1.y", "1.0.0-x.z")]]'''),
    ("spec_example_chain_pairwise", ["test_spec_example_chain", "test_compare_prerelease"],
     r'''[[compare(a, b) for b in SPEC_ORDER] for a in SPEC_ORDER]'''),
    ("spec_example_chain_operators", ["test_spec_example_chain"],
     r'''[operators(a, b) for a, b in zip(SPEC_ORDER, SPEC_ORDER[1:])]'''),
    ("sorting_shuffled_versions", ["test_sorting_shuffled_versions"],
     r'''[sort_versions(["1.0.0-rc.1", "1.0.1", "1.0.0-alpha.beta", "0.9.0", "1.0.0", "1.0.0-beta.11", "1.0.0-alpha", "1.0.1-0", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-alpha.1"]), sort_versions(["1.0.0-alpha.1", "1.0.0-beta", "1.0.0", "1.0.0-alpha.beta"], reverse=True)]'''),
    ("sorted_version_objects", ["test_sorting_shuffled_versions", "test_max_and_min_with_prereleases"],
     r'''[[str(v) for v in sorted(parse(t) for t in ["1.0.1", "1.0.0-rc.1+b.2", "1.0.1-0", "1.0.0", "0.9.0", "1.0.0-rc.1.0"])], str(max(parse(t) for t in ["1.0.0-rc.1", "1.0.0", "1.0.0-beta.11", "1.0.0-beta.2"])), str(min(parse(t) for t in ["1.0.0-rc.1", "1.0.0", "1.0.0-beta.11", "1.0.0-beta.2"]))]'''),
    ("compare_prerelease", ["test_compare_prerelease"],
     r'''[compare("1.0.0-rc.1", "1.0.0"), compare("1.0.0", "1.0.0-rc.1"), compare(parse("1.0.0-alpha.1"), "1.0.0-alpha.beta"), compare("1.0.0-alpha.beta", Version(1, 0, 0, ("alpha", 1))), compare("1.0.0-rc.1+a", "1.0.0-rc.1+b")]'''),
    # --- ranges, whose upper bounds are pre-releases of the next version
    ("caret_excludes_next_major", ["test_caret_excludes_next_major"],
     r'''[satisfies(v, r) for v, r in [("2.0.0", "^1.2.3"), ("0.3.0", "^0.2.3"), ("0.0.4", "^0.0.3"), ("1.99.0", "^1.2.3"), ("2.0.0", "^1.2"), ("1.0.0", "^0.9.0")]]'''),
    ("tilde_and_x_ranges_exclude_upper_bound", ["test_tilde_and_x_ranges_exclude_upper_bound"],
     r'''[satisfies(v, r) for v, r in [("1.3.0", "~1.2.3"), ("2.0.0", "1.x"), ("1.3.0", "1.2.x"), ("1.2.99", "1.2.x"), ("1.5.0", "~1.4"), ("1.4.7", "~1.4"), ("3.0.0", "2")]] + [Version(1, 5, 0) in Range("~1.4")]'''),
    ("upper_bound_excludes_its_prereleases", ["test_upper_bound_excludes_its_prereleases"],
     r'''[satisfies(v, r, include_prerelease=True) for v, r in [("2.0.0-rc.1", "^1.2.3"), ("1.3.0-alpha", "~1.2.3"), ("1.9.9-rc.1", "^1.2.3"), ("2.0.0-0", "1.x"), ("0.3.0-beta", "^0.2.3"), ("1.2.3-rc.1", "^1.2.3")]]'''),
    ("prerelease_below_release_bound", ["test_prerelease_below_release_bound"],
     r'''[satisfies("1.3.0-alpha", ">=1.2.0 <1.3.0", include_prerelease=True), satisfies("1.2.0-rc.1", ">=1.2.0", include_prerelease=True), satisfies("1.2.0-rc.1", ">1.1.9 <1.2.0", include_prerelease=True), satisfies("1.2.0", "<=1.2.0-rc.1", include_prerelease=True)]'''),
    ("max_satisfying_with_boundary_versions", ["test_max_satisfying_with_boundary_versions"],
     r'''[max_satisfying(["1.2.0", "1.9.3", "1.10.0", "2.0.0"], "~1.9"), max_satisfying(["1.4.0", "2.0.0", "2.0.0-rc.1"], "^1.0.0", include_prerelease=True), max_satisfying(["0.2.9", "0.3.0", "0.3.0-rc.1"], "^0.2.0", include_prerelease=True), max_satisfying(["1.2.3", "1.3.0"], "1.2.x")]'''),
    ("max_satisfying_prefers_release_over_its_prerelease", ["test_max_satisfying_prefers_release_over_its_prerelease"],
     r'''[max_satisfying(["1.0.0-rc.1", "1.0.0", "0.9.0"], ">=0.9.0", include_prerelease=True), max_satisfying(["1.0.0", "1.0.0-rc.1"], ">=1.0.0-beta.1", include_prerelease=True), max_satisfying(["1.0.0-beta.11", "1.0.0-beta.2", "1.0.0-beta"], ">=1.0.0-beta"), max_satisfying(["1.0.0-alpha.1", "1.0.0-alpha.beta"], ">=1.0.0-alpha")]'''),
    # --- pass-to-pass: what works today keeps working
    ("numeric_identifiers_compare_numerically", ["test_numeric_identifiers_still_compare_numerically",
                                                 "test_numeric_identifiers_compare_numerically"],
     r'''[compare(a, b) for a, b in [("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-9", "1.0.0-10"), ("1.0.0-alpha.2", "1.0.0-alpha.10"), ("1.0.0-rc.11", "1.0.0-rc.9")]]'''),
    ("alphanumeric_identifiers_compare_lexically", ["test_alphanumeric_identifiers_compare_lexically",
                                                    "test_shorter_prerelease_is_lower"],
     r'''[compare(a, b) for a, b in [("1.0.0-alpha", "1.0.0-beta"), ("1.0.0-beta", "1.0.0-rc"), ("1.0.0-Beta", "1.0.0-alpha"), ("1.0.0-alpha", "1.0.0-alpha.1"), ("1.0.0-alpha.beta", "1.0.0-alpha.beta.1"), ("1.0.0-a-b", "1.0.0-a")]]'''),
    ("equality_and_hash_ignore_build", ["test_prerelease_equality_and_hash", "test_build_metadata_ignored_in_precedence",
                                        "test_not_equal_to_strings"],
     r'''[parse("1.0.0-alpha.1") == parse("1.0.0-alpha.1+build.5"), hash(parse("1.0.0-alpha.1")) == hash(parse("1.0.0-alpha.1+build.5")), parse("1.0.0-alpha.1") != parse("1.0.0-alpha.01a"), len({parse("1.0.0"), parse("1.0.0+x"), parse("1.0.0-0")}), parse("1.0.0+a") == parse("1.0.0+b"), hash(parse("1.0.0+a")) == hash(parse("1.0.0")), parse("1.0.0") != "1.0.0"]'''),
    ("release_ordering", ["test_release_ordering", "test_compare_releases", "test_sort_versions_releases"],
     r'''[sort_versions(["1.10.0", "1.2.0", "0.9.1", "1.9.0", "2.0.0", "1.10.1", "1.99.99"]), sort_versions(["1.0.0", "2.0.0"], reverse=True), compare("1.2.3", "1.2.4"), compare("1.2.3", Version(1, 2, 3)), compare("2.0.0", "1.9.9")]'''),
    ("parse_and_format", ["test_parse_components", "test_parse_plain_release", "test_str_roundtrip", "test_repr",
                          "test_alphanumeric_identifier_may_start_with_zero"],
     r'''[(lambda v: [v.major, v.minor, v.patch, list(v.prerelease), list(v.build), v.is_prerelease, repr(v)])(Version.parse("1.22.333-rc.1.x-y+build.007")), [str(parse(t)) for t in ["0.0.0", " 0.9.12 ", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0-0a"]], list(parse("1.0.0-0a").prerelease)]'''),
    ("invalid_versions_raise", ["test_parse_rejects_invalid", "test_rejects_negative_component"],
     r'''[error_name(lambda: Version.parse(t)) for t in ["1.0", "1.0.0.0", "01.0.0", "1.00.0", "1.0.0-", "1.0.0-01", "1.0.0-a..b", "1.0.0+", "1.0.0+a_b", "v1.0.0", ""]] + [error_name(lambda: Version(1, -1, 0))]'''),
    ("bump_and_finalize", ["test_bump", "test_bump_finishes_prerelease", "test_finalize_drops_prerelease_and_build"],
     r'''[str(f(parse(t))) for t in ["1.2.3", "2.0.0-rc.1", "1.3.0-beta", "1.2.4-alpha.3+b9"] for f in (Version.bump_major, Version.bump_minor, Version.bump_patch, Version.finalize)]'''),
    ("releases_in_ranges", ["test_comparator_set", "test_caret", "test_caret_zero_major", "test_tilde", "test_x_ranges",
                            "test_exact", "test_or", "test_not_equal", "test_operator_with_space", "test_contains_operator"],
     r'''[satisfies(v, r) for v, r in [("1.5.0", ">=1.2.0 <2.0.0"), ("2.0.1", ">=1.2.0 <2.0.0"), ("1.9.0", "^1.2.3"), ("1.2.2", "^1.2.3"), ("0.2.9", "^0.2.3"), ("0.3.1", "^0.2.3"), ("0.0.5", "^0.0.3"), ("1.2.9", "~1.2.3"), ("1.4.0", "~1.2.3"), ("2.1.0", "1.x"), ("42.0.0", "*"), ("1.2.3", "=1.2.3"), ("3.2.0", "^1.0 || >=3.1.0"), ("2.5.0", "^1.0 || >=3.1.0"), ("1.2.3", ">=1.2.0 !=1.2.3"), ("1.2.3", ">= 1.2.3")]] + ["1.4.0" in Range("~1.4"), str(Range("^1.2.3 || 1.x"))]'''),
    ("prereleases_in_ranges", ["test_prerelease_excluded_by_default", "test_prerelease_allowed_by_matching_comparator",
                               "test_include_prerelease"],
     r'''[satisfies("1.5.0-beta.1", ">=1.2.0"), satisfies("1.2.4-alpha", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.2.3-beta.2", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.2.3-alpha.9", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.5.0-beta.1", ">=1.2.0", include_prerelease=True)]'''),
    ("invalid_ranges_and_max_satisfying", ["test_invalid_ranges", "test_max_satisfying_releases", "test_max_satisfying_none",
                                           "test_max_satisfying_skips_invalid_strings"],
     r'''[error_name(lambda: Range(t)) for t in [">=", "^", "1.2.3.4", ">=1.2", "~>1.0", "abc"]] + [max_satisfying(["1.2.0", "1.9.3", "1.10.0", "3.0.0"], "^1.0.0"), max_satisfying(["0.1.0", "0.2.0"], ">=1.0.0"), max_satisfying(["1.0", "latest", "1.0.1"], "*")]'''),
]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from deepgym.probes import write_probes

    sys.exit(write_probes(Path(__file__).resolve().parent.parent, SETUP, PROBES))
