"""A judge that a planted compiler cache cannot break (gpulab.safetree,
gpulab.judge.policy.trim_cache).

A submission once made ~1500 nested folders in its own compiler cache: the
judge's os.walk raised RecursionError ("could not run this check"), and
every later check of a file at that path failed the same way until the
cache was deleted by hand. Each test plants what a sandbox could leave.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpulab.safetree import TRASH, remove_tree, set_aside, survey

DEEP = 1500


def nest(root: Path, depth: int = DEEP) -> None:
    """`root`/d/d/d/... `depth` folders deep, made one level at a time from
    the folder above (a path that long is past what one call can name)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            down = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = down
        with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
            f.write("x")
    finally:
        os.close(fd)


def plant(cache: Path, outside: Path, depth: int = 40) -> None:
    """Everything the issue names, in one cache: the nesting (past the
    judge's 32 levels; 1500 where the recursion is the point: a rmdir costs
    4.6 ms on this box's disk), a link loop, a link out of the cache, a
    fifo, and a folder its owner cannot enter."""
    nest(cache / "deep", depth)
    os.symlink("loop", cache / "loop")  # a link to itself
    os.symlink(cache / "b", cache / "a")
    os.symlink(cache / "a", cache / "b")
    outside.write_text("keep me")
    os.symlink(outside, cache / "out")
    os.mkfifo(cache / "fifo")
    shut = cache / "shut"
    (shut / "inner").mkdir(parents=True)
    (shut / "inner" / "f").write_text("y")
    shut.chmod(0)


def test_survey_and_remove_a_tree_1500_deep(tmp_path):
    nest(tmp_path / "c")
    found = survey(tmp_path / "c", max_depth=32)
    assert found.odd == "folders nested over 32 deep" and not found.clean
    assert survey(tmp_path / "c", max_depth=2000, max_entries=10**6).clean
    assert remove_tree(tmp_path / "c")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("what", ["loop", "fifo", "out"])
def test_survey_names_what_is_neither_a_file_nor_a_folder(tmp_path, what):
    cache = tmp_path / "c"
    (cache / "x").mkdir(parents=True)
    (cache / "x" / "kernel.cubin").write_bytes(b"\0" * 100)
    assert survey(cache).clean
    if what == "loop":
        os.symlink("loop", cache / "x" / "loop")
    elif what == "fifo":
        os.mkfifo(cache / "x" / "fifo")
    else:
        os.symlink("/etc/passwd", cache / "x" / "out")
    found = survey(cache)
    kind = "a fifo" if what == "fifo" else "a link"
    assert found.odd == f"x/{what} is {kind}", found


def test_an_unreadable_folder_is_odd_and_is_removed_all_the_same(tmp_path):
    cache = tmp_path / "c"
    (cache / "shut" / "inner").mkdir(parents=True)
    (cache / "shut" / "inner" / "f").write_text("y")
    (cache / "shut").chmod(0)
    if os.geteuid() != 0:  # root reads any folder: nothing odd to see there
        assert "cannot" in survey(cache).odd
    assert remove_tree(cache)
    assert not cache.exists()


def test_removing_follows_no_link_and_keeps_what_lies_outside(tmp_path):
    cache, outside = tmp_path / "c", tmp_path / "precious.txt"
    cache.mkdir()
    plant(cache, outside)
    assert remove_tree(cache)
    assert not os.path.lexists(cache)
    assert outside.read_text() == "keep me"


def test_a_budget_leaves_the_rest_for_the_next_call(tmp_path):
    cache = tmp_path / "c"
    for i in range(50):
        (cache / f"k{i}").mkdir(parents=True)
        (cache / f"k{i}" / "f").write_text("z")
    assert not remove_tree(cache, budget=10)
    assert cache.exists()
    assert remove_tree(cache)
    assert not cache.exists()


def test_set_aside_frees_the_name_at_once_and_clears_what_is_left(tmp_path):
    cache = tmp_path / "cache" / "0123456789abcdef"
    nest(cache, 50)
    assert set_aside(cache, budget=5)  # renamed at once; the rest waits
    assert not os.path.lexists(cache)
    assert [p.name for p in cache.parent.iterdir() if TRASH in p.name]
    cache.mkdir()
    set_aside(cache)
    assert list(cache.parent.iterdir()) == []


def test_trim_cache_empties_a_planted_cache_with_a_note_and_never_raises(tmp_path):
    from gpulab.judge.policy import trim_cache

    cache = tmp_path / ".gpulab" / "cache" / "0123456789abcdef"
    cache.mkdir(parents=True)
    (cache / "ok").write_text("a compiled kernel")
    assert trim_cache(cache) == ""  # a plain cache is kept
    assert (cache / "ok").exists()
    plant(cache, tmp_path / "outside.txt")
    note = trim_cache(cache)
    assert "emptied this file's compiler cache" in note, note
    assert not os.path.lexists(cache)
    assert (tmp_path / "outside.txt").read_text() == "keep me"
    assert list(cache.parent.iterdir()) == []


def test_a_check_after_a_planted_cache_runs_and_says_what_it_emptied(tmp_path, course):
    """The real path: a file whose compiler cache holds all of the above is
    checked, and passes, with a note; it was "could not run this check:
    RecursionError" for this check and every later one."""
    from gpulab.judge.policy import cache_dir
    from gpulab.lab.runner import check_request, run_check

    lesson = course.find("softmax_row")
    path = tmp_path / "softmax_row.py"
    path.write_text(lesson.reference_path.read_text())
    workspace = tmp_path / "workspace"
    cache = cache_dir(check_request(lesson, path, workspace=str(workspace)), tmp_path)
    cache.mkdir(parents=True)
    plant(cache, tmp_path / "outside.txt", DEEP)
    r = run_check(lesson, path, device="cpu", timing=False, workspace=str(workspace)).to_json()
    assert r["status"] == "passed", (r["summary"], r.get("message", "")[-2000:])
    assert any("emptied this file's compiler cache" in n for n in r["notes"]), r["notes"]
    assert (tmp_path / "outside.txt").read_text() == "keep me"
    assert survey(cache).clean
