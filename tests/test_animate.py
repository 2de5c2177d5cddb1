"""Animations of recorded games (``python -m buttonup_env.animate``) and the render helpers."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from buttonup_env.envs import render
from buttonup_env.game.records import problem, read_records
from buttonup_env.game.rules import State
from buttonup_env.ui import animate

Image = pytest.importorskip("PIL.Image")

ROUND_ID = "s20261129-r0"  # two extra turns, then two overflows
MATCH_ID = "s20261129-m28"  # two rounds, target 10
SIZE = 400


def _record(path: Path, record_id: str) -> dict[str, Any]:
    return next(line.record for line in read_records(path) if line.name == record_id)


def _gif_frames(path: Path) -> tuple[list[np.ndarray], list[int], dict[str, Any]]:
    with Image.open(path) as image:
        info = dict(image.info)
        frames, durations = [], []
        for n in range(image.n_frames):
            image.seek(n)
            frames.append(np.asarray(image.convert("RGB")))
            durations.append(image.info["duration"])
    return frames, durations, info


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = animate.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _final_states(record: dict[str, Any]) -> list[tuple[State, State]]:
    """(first position, final position) of every round of a round or match record."""
    rounds = record.get("rounds", [record])
    result, state = [], None
    for round_ in rounds:
        if state is None:
            target = record.get("target", 15) if "rounds" in record else 15
            start = State.new_round(round_["layout"], round_["first"], target=target)
        else:
            start = state.next_round(round_["layout"])
        state = start
        for slot in round_["moves"]:
            state = state.play(slot)
        result.append((start, state))
    return result


# --- a round as a GIF ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def round_gif(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    path = tmp_path_factory.mktemp("gif") / "round.gif"
    status = animate.main([str(data_dir / "rounds.jsonl"), "--id", ROUND_ID, "--out", str(path)])
    assert status == 0
    return path


def test_round_gif_has_18_frames_that_differ(round_gif: Path, data_dir: Path) -> None:
    record = _record(data_dir / "rounds.jsonl", ROUND_ID)
    frames, durations, info = _gif_frames(round_gif)
    assert len(frames) == animate.frame_count(record) == 1 + 2 * 8 + 1
    assert info["loop"] == 0
    assert {f.shape for f in frames} == {frames[0].shape}
    height, width, _ = frames[0].shape
    assert width == SIZE and SIZE < height <= SIZE * 1.15
    for before, after in itertools.pairwise(frames):
        assert not np.array_equal(before, after)
    # set-up 2x, each move frame 1x, the last frame (the round's end) 5x the 800 ms delay
    assert durations == [1600] + [800] * 16 + [4000]


def test_round_gif_boards_are_the_environment_pictures(round_gif: Path, data_dir: Path) -> None:
    record = _record(data_dir / "rounds.jsonl", ROUND_ID)
    frames, _, _ = _gif_frames(round_gif)
    [(start, final)] = _final_states(record)
    assert np.array_equal(frames[0][:SIZE], render.rgb_array(start))
    assert np.array_equal(frames[-1][:SIZE], render.rgb_array(final, last_move=record["moves"][-1]))


def test_move_frames_highlight_the_lifted_stack_then_the_sown_buttons(
    round_gif: Path, data_dir: Path
) -> None:
    record = _record(data_dir / "rounds.jsonl", ROUND_ID)
    frames, _, _ = _gif_frames(round_gif)
    state = State.new_round(record["layout"], record["first"])
    for i, slot in enumerate(record["moves"]):
        lift, sown = frames[1 + 2 * i][:SIZE], frames[2 + 2 * i][:SIZE]
        lifted = {slot: len(state.board[slot])}
        assert np.array_equal(lift, render.rgb_array(state, highlight=lifted))
        after = state.play(slot)
        grown = {
            t: len(after.board[t]) - len(state.board[t])
            for t in range(9)
            if len(after.board[t]) > len(state.board[t])
        }
        assert sum(grown.values()) == len(state.board[slot])
        assert np.array_equal(sown, render.rgb_array(after, last_move=slot, highlight=grown))
        state = after


def test_captions_say_who_moves_and_when_a_turn_is_extra(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _record(data_dir / "rounds.jsonl", ROUND_ID)
    captions: list[list[str]] = []

    def keep(image: np.ndarray, lines: Any, scale: int | None = None) -> np.ndarray:
        captions.append(["".join(text for text, _ in line) for line in lines])
        return image

    monkeypatch.setattr(render, "caption", keep)
    list(animate.record_frames(record, size=200))
    assert len(captions) == 18
    assert "Red starts" in captions[0][1]
    for i, (mover, extra) in enumerate(zip(record["movers"], record["extra_turn"], strict=True)):
        lift, sown = captions[1 + 2 * i], captions[2 + 2 * i]
        name = render.COLOR_NAMES[mover]
        assert lift[0].startswith(f"Move {i + 1} of 8: {name} lifts slot {record['moves'][i]}")
        assert (f"{name} again (extra turn)" in sown[1]) == extra
    assert captions[-3][1].startswith("overflow")  # move 8: 5 buttons, 1 other stack
    assert captions[-2][1] == "one stack left: the round is over"
    strength = record["strength"]
    assert captions[-1][0].startswith(f"Strength Red {strength['R']}, Black {strength['B']}")
    assert "Black scores 8" in captions[-1][0]


# --- a match, PNG frames ---------------------------------------------------------------------


def test_match_gif_shows_every_round_and_the_score_between(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _record(data_dir / "matches.jsonl", MATCH_ID)
    path = tmp_path / "match.gif"
    status, out, err = _run(capsys, data_dir / "matches.jsonl", "--id", MATCH_ID, "--out", path)
    assert status == 0 and err == ""
    assert out.startswith(f"wrote {path}: 36 frames")
    frames, durations, _ = _gif_frames(path)
    assert len(frames) == animate.frame_count(record) == 36
    (start1, end1), (start2, end2) = _final_states(record)
    assert np.array_equal(frames[0][:SIZE], render.rgb_array(start1))
    last_move = record["rounds"][0]["moves"][-1]
    assert np.array_equal(frames[17][:SIZE], render.rgb_array(end1, last_move=last_move))
    assert start2.score == end1.score != {"R": 0, "B": 0}
    assert np.array_equal(frames[18][:SIZE], render.rgb_array(start2))  # shows the score
    assert end2.match_over and end2.score == record["score"]
    assert durations[17] == 3 * 800 and durations[-1] == 5 * 800


def test_one_round_of_a_match(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "round2.gif"
    args = (data_dir / "matches.jsonl", "--id", MATCH_ID, "--round", 2, "--out", path)
    status, _, _ = _run(capsys, *args)
    assert status == 0
    frames, _, _ = _gif_frames(path)
    _, (start2, _) = _final_states(_record(data_dir / "matches.jsonl", MATCH_ID))
    assert len(frames) == 18
    assert np.array_equal(frames[0][:SIZE], render.rgb_array(start2))
    status, _, err = _run(capsys, *args[:4], 3, "--out", path)
    assert status == 2 and err.count("\n") == 1 and "no round 3" in err


def test_png_frames_in_a_folder_and_beside_a_png_name(
    tmp_path: Path, round_gif: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = data_dir / "rounds.jsonl"
    status, _, _ = _run(capsys, records, "--id", ROUND_ID, "--out", f"{tmp_path / 'frames'}/")
    assert status == 0
    names = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert names == [f"{ROUND_ID}-{n:03d}.png" for n in range(18)]
    status, _, _ = _run(capsys, records, "--id", ROUND_ID, "--out", tmp_path / "game.png")
    assert status == 0
    assert sorted(p.name for p in tmp_path.glob("game*")) == [
        f"game-{n:03d}.png" for n in range(18)
    ]
    gif, _, _ = _gif_frames(round_gif)
    for n in (0, 5, 17):
        with Image.open(tmp_path / f"game-{n:03d}.png") as png:
            assert np.array_equal(np.asarray(png.convert("RGB")), gif[n])


# --- errors: one line, no traceback ----------------------------------------------------------


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


def test_missing_id_lists_some_ids(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.gif"
    status, _, err = _run(capsys, data_dir / "rounds.jsonl", "--id", "nope", "--out", out)
    assert status == 1
    line = _one_error_line(err)
    assert "'nope'" in line and ROUND_ID in line and "more" in line
    assert not out.exists()


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    status, _, err = _run(capsys, missing, "--id", "x", "--out", tmp_path / "x.gif")
    assert status == 2
    assert str(missing) in _one_error_line(err)


@pytest.mark.parametrize(
    "record_id", [line.name for line in read_records(Path(__file__).parent / "data/invalid.jsonl")]
)
def test_invalid_record_says_why(
    record_id: str, tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = data_dir / "invalid.jsonl"
    out = tmp_path / "x.gif"
    status, _, err = _run(capsys, path, "--id", record_id, "--out", out)
    assert status == 1
    reason = problem(_record(path, record_id))
    assert reason is not None
    assert _one_error_line(err) == f"error: record {record_id!r} is invalid: {reason}"
    assert not out.exists()


def test_unreadable_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text('{"id": "a"\n')
    status, _, err = _run(capsys, path, "--id", "line 1", "--out", tmp_path / "x.gif")
    assert status == 1
    assert "not JSON" in _one_error_line(err)


def test_bad_output_name_is_a_usage_error(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        animate.main([str(data_dir / "rounds.jsonl"), "--id", ROUND_ID, "--out", "x.jpg"])
    assert exit_.value.code == 2
    assert "must end in .gif or .png" in capsys.readouterr().err


def test_without_pillow_says_what_to_install(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    out = tmp_path / "x.gif"
    status, _, err = _run(capsys, data_dir / "rounds.jsonl", "--id", ROUND_ID, "--out", out)
    assert status == 2
    assert "pip install 'buttonup-env[viz]'" in _one_error_line(err)
    assert not out.exists()


# --- render helpers --------------------------------------------------------------------------


def test_highlight_rings_buttons_in_gold_and_defaults_to_nothing() -> None:
    state = State.new_round("B W W B B R W R R", "R").play(1)
    plain = render.rgb_array(state, last_move=1)
    assert np.array_equal(plain, render.rgb_array(state, last_move=1, highlight={}))
    lit = render.rgb_array(state, last_move=1, highlight={2: 1})
    gold = np.all(lit == render.RGB["highlight"], axis=2).sum()
    assert gold > np.all(plain == render.RGB["highlight"], axis=2).sum()
    assert not np.array_equal(lit, render.rgb_array(state, last_move=1, highlight={2: 2}))


@pytest.mark.parametrize("size", [200, 400])
def test_pictures_use_only_the_palette(size: int) -> None:
    state = State.new_round("B W W B B R W R R", "R").play(1).play(2)
    image = render.caption(
        render.rgb_array(state, last_move=2, size=size, highlight={3: 1, 4: 1}),
        ["Move 2 of 8", [("Red", render.RGB["R"]), (" again", render.RGB["text"])]],
    )
    assert image.shape == (size + 7 * 2 * max(size // 200, 1) + 6 * max(size // 200, 1), size, 3)
    colours = {tuple(c) for c in np.unique(image.reshape(-1, 3), axis=0)}
    assert colours <= set(render.RGB.values())
