"""The audit of every decision a player can meet (buttonup_env.players.audit)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from buttonup_env.engine.tables import game_tables
from buttonup_env.game.equity import match_move_values
from buttonup_env.game.rules import State, parse_board
from buttonup_env.players.audit import KINDS, Audit, audit, reachable_decisions
from buttonup_env.players.bots import MarginBot, PerfectBot, RandomBot


def test_every_real_choice_at_0_0_is_audited() -> None:
    """774,168 decisions with two legal moves or more: every position reachable from the
    1,680 set-ups and both starters under any play, with its mover."""
    tables = game_tables()
    rounds = [reachable_decisions(tables, s) for s in (0, 1)]
    assert sum(len(r.boards) for r in rounds) == 774_168
    assert all((tables.num_legal[r.boards] >= 2).all() for r in rounds)
    assert len(rounds[0].boards) == len(rounds[1].boards)  # the colours swapped


def test_perfect_play_of_the_match_makes_no_match_mistake() -> None:
    found = audit(PerfectBot())
    assert found.total.choices == 774_168
    assert found.total.wrong == 0 and found.total.loss == 0.0 and found.worst == []
    assert found.total.wrong_round > 0  # it gives round points away where the match asks


@pytest.fixture(scope="module")
def margin_at_0_0() -> Audit:
    """The margin player's audit at 0-0 (a few seconds: made once)."""
    return audit(MarginBot())


def test_the_margin_player_errs_only_where_the_match_asks_for_another_move(
    margin_at_0_0: Audit,
) -> None:
    """The issue's figure: the margin player loses 0.000027 of winning probability per real
    choice at 0-0, and never a round point."""
    found = margin_at_0_0
    assert found.total.mean_loss == pytest.approx(0.000027, abs=5e-7)
    assert found.total.wrong_round == 0
    agree, differ = (found.by_kind[kind] for kind in KINDS)
    assert agree.wrong == 0 and differ.wrong > 0
    assert agree.choices + differ.choices == found.total.choices
    assert sum(t.choices for t in found.by_move.values()) == found.total.choices
    worst = found.worst[0]
    state = State(parse_board(worst.board), worst.mover, {"R": 0, "B": 0}, 15, worst.starter)  # type: ignore[arg-type]
    values = match_move_values(state)
    assert worst.values == pytest.approx(values)
    lifted = [slot for slot, p in worst.played.items() if p > 0]
    assert worst.loss == pytest.approx(
        np.mean([max(values.values()) - values[s] for s in lifted]), abs=1e-12
    )
    assert [d.loss for d in found.worst] == sorted((d.loss for d in found.worst), reverse=True)
    assert "0-0" in found.summary() and worst.board in found.summary()


# slow: a third audit of 2 x 774,168 choices; the margin player's audit at two scores above
# stays in the default suite
@pytest.mark.slow
def test_scores_are_audited_one_by_one() -> None:
    found = audit(RandomBot(), [(3, 4), (14, 14)], target=15, worst=0)
    assert set(found.by_score) == {(3, 4), (14, 14)}
    assert found.total.choices == 2 * 774_168
    picture = found.loss_by_score()
    assert picture.shape == (15, 15) and np.isfinite(picture[3, 4]) and np.isnan(picture[0, 0])
    assert found.worst == []


@pytest.mark.parametrize(
    ("scores", "message"),
    [([(15, 0)], "score"), ([(-1, 0)], "score"), ([], "empty"), ("some", "'all'")],
)
def test_bad_scores_are_refused(scores: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        audit(RandomBot(), scores)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_shipped_agent_at_0_0() -> None:
    """The shipped agent of the match (its card's figures): 24,930 non-optimal choices (3.22%),
    0.00106 per choice, 0.033 where it errs; well under two minutes, though it sees the score."""
    from buttonup_env import load_policy

    found = audit(load_policy("buttonup-ppo"))
    assert found.total.wrong == 24_930
    assert found.total.mean_loss == pytest.approx(0.001058, abs=1e-6)
    assert found.seconds < 120


def test_the_figures_as_data_and_the_summary_by_score() -> None:
    """``to_dict`` holds what ``summary`` prints, as JSON: the totals, by move, kind and score
    (``"R-B"``), and the worst decisions with their line; at several scores the summary names
    the scores of the largest mean loss, the largest first."""
    found = audit(MarginBot(), [(0, 0), (13, 13)], worst=3)
    data = json.loads(json.dumps(found.to_dict()))  # JSON-ready: nothing but plain data
    assert data["target"] == 15 and data["scores"] == ["0-0", "13-13"]
    assert data["asked"] == found.asked and data["seconds"] == found.seconds
    total = data["total"]
    assert total["choices"] == 2 * 774_168 == found.total.choices
    assert total["non_optimal"] == found.total.wrong > 0
    assert total["non_optimal_round"] == 0  # the margin player never gives a round point away
    assert total["mean_loss"] == pytest.approx(found.total.loss / found.total.choices)
    assert total["loss_where_wrong"] == pytest.approx(found.total.loss / found.total.wrong)
    assert set(data["by_score"]) == {"0-0", "13-13"}
    at_start = data["by_score"]["0-0"]
    assert at_start["choices"] == 774_168
    assert at_start["mean_loss"] == pytest.approx(0.000027, abs=5e-7)  # as at 0-0 alone
    assert sum(v["choices"] for v in data["by_move"].values()) == total["choices"]
    assert list(data["by_move"]) == [str(m) for m in sorted(found.by_move)]
    assert set(data["by_kind"]) == set(KINDS)
    assert len(data["worst"]) == 3
    for decision, kept in zip(data["worst"], found.worst, strict=True):
        assert decision["line"] == kept.line()
        assert decision["score"] == f"{kept.score[0]}-{kept.score[1]}"
        assert decision["loss"] == kept.loss and decision["board"] == kept.board
        assert decision["values"] == {str(s): v for s, v in kept.values.items()}

    summary = found.summary()
    assert summary.startswith("audit at 2 scores (target 15, both starters each): ")
    larger, smaller = sorted(found.by_score, key=lambda s: -found.by_score[s].mean_loss)
    line = next(x for x in summary.splitlines() if x.startswith("by score"))
    assert line.startswith("by score, the 2 of the largest mean loss: ")
    assert line.index(f"{larger[0]}-{larger[1]}: ") < line.index(f"{smaller[0]}-{smaller[1]}: ")
    assert "worst:" in summary and found.worst[0].line() in summary


def test_one_score_and_no_worst_decision_summarise_in_fewer_lines(margin_at_0_0: Audit) -> None:
    found = dataclasses.replace(margin_at_0_0, worst=[])  # as audit(..., worst=0) leaves it
    summary = found.summary()
    assert summary.startswith("audit at 0-0 (target 15, both starters each): ")
    assert "by score" not in summary  # one score: nothing to compare
    assert "worst" not in summary and found.to_dict()["worst"] == []
