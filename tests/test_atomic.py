"""Atomic writes: a reader sees the old file or the whole new one."""

import os
import stat
from pathlib import Path

import pytest

from light_llm.atomic import (
    atomic_file,
    check_picture_path,
    save_figure,
    write_atomically,
    write_folder_atomically,
)
from light_llm.errors import OutputError


def test_write_atomically_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "file.json"
    write_atomically(path, b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert os.listdir(path.parent) == ["file.json"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "file.json"
    write_atomically(path, b"old")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.json"]


def test_an_error_inside_the_block_keeps_the_old_file(tmp_path):
    path = tmp_path / "tokens.bin"
    write_atomically(path, b"old")
    with pytest.raises(RuntimeError), atomic_file(path) as file:
        file.write(b"partial")
        raise RuntimeError("killed mid-write")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["tokens.bin"]


def test_files_get_the_permissions_of_a_normally_created_file(tmp_path):
    reference = tmp_path / "plain"
    reference.write_bytes(b"x")  # open() applies the umask to 0o666
    path = tmp_path / "atomic"
    write_atomically(path, b"x")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(reference.stat().st_mode)


def test_a_picture_is_drawn_over_a_png_only(tmp_path):
    """save_figure redraws a PNG and refuses any other file at its path, a link to one
    included, leaving it as it was; check_picture_path also asks for a .png name in a folder
    that exists."""
    from matplotlib.figure import Figure

    picture = tmp_path / "a.png"
    for _ in range(2):
        save_figure(Figure(), picture)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = tmp_path / "corpus.png"
    text.write_text("to be or not to be", encoding="utf-8")
    link = tmp_path / "link.png"
    link.symlink_to(text)
    for path in (text, link):
        with pytest.raises(OutputError, match="is a file that is not a PNG picture"):
            save_figure(Figure(), path)
    assert text.read_text(encoding="utf-8") == "to be or not to be" and link.is_symlink()
    assert check_picture_path(picture, "--plot") == picture
    assert check_picture_path(tmp_path / "new.PNG") == tmp_path / "new.PNG"
    assert check_picture_path(tmp_path / "new" / "a.png") == tmp_path / "new" / "a.png"
    before = sorted(tmp_path.iterdir())
    check_picture_path(tmp_path / "b.png")
    assert sorted(tmp_path.iterdir()) == before  # its trial file is gone, no folder made
    for path, message in [
        (tmp_path / "a.txt", "give a name ending in .png"),
        (text / "sub" / "a.png", f"{text} is a file, not a folder"),
        (text, "not a PNG picture"),
    ]:
        with pytest.raises(OutputError, match=message):
            check_picture_path(path, "--plot")
    (tmp_path / "dir.png").mkdir()
    with pytest.raises(OutputError, match="is a folder"):
        check_picture_path(tmp_path / "dir.png")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="writes into /proc (Linux)")
def test_a_picture_in_a_folder_that_takes_no_file_is_refused_before_the_work():
    """/proc exists and is a folder, yet no file can be made in it (not even by root): the
    check tries, rather than finding out after the analysis it guards."""
    with pytest.raises(OutputError, match=r"^--plot /proc/x\.png cannot be written: "):
        check_picture_path("/proc/x.png", "--plot")


def test_the_current_folder_is_not_replaced_as_a_unit(tmp_path, monkeypatch):
    """A folder written as a unit replaces the old one whole: the current folder, or one that
    holds it, is refused in one sentence (the rename failed with "Device or resource busy",
    and would leave the shell in a removed folder), and nothing is written."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for out, said in [
        (".", "^. is the current folder, .* such as ./model\\.$"),
        (str(here), "is the current folder"),
        ("..", "^\\.\\. holds the current folder, .* such as \\.\\./model\\.$"),
    ]:
        with pytest.raises(OutputError, match=said):
            write_folder_atomically(out, {"a.txt": b"a"})
    assert sorted(tmp_path.rglob("*")) == [here]
    write_folder_atomically("model", {"a.txt": b"a"})  # a folder inside it is fine
    assert (here / "model" / "a.txt").read_bytes() == b"a"


def test_a_folder_name_too_long_for_its_swap_is_refused_before_anything_is_written(tmp_path):
    """A folder is replaced as a unit through a sibling named ``.NAME.old-<stamp>``: the longest
    name whose sibling the file system takes is written, and rewritten (which makes that
    sibling), while one byte more, or a path part over the limit, is one sentence and leaves
    nothing behind (it was an OSError "File name too long" out of the API's save)."""
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    longest = tmp_path / ("n" * (limit - len(".") - len(".old-") - 20 - 1 - 8))
    write_folder_atomically(longest, {"a.txt": b"1"})
    write_folder_atomically(longest, {"a.txt": b"2"})  # the old version moved aside, then removed
    assert (longest / "a.txt").read_bytes() == b"2"
    assert sorted(path.name for path in tmp_path.iterdir()) == [longest.name]
    too_long = tmp_path / (longest.name + "n")
    with pytest.raises(
        OutputError, match=rf"its name is {limit - 34} bytes.* at most {limit - 35} "
    ):
        write_folder_atomically(too_long, {"a.txt": b"1"})
    with pytest.raises(OutputError, match=rf"over the {limit} this file system allows a name"):
        write_folder_atomically(tmp_path / ("p" * (limit + 1)) / "model", {"a.txt": b"1"})
    assert sorted(path.name for path in tmp_path.iterdir()) == [longest.name]
