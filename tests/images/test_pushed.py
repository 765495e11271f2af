"""The pushed-images manifest round-trips, and a broken one fails naming the file and the field."""

import json

import pytest

from deepgym.errors import ConfigurationError
from deepgym.pushed import PushedImage, read_manifest, write_manifest

DIGEST = "sha256:" + "ab" * 32


def test_round_trip(tmp_path):
    path = tmp_path / "images.json"
    image = PushedImage("127.0.0.1:5000/deepgym-coin_change", "3f2a9c0d1e4b5a67", DIGEST)
    write_manifest(path, {"coin_change": image})
    assert read_manifest(path) == {"coin_change": image}
    assert image.ref == f"127.0.0.1:5000/deepgym-coin_change@{DIGEST}"
    assert image.tagged == "127.0.0.1:5000/deepgym-coin_change:3f2a9c0d1e4b5a67"


@pytest.mark.parametrize("content, message", [
    (None, "no pushed-images manifest"),
    ("{not json", "cannot read"),
    (json.dumps({"version": 2, "images": {}}), "not a version-1"),
    (json.dumps({"version": 1, "images": {"coin_change": {"repository": "r", "tag": "t"}}}),
     "images.coin_change lacks digest"),
    (json.dumps({"version": 1, "images": {"coin_change": {"repository": "r", "tag": "t", "digest": "latest"}}}),
     "images.coin_change.digest is 'latest'"),
])
def test_broken_manifest_names_the_problem(tmp_path, content, message):
    path = tmp_path / "images.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError, match=message) as raised:
        read_manifest(path)
    assert str(path) in str(raised.value)
