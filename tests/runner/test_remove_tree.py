"""The runner's removal of a sample's folders (deepgym/runner/confine/privileges.py remove_tree), in-process, no Docker:
whatever the submission left there, and however it locked it, goes, and nothing outside is touched."""

from __future__ import annotations

import os
from pathlib import Path

from deepgym.runner.confine.privileges import remove_tree


def test_a_locked_deep_tree_goes_and_a_symlink_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("x")
    scratch = tmp_path / "scratch"
    deep = str(scratch)
    os.mkdir(deep)
    for _ in range(1200):  # deeper than the interpreter's recursion limit
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    Path(deep, "file").write_text("x")
    locked = scratch / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "file").write_text("x")
    os.symlink(outside, scratch / "link")
    os.symlink(outside, locked / "inner" / "link")
    os.mkfifo(scratch / "fifo")
    (locked / "inner").chmod(0)
    locked.chmod(0o500)
    remove_tree(str(scratch))
    assert not os.path.lexists(scratch)
    assert (outside / "kept").read_text() == "x"


def test_a_symlink_or_file_in_the_folder_s_place_is_unlinked_and_a_missing_one_is_no_error(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "kept").write_text("x")
    os.symlink(target, tmp_path / "scratch")
    remove_tree(str(tmp_path / "scratch"))
    assert not os.path.lexists(tmp_path / "scratch")
    assert (target / "kept").exists()
    (tmp_path / "file").write_text("x")
    remove_tree(str(tmp_path / "file"))
    assert not (tmp_path / "file").exists()
    remove_tree(str(tmp_path / "missing"))
