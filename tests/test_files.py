"""``buttonup_env.game.files`` and the output checks of ``buttonup_env.ui.cli``: a file is
written whole or not at all, never through a link planted where it goes, and a command's
outputs are checked, the same way everywhere, before any work."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from buttonup_env.game.files import FILE_MODE, append_text, read_regular_file, write_atomically
from buttonup_env.ui.cli import OutputError, check_outputs, make_output_folder, write_output


def test_an_atomic_write_replaces_a_planted_link_and_leaves_its_target_alone(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept")
    out = tmp_path / "out.onnx"
    out.symlink_to(target)
    for decoy in ("out.onnx.tmp", "out.tmp.onnx", ".out.onnx.tmp"):  # earlier fixed names
        (tmp_path / decoy).symlink_to(target)
    write_atomically(out, b"new")
    assert target.read_text() == "kept"
    assert not out.is_symlink() and out.read_bytes() == b"new"
    assert stat.S_IMODE(out.stat().st_mode) == FILE_MODE  # as open() would make it
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".out.onnx.tmp", "elsewhere.txt", "out.onnx", "out.onnx.tmp", "out.tmp.onnx"]


def test_an_atomic_write_makes_no_folder_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "missing" / "x.json", b"{}")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path / "folder", b"{}")  # the rename fails: nothing is left
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]


def test_append_and_read_follow_no_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("kept\n")
    link = tmp_path / "eval.jsonl"
    link.symlink_to(target)
    with pytest.raises(OSError):
        append_text(link, "{}\n")
    with pytest.raises(OSError):
        read_regular_file(link, 100)
    assert target.read_text() == "kept\n"
    plain = tmp_path / "plain.jsonl"
    append_text(plain, "a\n")
    append_text(plain, "b\n")
    assert read_regular_file(plain, 4) == b"a\nb\n"
    with pytest.raises(OSError, match="larger than 3 bytes"):
        read_regular_file(plain, 3)


def test_a_device_or_a_pipe_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo):  # endless, or waiting for a writer
        with pytest.raises(OSError, match="not a regular file"):
            read_regular_file(path, 10)


# --- a command's outputs -----------------------------------------------------------------------


def refused(outputs: list, inputs: list = (), force: bool = False) -> str:  # type: ignore[assignment]
    with pytest.raises(OutputError) as error:
        check_outputs(outputs, inputs, force)
    return str(error.value)


def test_an_output_that_is_an_input_is_refused_even_with_force(tmp_path: Path) -> None:
    model = tmp_path / "mine.onnx"
    model.write_bytes(b"weights")
    says = refused([("--json", model)], [("--model", model)], force=True)
    assert says == (
        f"--json {model} is also --model, which the command reads; an output never replaces "
        "an input"
    )
    other_name = tmp_path / "sub" / ".." / "mine.onnx"
    (tmp_path / "sub").mkdir()
    assert "is also --model" in refused([("--json", other_name)], [("--model", model)], True)
    assert model.read_bytes() == b"weights"


def test_two_outputs_of_one_file_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    says = refused([("--json", out), ("--record", out)])
    assert says == f"--json {out} and --record {out} are the same file; give each output its own"


def test_an_existing_file_is_kept_unless_force(tmp_path: Path) -> None:
    out = tmp_path / "package.json"
    out.write_text("unrelated")
    assert refused([("the card of --out", out)]) == (
        f"the card of --out {out} exists; give --force to replace it"
    )
    check_outputs([("the card of --out", out)], force=True)
    check_outputs([("--json", None), ("--record", tmp_path / "new.jsonl")])  # None: not asked


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: tmp / "a" / "b" / "c" / "x.onnx", "the folder {tmp}/a/b/c does not exist"),
        (lambda tmp: Path("/etc/passwd/x.onnx"), "/etc/passwd is not a folder"),
        (lambda tmp: tmp, "is a folder; give the file to write"),
        (lambda tmp: Path("/dev/null"), "is not a regular file (a device, a pipe or a socket)"),
    ],
    ids=["missing folders", "a file as folder", "a folder", "a device"],
)
def test_an_output_that_cannot_be_written_is_one_sentence(
    tmp_path: Path, make: object, says: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    assert says.format(tmp=tmp_path) in refused([("--out", path)], force=True)
    assert not (tmp_path / "a").exists()  # no folder was made


def test_an_output_that_is_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("kept")
    (tmp_path / "x.json").symlink_to(target)
    assert "is a symbolic link" in refused([("--json", tmp_path / "x.json")], force=True)


def test_an_output_folder_is_made_but_not_its_folder(tmp_path: Path) -> None:
    assert make_output_folder("--out", tmp_path / "report").is_dir()
    assert make_output_folder("--out", tmp_path / "report").is_dir()  # it may exist
    with pytest.raises(OutputError, match=r"the folder .*/a does not exist"):
        make_output_folder("--out", tmp_path / "a" / "report")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file; give a folder"):
        make_output_folder("--out", tmp_path / "file")
    with pytest.raises(OutputError, match=r"^--out /proc/self/x cannot be made \("):
        make_output_folder("--out", "/proc/self/x")
    assert not (tmp_path / "a").exists()


def test_an_output_that_cannot_be_written_says_why(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"^cannot write /dev/full/x \(Not a directory\)$"):
        write_output("/dev/full/x", b"")
