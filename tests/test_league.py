"""The league: batched play held to the rules engine, the graded bots' choices, the
Bradley-Terry fit (known ratings recovered, intervals that cover them), ratings against a
ladder, and training/league.py's command line."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from buttonup_env.engine.numpy_backend import observations
from buttonup_env.engine.tables import game_tables
from buttonup_env.game.encoding import ENCODINGS
from buttonup_env.game.equity import best_moves, match_move_values
from buttonup_env.game.records import check_record, replay_match
from buttonup_env.game.rules import COLORS, LAYOUTS, State
from buttonup_env.players import arena, league
from buttonup_env.players.arena import PairResult, make_player, play_pairs, player_specs
from buttonup_env.players.batched import UNIFORMS, BotPlayer, PolicyPlayer, Positions
from buttonup_env.players.bots import GradedBot, GreedyBot
from buttonup_env.players.evaluation import evaluate, wilson_interval
from buttonup_env.players.exploit import behaviour_of
from buttonup_env.players.league import (
    expected_score,
    fit_ratings,
    neighbour_schedule,
    rate_against_ladder,
    round_robin,
    schedule,
)
from buttonup_env.players.policy import load_policy
from buttonup_env.players.shipped import shipped_policy_path, shipped_ratings


def positions(seed: int, count: int) -> list[State]:
    """Positions of random matches, with scores, from both sides (round ends left out)."""
    rng = np.random.default_rng(seed)
    found: list[State] = []
    while len(found) < count:
        score = {"R": int(rng.integers(15)), "B": int(rng.integers(15))}
        state = State.new_round(LAYOUTS[int(rng.integers(len(LAYOUTS)))], "RB"[rng.integers(2)],
                                score, target=15)  # fmt: skip
        while not state.round_over:
            found.append(state)
            legal = state.legal_moves()
            state = state.play(legal[int(rng.integers(len(legal)))])
    return found[:count]


def board_numbers(states: list[State]) -> tuple[np.ndarray, ...]:
    """The states' board numbers, movers, scores and starters."""
    tables = game_tables()
    boards = np.array([tables.index_of(s.board) for s in states])
    mover = np.array([COLORS.index(s.to_move) for s in states])
    score = np.array([[s.score["R"], s.score["B"]] for s in states])
    starter = np.array([COLORS.index(s.starter) for s in states])
    return boards, mover, score, starter


# --- players -----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_observations_from_board_numbers_are_the_encodings(encoding: str) -> None:
    states = positions(0, 300)
    boards, _, score, starter = board_numbers(states)
    for own in (0, 1):
        got = observations(
            game_tables(), encoding, boards, np.full(len(states), own), score, 15, starter
        )
        expected = np.stack([ENCODINGS[encoding].encode(s, COLORS[own]) for s in states])
        assert got.dtype == np.float32 and np.array_equal(got, expected)


def choice_counts(name: str, states: list[State], draws: int, seed: int) -> list[Counter]:
    """How often the batched bot ``name`` lifts each slot in each position, over ``draws``."""
    boards, mover, score, starter = board_numbers(states)
    bot = BotPlayer(name)
    rng = np.random.default_rng(seed)
    counts = [Counter() for _ in states]
    for _ in range(draws):
        uniforms = rng.random((len(states), UNIFORMS))
        slots = bot.choose(Positions(boards, mover, score, 15, starter, uniforms))
        for counter, slot in zip(counts, slots.tolist(), strict=True):
            counter[slot] += 1
    return counts


def graded_probabilities(state: State, p: float) -> dict[int, float]:
    """What GradedBot(p) plays: uniform with probability p, else uniform among the best moves
    of the match (at the state's score and starter)."""
    best = best_moves(match_move_values(state))
    legal = state.legal_moves()
    return {s: p / len(legal) + (1 - p) * (s in best) / len(best) for s in legal}


@pytest.mark.parametrize("name, p", [("perfect-0", 0.0), ("perfect-1", 1.0), ("perfect-0.3", 0.3),
                                     ("perfect", 0.0), ("random", 1.0)])  # fmt: skip
def test_graded_bots_play_as_the_perfect_bot_the_random_bot_and_between(
    name: str, p: float
) -> None:
    """perfect-0 lifts only the match's best slots, evenly (as PerfectBot); perfect-1 every
    legal slot evenly (as RandomBot); perfect-0.3 the mixture. A chi-square test over all the
    positions' counts, and no slot outside the support."""
    from scipy import stats  # not at the module's top: every xdist worker collects every module

    states = positions(1, 120)
    draws = 200
    observed, expected = [], []
    for state, counter in zip(states, choice_counts(name, states, draws, seed=2), strict=True):
        probs = graded_probabilities(state, p)
        assert set(counter) <= {s for s, q in probs.items() if q > 0}, state.notation
        for slot, q in probs.items():
            if q > 0:
                observed.append(counter[slot])
                expected.append(q * draws)
    dof = len(observed) - len(states)
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    assert stats.chi2.sf(statistic, max(dof, 1)) > 1e-4, (statistic, dof)


def test_the_greedy_bot_chooses_as_greedybot_would() -> None:
    states = positions(3, 200)
    for state, counter in zip(states, choice_counts("greedy", states, 20, seed=4), strict=True):
        assert set(counter) <= set(behaviour_of(GreedyBot())(state)), state.notation


def test_a_policy_player_chooses_as_the_policy_acts(
    tmp_path: Path, linear_policy: Callable
) -> None:
    states = positions(5, 400)
    boards, mover, score, starter = board_numbers(states)
    for encoding in ENCODINGS:
        policy = load_policy(linear_policy(tmp_path / f"{encoding}.onnx", encoding, seed=1))
        slots = PolicyPlayer(encoding, policy).choose(Positions(boards, mover, score, 15, starter))
        assert slots.tolist() == [policy.act(s) for s in states], encoding


# --- matches -----------------------------------------------------------------------------------


def test_league_matches_are_valid_records_with_the_results_counted(
    tmp_path: Path, linear_policy: Callable
) -> None:
    """Every match is replayed by the rules engine: legal moves by the player to move, the
    starting rule, the scores, the winner; the wins and rounds counted are the records'."""
    slots_policy = load_policy(linear_policy(tmp_path / "slots.onnx", "slots", seed=3))
    players = [
        make_player("random"),
        make_player("perfect-0.3"),
        make_player("greedy"),
        make_player("buttonup-ppo"),
        PolicyPlayer("slots policy", slots_policy),
    ]
    results = play_pairs(players, round_robin(5), 12, seed=7, target=9, keep_records=True)
    for result in results:
        assert len(result.records) == 12
        wins = rounds = 0
        for k, record in enumerate(result.records):
            check_record(record)
            assert record["target"] == 9
            red, black = (result.a, result.b) if k % 2 == 0 else (result.b, result.a)
            assert record["players"] == {"R": red, "B": black}  # seats alternate
            assert record["first"] == "RB"[(k // 2) % 2]  # and so does the first starter
            wins += record["players"][replay_match(record).winner] == result.a
            rounds += len(record["rounds"])
        assert (result.wins_a, result.rounds) == (wins, rounds)


def test_the_policies_moves_in_league_matches_are_their_own(
    tmp_path: Path, linear_policy: Callable
) -> None:
    policy = load_policy(linear_policy(tmp_path / "slots.onnx", "slots", seed=4))
    players = [PolicyPlayer("policy", policy), make_player("perfect-0.5")]
    (result,) = play_pairs(players, [(0, 1)], 6, seed=1, keep_records=True)
    checked = 0
    for record in result.records:
        score = {"R": 0, "B": 0}
        for round_ in record["rounds"]:
            state = State.new_round(round_["layout"], round_["first"], score)
            for slot in round_["moves"]:
                if record["players"][state.to_move] == "policy":
                    assert policy.act(state) == slot
                    checked += 1
                state = state.play(slot)
            score = state.score
    assert checked > 50


def test_the_same_seed_gives_the_same_league_and_a_pair_does_not_depend_on_the_rest() -> None:
    names = ["random", "greedy", "perfect-0.2", "perfect"]
    players = [make_player(n) for n in names]
    first = play_pairs(players, round_robin(4), 30, seed=11)
    again = play_pairs(players, round_robin(4), 30, seed=11)
    assert [r.to_dict() | {"rounds": r.rounds} for r in first] == [
        r.to_dict() | {"rounds": r.rounds} for r in again
    ]
    other = play_pairs(players, round_robin(4), 30, seed=12)
    assert [r.rounds for r in other] != [r.rounds for r in first]
    alone = play_pairs([players[1], players[2]], [(0, 1)], 30, seed=11)[0]
    inside = next(r for r in first if (r.a, r.b) == ("greedy", "perfect-0.2"))
    assert (alone.wins_a, alone.rounds) == (inside.wins_a, inside.rounds)


def test_an_illegal_choice_names_the_player_and_the_slot() -> None:
    class Broken:
        name, kind, encoding = "broken", -1, None

        def choose(self, at: Positions) -> np.ndarray:
            return np.full(len(at.boards), 9)

    with pytest.raises(ValueError, match=r"the player 'broken' made an illegal move: slot 9, wh"):
        play_pairs([Broken(), make_player("random")], [(0, 1)], 2)


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda p: play_pairs(p, [(0, 1)], 0), "matches=0"),
        (lambda p: play_pairs(p, [(0, 1)], 2, seed=-1), "seed=-1"),
        (lambda p: play_pairs(p, [(0, 0)], 2), "pair (0, 0)"),
        (lambda p: play_pairs(p, [(0, 1)], 2, target=0), "target=0"),
    ],
)
def test_play_pairs_refuses_bad_arguments(call: Callable, fragment: str) -> None:
    with pytest.raises(ValueError, match=f"^{fragment}".replace("(", r"\(").replace(")", r"\)")):
        call([make_player("random"), make_player("greedy")])


# --- schedules and players by name -------------------------------------------------------------


def connected(count: int, pairs: list[tuple[int, int]]) -> bool:
    reached, grown = {0}, True
    while grown:
        grown = False
        for i, j in pairs:
            if (i in reached) != (j in reached):
                reached |= {i, j}
                grown = True
    return len(reached) == count


def test_schedules() -> None:
    assert round_robin(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    names = [f"run/step_{i}" for i in range(30)]
    pairs = neighbour_schedule(30, 2)
    assert len(pairs) == 29 + 28 and connected(30, pairs)
    with_bots = schedule(["random", "perfect-0.1", *names], "auto", neighbours=3)
    assert len(with_bots) < len(round_robin(32)) and connected(32, with_bots)
    for reference in (0, 1):  # the bots meet everyone
        assert {j for pair in with_bots if reference in pair for j in pair} == set(range(32))
    assert schedule(names[:12]) == round_robin(12)  # up to 12: a round robin
    assert schedule(names[:13], "round-robin") == round_robin(13)
    with pytest.raises(ValueError, match="at least two players"):
        schedule(["random"])
    with pytest.raises(ValueError, match="schedule 'swiss' is not known"):
        schedule(names, "swiss")


def test_player_specs_name_bots_graded_bots_policies_and_run_folders(tmp_path: Path) -> None:
    run = tmp_path / "myrun"
    (run / "snapshots").mkdir(parents=True)
    for steps in (500, 0, 250):
        shutil.copy(
            shipped_policy_path("buttonup-ppo"), run / "snapshots" / f"step_{steps:09d}.onnx"
        )
    specs = player_specs(["random", "perfect-0.30", "buttonup-ppo", str(run)])
    assert [name for name, _ in specs] == [
        "random",
        "perfect-0.3",
        "buttonup-ppo",
        "myrun/step_000000000",
        "myrun/step_000000250",
        "myrun/step_000000500",
    ]
    assert arena.snapshot_steps(specs[-1][1]) == 500
    for bad, fragment in [
        (["random", "perfect-0.3", "perfect-0.30"], "'perfect-0.3' is given twice"),
        (["nosuchbot"], "'nosuchbot' is not a player"),
        (["perfect-1.5"], "'perfect-1.5' is not a graded bot"),
        ([str(tmp_path)], "without snapshots"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            player_specs(bad)


# --- the fit -----------------------------------------------------------------------------------


def synthetic_league(truth: dict[str, float], matches: int, rng: np.random.Generator) -> list:
    """Round-robin results drawn from the Bradley-Terry model with the ``truth`` ratings."""
    names = list(truth)
    out = []
    for i, j in round_robin(len(names)):
        a, b = names[i], names[j]
        wins = int(rng.binomial(matches, expected_score(truth[a] - truth[b])))
        out.append(PairResult(a, b, wins, matches))
    return out


@pytest.mark.slow  # 150 leagues fitted
def test_the_fit_recovers_known_ratings_and_its_intervals_cover_them() -> None:
    """Leagues drawn from known win probabilities: the ratings come back without bias and
    the 95% intervals hold the true ratings about 95% of the time."""
    truth = {"random": 0.0, "b": 120.0, "c": 300.0, "d": 450.0, "e": 700.0}
    rng = np.random.default_rng(2026)
    covered = total = 0
    errors = {name: [] for name in truth}
    for _ in range(150):
        table = fit_ratings(synthetic_league(truth, 80, rng))
        assert table.elo("random") == 0.0 and table.ratings["random"].interval == (0.0, 0.0)
        for name, true in truth.items():
            if name == "random":
                continue
            low, high = table.ratings[name].interval
            covered += low <= true <= high
            total += 1
            errors[name].append(table.elo(name) - true)
    assert 0.92 <= covered / total <= 0.98, covered / total
    for name in ("b", "c", "d", "e"):
        spread = np.std(errors[name]) / math.sqrt(len(errors[name]))
        assert abs(np.mean(errors[name])) < 4 * spread + 5, (name, np.mean(errors[name]))


def test_perfect_separation_stays_finite_and_grows_with_the_evidence() -> None:
    lows = []
    for matches in (10, 100, 1000):
        table = fit_ratings([PairResult("random", "perfect", 0, matches)])
        rating = table.ratings["perfect"]
        assert all(math.isfinite(x) for x in (rating.elo, *rating.interval))
        assert rating.interval[0] < rating.elo < rating.interval[1]
        lows.append(rating.interval[0])
        # the prior: as if PRIOR_MATCHES more matches were split evenly
        half = league.PRIOR_MATCHES / 2
        assert table.win_probability("perfect", "random") == pytest.approx(
            (matches + half) / (matches + 2 * half), rel=1e-5
        )
    assert lows == sorted(lows) and lows[0] > 0


def test_a_gap_interval_uses_the_covariance() -> None:
    rng = np.random.default_rng(1)
    table = fit_ratings(synthetic_league({"random": 0, "b": 200, "c": 250}, 200, rng))
    low, high = table.gap_interval("c", "b")
    assert low < table.elo("c") - table.elo("b") < high
    # the two ratings share the anchor's matches, so the gap is known better than the sum
    sum_sd = sum((table.ratings[n].interval[1] - table.elo(n)) for n in ("b", "c"))
    assert (high - low) / 2 < sum_sd


@pytest.mark.parametrize(
    "pairs, kwargs, fragment",
    [
        ([], {}, "no pairs"),
        ([PairResult("random", "a", 3, 5), PairResult("b", "c", 1, 5)], {}, "'b', 'c' never met"),
        ([PairResult("random", "a", 3, 5)], {"prior": 0}, "prior=0"),
        ([PairResult("random", "a", 3, 5)], {"confidence": 1.0}, "confidence=1.0"),
    ],
)
def test_the_fit_refuses_what_it_cannot_fit(pairs: list, kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        fit_ratings(pairs, **kwargs)


def test_a_rating_gap_predicts_the_score_between_two_bots() -> None:
    """A league without the pair greedy against perfect-0.25 predicts that pair's score; the
    score measured by the single-state bots, with their own matches, agrees."""
    names = ["random", "greedy", "perfect-0.5", "perfect-0.25", "perfect-0.1"]
    players = [make_player(n) for n in names]
    pairs = [pair for pair in round_robin(len(names)) if pair != (1, 3)]
    table = fit_ratings(play_pairs(players, pairs, 200, seed=5))
    low, high = (float(expected_score(g)) for g in table.gap_interval("perfect-0.25", "greedy"))
    measured = evaluate(GradedBot(0.25), GreedyBot(), 300, seed=8, regret=False)
    seen_low, seen_high = measured.win_rate_interval
    assert seen_low <= high and low <= seen_high, ((low, high), measured.win_rate_interval)
    assert 0.6 < table.win_probability("perfect-0.25", "greedy") < 0.95


# --- rating against a ladder -------------------------------------------------------------------


def test_a_ladder_has_the_shipped_leagues_ratings_or_a_league_of_its_own() -> None:
    shipped = shipped_ratings()
    assert league.ladder_ratings() == {name: shipped[name] for name in league.DEFAULT_LADDER}
    own = league.ladder_ratings(("random", "perfect-0.3"), matches=50, seed=1)
    table = league.run_league(["random", "perfect-0.3"], 50, seed=1)
    assert own == {"random": 0.0, "perfect-0.3": table.elo("perfect-0.3")}


def test_rating_against_the_ladder_puts_a_ladder_bot_at_its_own_rating() -> None:
    ladder = ("random", "greedy", "perfect-0.25", "perfect")
    fixed = league.ladder_ratings(ladder)
    assert fixed["random"] == 0 and fixed["greedy"] < fixed["perfect-0.25"] < fixed["perfect"]
    rating = rate_against_ladder("perfect-0.25", ladder, matches=400, seed=3)
    assert rating["elo_low"] < fixed["perfect-0.25"] < rating["elo_high"]
    assert rating["ladder_matches"] == 400 and 0 < rating["ladder_score"] < 1
    assert rate_against_ladder("perfect-0.25", ladder, matches=400, seed=3) == rating
    policy = load_policy("buttonup-ppo")
    strong = rate_against_ladder(policy, ladder, matches=200, seed=3)
    assert strong["elo_low"] > fixed["perfect-0.25"]


@pytest.mark.parametrize(
    "ladder, matches, fragment",
    [
        (("random",), 10, "at least two players"),
        (("random", "nosuchbot"), 10, "'nosuchbot' is not a player"),
        (("random", "greedy"), 1, "matches=1 is not allowed; use a whole number >= 2"),
    ],
)
def test_rating_against_a_bad_ladder_is_refused(ladder: tuple, matches: int, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        rate_against_ladder("greedy", ladder, matches)


# --- training/league.py ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(training_script: Callable[[str], ModuleType]) -> ModuleType:
    return training_script("league")


def test_the_league_command_prints_the_table_and_writes_json_and_a_plot(
    cli: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out, picture = tmp_path / "league.json", tmp_path / "ladder.png"
    args = ["--players", "random", "greedy", "perfect", "--matches", "40", "--seed", "3",
            "--json", str(out), "--plot", str(picture), "--no-progress"]  # fmt: skip
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert set(data["ratings"]) == {"random", "greedy", "perfect"}
    assert data["ratings"]["random"] == {"elo": 0.0, "interval": [0.0, 0.0], "matches": 80}
    assert next(iter(data["ratings"])) == "perfect"  # best first
    assert [(p["a"], p["b"], p["matches"]) for p in data["pairs"]] == [
        ("random", "greedy", 40), ("random", "perfect", 40), ("greedy", "perfect", 40)
    ]  # fmt: skip
    assert data["command"].startswith("python training/league.py --players random greedy")
    for name, entry in data["ratings"].items():
        assert f"{entry['elo']:.0f}" in next(line for line in printed.splitlines()
                                              if line.startswith(name + " "))  # fmt: skip
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(args) == 2  # the files are kept ...
    assert capsys.readouterr().err == f"error: --json {out} exists; give --force to replace it\n"
    assert cli.main([*args, "--force"]) == 0  # ... unless --force: the same seed, the same league
    assert json.loads(out.read_text())["ratings"] == data["ratings"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--players", "random", "nosuchbot"], "'nosuchbot' is not a player"),
        (["--players", "random"], "--players needs at least two players"),
        ([], "--players needs at least two players"),
        (["--players", "random", "greedy", "--matches", "0"], "--matches is 0; it must be a whole"),
        (["--players", "random", "missing.onnx"], "'missing.onnx' is not a player"),
        (["--players", "random", "perfect-2"], "'perfect-2' is not a graded bot"),
        (["--players", "random", "random"], "given twice"),
        (["--players", "random", "greedy", "--json", "/no/such/folder/x.json"], "does not exist"),
        (["--players", "random", "greedy", "--prior", "0"], "--prior must be"),
    ],
)
def test_the_league_command_refuses_bad_input_in_one_line(
    cli: ModuleType, args: list[str], fragment: str, capsys: pytest.CaptureFixture
) -> None:
    assert cli.main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err, err


def test_one_run_folder_is_a_league_of_its_snapshots(
    cli: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """docs/league.md's lineage league: --players RUN alone rates its snapshots; the first
    is fixed at 0 (no bot in it)."""
    run = tmp_path / "myrun"
    (run / "snapshots").mkdir(parents=True)
    for steps in (0, 250):
        shutil.copy(
            shipped_policy_path("buttonup-ppo"), run / "snapshots" / f"step_{steps:09d}.onnx"
        )
    out = tmp_path / "lineage.json"
    assert cli.main(["--players", str(run), "--schedule", "neighbours", "--matches", "4",
                     "--json", str(out), "--no-progress"]) == 0  # fmt: skip
    data = json.loads(out.read_text())
    assert set(data["ratings"]) == {"myrun/step_000000000", "myrun/step_000000250"}
    assert data["fixed"] == {"myrun/step_000000000": 0.0}
    (run / "snapshots" / "step_000000250.onnx").unlink()
    assert cli.main(["--players", str(run), "--no-progress"]) == 2
    assert "at least two players" in capsys.readouterr().err


def test_a_run_folder_past_the_bound_or_with_links_is_refused_before_a_policy_loads(
    cli: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before: the 1,000-player bound was checked before a run folder gave its snapshots
    (1,500 of them held the league at 1.28 GB, still loading after 60 s), and links in the
    folder were followed. The snapshots here are empty files: loading any would fail."""
    big = tmp_path / "big"
    (big / "snapshots").mkdir(parents=True)
    for steps in range(1500):
        (big / "snapshots" / f"step_{steps:09d}.onnx").touch()
    start = time.monotonic()
    assert cli.main(["--players", str(big), "random", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "error: --players gives 1,501 players, its run folders' snapshots counted; a league "
        "has at most 1,000\n"
    )
    assert time.monotonic() - start < 5
    linked = tmp_path / "linked"
    (linked / "snapshots").mkdir(parents=True)
    policy = shipped_policy_path("buttonup-ppo")
    shutil.copy(policy, linked / "snapshots" / "step_000000000.onnx")
    (linked / "snapshots" / "step_000000250.onnx").symlink_to(policy)
    away = tmp_path / "away"
    away.mkdir()
    shutil.copy(policy, away / "step_000000500.onnx")
    (tmp_path / "dir-linked").mkdir()
    (tmp_path / "dir-linked" / "snapshots").symlink_to(away)
    for run, link in [
        (linked, linked / "snapshots" / "step_000000250.onnx"),
        (tmp_path / "dir-linked", tmp_path / "dir-linked" / "snapshots"),
    ]:
        assert cli.main(["--players", str(run), "random", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: {link} is a symbolic link; a safe folder holds none (a link could lead a "
            "read or a write outside the folder)\n"
        ), err
    (linked / "snapshots" / "step_000000250.onnx").unlink()
    (tmp_path / "named").symlink_to(linked)  # the folder named may be a link
    assert player_specs([str(tmp_path / "named")]) == [
        ("named/step_000000000", str(tmp_path / "named" / "snapshots" / "step_000000000.onnx"))
    ]


def test_a_malformed_flag_exits_with_status_2(cli: ModuleType) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--players", "random", "greedy", "--matches", "many"])
    assert stopped.value.code == 2


def test_a_league_without_the_random_bot_fixes_its_first_player(
    cli: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "l.json"
    assert cli.main(["--players", "greedy", "perfect-0.5", "--matches", "20", "--json",
                     str(out), "--no-progress"]) == 0  # fmt: skip
    assert "greedy fixed at 0" in capsys.readouterr().out
    assert json.loads(out.read_text())["fixed"] == {"greedy": 0.0}


def test_wilson_and_the_fit_agree_on_a_single_pair() -> None:
    """One pair: the fitted probability is the observed share with the prior's half match,
    and its interval lies near the Wilson interval of the share."""
    table = fit_ratings([PairResult("random", "x", 30, 100)], prior=1.0)
    assert table.win_probability("random", "x") == pytest.approx(30.5 / 101, rel=1e-5)
    low_x, high_x = table.ratings["x"].interval
    low, high = 1 - float(expected_score(high_x)), 1 - float(expected_score(low_x))
    wilson = wilson_interval(30, 100)
    assert abs(low - wilson[0]) < 0.02 and abs(high - wilson[1]) < 0.02
