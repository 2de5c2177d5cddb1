"""``python_button_up``, the OpenSpiel game (buttonup_env.openspiel): OpenSpiel's own checks, the
rules engine move for move, the solver against expectiminimax, the package's exploitability
against OpenSpiel's, MCTS against the bots, and the players as OpenSpiel bots and policies."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyspiel", reason="needs the openspiel extra: pip install -e '.[openspiel]'")

import pyspiel
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import evaluate_bots, exploitability, mcts, minimax

import buttonup_env.openspiel as bo
from buttonup_env.envs.env import make_opponent
from buttonup_env.game import solver
from buttonup_env.game.encoding import MatchSlotEncoding
from buttonup_env.game.match import Match
from buttonup_env.game.rules import LAYOUTS, MAX_ROUND_MARGIN, State, format_board, parse_board
from buttonup_env.players import exploit
from buttonup_env.players.bots import make_bot
from buttonup_env.players.shipped import shipped_policy_path

WORKED_EXAMPLE = "B W W B B R W R R"  # docs/rules.md
CHANCE = pyspiel.PlayerId.CHANCE


def load(**params: Any) -> pyspiel.Game:
    return pyspiel.load_game(bo.GAME_NAME, params)


def round_game(layout: str | tuple[str, ...], first: str | None = None) -> pyspiel.Game:
    text = layout if isinstance(layout, str) else format_board(layout)
    return load(episode="round", layout=text, **({"first": first} if first else {}))


def random_episode(game: pyspiel.Game, seed: int) -> Iterator[pyspiel.State]:
    """The states of one episode: chance outcomes and moves drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    state = game.new_initial_state()
    yield state.clone()
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probabilities = zip(*state.chance_outcomes(), strict=True)
            state.apply_action(int(rng.choice(outcomes, p=probabilities)))
        else:
            legal = state.legal_actions()
            state.apply_action(legal[int(rng.integers(len(legal)))])
        yield state.clone()


# --- loading: every parameter, the game's facts, bad parameters ----------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"target": 3},
        {"episode": "round"},
        {"layout": WORKED_EXAMPLE},
        {"first": "B"},
        {"episode": "round", "layout": WORKED_EXAMPLE, "first": "R"},
        {"target": 1000, "max_rounds": 5},
    ],
    ids=repr,
)
def test_load_game_takes_every_parameter(params: dict[str, Any]) -> None:
    game = load(**params)
    assert game.get_parameters() == {**bo.PARAMETERS, **params}
    assert game.num_players() == 2 and game.num_distinct_actions() == 9
    assert game.observation_tensor_shape() == [MatchSlotEncoding.size]
    rounds = (
        1
        if params.get("episode") == "round"
        else params.get("max_rounds") or 2 * params.get("target", 15) + 19
    )
    assert game.max_game_length() == 8 * rounds
    assert game.utility_sum() == 0.0
    # the game and a state come back from OpenSpiel's strings (the layout holds spaces)
    again = pyspiel.load_game(str(game))
    assert again.get_parameters() == game.get_parameters()
    state = game.new_initial_state()
    copy = pyspiel.deserialize_game_and_state(pyspiel.serialize_game_and_state(game, state))[1]
    assert str(copy) == str(state)


def test_chance_nodes_draw_the_starter_then_each_layout() -> None:
    state = load().new_initial_state()
    assert state.is_chance_node() and state.chance_outcomes() == [(0, 0.5), (1, 0.5)]
    assert str(state).startswith(". . . . . . . . .\n")
    assert [state.action_to_string(CHANCE, a) for a in (0, 1)] == ["Red starts", "Black starts"]
    state.apply_action(1)
    outcomes = state.chance_outcomes()
    assert [a for a, _ in outcomes] == list(range(len(LAYOUTS)))
    assert sum(p for _, p in outcomes) == pytest.approx(1.0)
    assert state.action_to_string(CHANCE, 1234) == f"layout {format_board(LAYOUTS[1234])}"
    state.apply_action(1234)
    assert state.position == State.new_round(LAYOUTS[1234], "B")
    assert str(state).startswith(format_board(LAYOUTS[1234]) + "\n")
    with pytest.raises(ValueError, match="slot 9 does not exist"):
        state.apply_action(9)


@pytest.mark.parametrize(
    ("params", "chance_nodes", "outcomes"),
    [
        ({"episode": "round"}, 2, 1680),
        ({"episode": "round", "first": "R"}, 1, 1680),
        ({"episode": "round", "layout": WORKED_EXAMPLE}, 1, 2),
        ({"episode": "round", "layout": WORKED_EXAMPLE, "first": "B"}, 0, 0),
        ({"target": 2, "max_rounds": 3, "layout": WORKED_EXAMPLE, "first": "B"}, 2, 1680),
    ],
)
def test_chance_facts_are_exact(params: dict[str, Any], chance_nodes: int, outcomes: int) -> None:
    game = load(**params)
    assert game.max_chance_nodes_in_history() == chance_nodes
    assert game.max_chance_outcomes() == outcomes
    state = game.new_initial_state()
    assert state.is_chance_node() == ("layout" not in params or "first" not in params)
    seen = sum(s.is_chance_node() for s in random_episode(game, 0))
    assert seen <= chance_nodes


@pytest.mark.parametrize("first", [None, "R", "B"])
def test_round_utilities_are_the_largest_margin_the_layout_allows(first: str | None) -> None:
    game = round_game(WORKED_EXAMPLE, first)
    margins = set()

    def walk(state: pyspiel.State) -> None:
        if state.is_terminal():
            margins.add(state.returns()[0])
            assert state.returns()[1] == -state.returns()[0]
            return
        actions = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else None
        for action in actions or state.legal_actions():
            walk(state.child(action))

    walk(game.new_initial_state())
    largest = max(abs(m) for m in margins)
    assert (game.min_utility(), game.max_utility()) == (-largest, largest)
    assert largest < MAX_ROUND_MARGIN
    assert (load(episode="round").min_utility(), load(episode="round").max_utility()) == (-18, 18)
    assert (load().min_utility(), load().max_utility()) == (-1.0, 1.0)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"episode": "game"}, "episode='game' is not allowed; use one of 'match', 'round'"),
        ({"layout": "B B B"}, "layout='B B B' is not allowed; a layout is nine single buttons"),
        ({"layout": "R R R B B B W W B"}, "layout='R R R B B B W W B' is not allowed"),
        ({"layout": "RB R R B B W W W ."}, r"layout='RB R R B B W W W \.' is not allowed"),
        ({"target": 0}, "target=0 is not allowed; use a whole number of points from 1 to 1000"),
        ({"target": 1001}, "target=1001 is not allowed"),
        ({"first": "red"}, "first='red' is not allowed; use 'R'"),
        ({"max_rounds": -1}, "max_rounds=-1 is not allowed; use a whole number of rounds"),
    ],
)
def test_bad_parameters_get_one_sentence(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        load(**params)
    sentence = str(error.value).replace("e.g. ", "")
    assert "\n" not in sentence and ". " not in sentence


# --- OpenSpiel's own checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [{}, {"episode": "round"}, {"target": 2, "max_rounds": 2}, {"layout": WORKED_EXAMPLE}],
    ids=repr,
)
def test_random_sim_test(params: dict[str, Any]) -> None:
    pyspiel.random_sim_test(load(**params), num_sims=20, serialize=True, verbose=False)


FULL_TREE_GAMES = {
    "button_up_round": ({"episode": "round", "layout": WORKED_EXAMPLE, "first": "R"}, ("R",)),
    "button_up_round_drawn_starter": (
        {"episode": "round", "layout": WORKED_EXAMPLE},
        ("R", "B"),
    ),
}
"""Games small enough for api_test's whole-tree checks: one round from the worked example."""

FULL_TREE_CHECKS = (
    "test_legal_actions_empty",
    "test_number_of_nodes",
    "test_current_player_returns_terminal_player_on_terminal_nodes",
    "test_information_state_no_argument_raises_on_terminal_nodes",
    "test_constant_sum",
    "test_information_state_functions_raises_on_chance_nodes",
)
"""The whole-tree checks of OpenSpiel's ``integration_tests/api_test.py`` that apply."""

NOT_APPLICABLE = {
    # The information state is the position (the game has perfect information), so two move
    # orders that reach the same position reach the same information state: see
    # test_two_move_orders_reach_one_information_state.
    "test_game_is_perfect_recall",
    # The game provides no information state tensor; the half on strings is copied below
    # (test_information_states_of_the_two_players_never_overlap).
    "test_current_player_infosets_no_overlap_between_players",
}

PARTIAL_TREE_GAMES = {
    "button_up_match": {},
    "button_up_rounds": {"episode": "round"},
    "button_up_match_to_1": {"target": 1, "max_rounds": 3},
}
PARTIAL_TREE_CHECKS = (
    "test_sequence_lengths",
    "test_observations_raises_error_on_invalid_player",
    "test_legal_actions_returns_empty_list_on_opponent",
    "test_private_information_contents",
    "test_no_invalid_public_observations",
)
"""The checks of ``api_test.py`` on sampled states, all of them."""


def tree_counts(layout: str, firsts: tuple[str, ...]) -> tuple[int, int, int]:
    """(chance, playable, terminal) nodes of the round's tree, by the rules engine."""
    playable = terminal = 0
    states = [State.from_notation(layout, first) for first in firsts]
    while states:
        state = states.pop()
        if state.round_over:
            terminal += 1
        else:
            playable += 1
            states.extend(state.play(slot) for slot in state.legal_moves())
    return int(len(firsts) > 1), playable, terminal


@pytest.fixture(scope="module")
def api_test() -> ModuleType:
    """OpenSpiel's ``integration_tests/api_test.py``, imported by the tests that use it (its
    import takes a second or so, and every xdist worker collects every module)."""
    from open_spiel.integration_tests import api_test

    return api_test


def test_the_api_checks_are_all_accounted_for(api_test: ModuleType) -> None:
    """A check added to OpenSpiel's api_test is either run here or said not to apply."""
    full = {n for n in dir(api_test.EnforceAPIOnFullTreeBase) if n.startswith("test_")}
    partial = {n for n in dir(api_test.EnforceAPIOnPartialTreeBase) if n.startswith("test_")}
    assert full == set(FULL_TREE_CHECKS) | NOT_APPLICABLE
    assert partial == set(PARTIAL_TREE_CHECKS)


@pytest.fixture(scope="module", params=sorted(FULL_TREE_GAMES))
def full_tree(request: pytest.FixtureRequest, api_test: ModuleType) -> Iterator[type]:
    """An ``api_test.EnforceAPIOnFullTreeBase`` case class for one game, set up."""
    name = request.param
    params, firsts = FULL_TREE_GAMES[name]
    case = type(
        f"FullTree_{name}",
        (api_test.EnforceAPIOnFullTreeBase,),
        {"game_name": name, "game": load(**params)},
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(api_test.TOTAL_NUM_STATES, name, tree_counts(params["layout"], firsts))
        case.setUpClass()
        yield case
        case.tearDownClass()


@pytest.mark.parametrize("check", FULL_TREE_CHECKS)
def test_openspiel_api_checks_on_a_whole_round(full_tree: type, check: str) -> None:
    getattr(full_tree(check), check)()


@pytest.mark.parametrize("name", sorted(PARTIAL_TREE_GAMES))
def test_openspiel_api_checks_on_sampled_states(name: str, api_test: ModuleType) -> None:
    case = type(
        f"PartialTree_{name}",
        (api_test.EnforceAPIOnPartialTreeBase,),
        {"game_name": name, "game": load(**PARTIAL_TREE_GAMES[name])},
    )
    random.seed(0)  # sample_some_states draws from Python's global generator
    case.setUpClass()
    for check in PARTIAL_TREE_CHECKS:
        getattr(case(check), check)()


def test_information_states_of_the_two_players_never_overlap(full_tree: type) -> None:
    # Faithfully copied from OpenSpiel's integration_tests/api_test.py
    # (EnforceAPIOnFullTreeBase.test_current_player_infosets_no_overlap_between_players, Apache
    # License 2.0), its information state strings only: the game has no information state
    # tensor.
    states_for_player: list[set[Any]] = [set() for _ in range(full_tree.game.num_players())]
    for state in full_tree.all_states:
        if not state.is_chance_node() and not state.is_terminal():
            states_for_player[state.current_player()].add(state)
        elif state.is_chance_node():
            assert state.get_type() == pyspiel.StateType.CHANCE
        else:
            assert state.get_type() == pyspiel.StateType.TERMINAL
    information_sets_per_player = []
    for player in range(full_tree.game.num_players()):
        set_l = {s.information_state_string(player) for s in states_for_player[player]}
        information_sets_per_player.append(set_l)
    union: set[str] = set()
    for information_set in information_sets_per_player:
        union = union.union(information_set)
    assert len(union) == sum(len(x) for x in information_sets_per_player)


def test_two_move_orders_reach_one_information_state() -> None:
    """Why api_test's perfect-recall check does not apply: the information state is the
    position, and Black's 3 then 6 reaches the position that 6 then 3 reaches."""
    start = round_game(WORKED_EXAMPLE, "R").new_initial_state()
    one, other = start.clone(), start.clone()
    for slot in (1, 2, 3, 6):
        one.apply_action(slot)
    for slot in (1, 2, 6, 3):
        other.apply_action(slot)
    assert one.history() != other.history()
    assert one.information_state_string(0) == other.information_state_string(0)
    assert one.position == other.position


# --- the game is the rules engine's -------------------------------------------------------------


def play_with_ids(
    game: pyspiel.Game, seed: int, move_seed: int
) -> tuple[list[tuple[State, int | None]], pyspiel.State]:
    """Play ``game`` with chance outcomes ``integers(2)`` / ``integers(0, 1680)`` of
    ``default_rng(seed)`` (how Match and the PettingZoo env draw them) and random legal moves.

    Returns every position where a player moves with the slot lifted there, then the final
    position (with None), and the final state.
    """
    ids, moves = np.random.default_rng(seed), np.random.default_rng(move_seed)
    state = game.new_initial_state()
    seen: list[tuple[State, int | None]] = []
    while not state.is_terminal():
        if state.is_chance_node():
            state.apply_action(int(ids.integers(0, len(state.chance_outcomes()))))
            continue
        legal = state.legal_actions()
        slot = legal[int(moves.integers(len(legal)))]
        assert bo.PLAYER_COLORS[state.current_player()] == state.position.to_move
        seen.append((state.position, slot))
        state.apply_action(slot)
    seen.append((state.position, None))
    return seen, state


@pytest.mark.parametrize("seed", range(6))
def test_a_match_is_the_rules_engines_move_for_move_and_round_for_round(seed: int) -> None:
    seen, final = play_with_ids(load(), seed, move_seed=100 + seed)
    match = Match(rng=seed)  # draws the same numbers in the same order
    for position, slot in seen:
        if match.state.round_over and not match.over:
            match.next_round()  # the starting rule and the next layout
        assert position == match.state  # board, mover, score, target, starter
        if slot is not None:
            assert slot in match.state.legal_moves()
            match.play(slot)
    assert match.over and len(match.rounds) > 1
    assert final.position.score == match.rounds[-1]["score_after"] == match.state.score
    assert final.returns() == ([1.0, -1.0] if match.winner == "R" else [-1.0, 1.0])
    assert str(final).endswith(f"{'Red' if match.winner == 'R' else 'Black'} wins the match")


@pytest.mark.parametrize("seed", range(3))
def test_the_same_ids_play_the_pettingzoo_envs_match(seed: int) -> None:
    pettingzoo = pytest.importorskip("buttonup_env.pettingzoo")
    seen, _ = play_with_ids(load(target=5), seed, move_seed=seed)
    env = pettingzoo.env(target=5)
    env.reset(seed=seed)
    moves = iter(seen)
    for agent in env.agent_iter():
        _, _, termination, _, _ = env.last()
        if termination:
            env.step(None)
            continue
        position, slot = next(moves)
        assert env.unwrapped.position == position
        assert bo.PLAYER_COLORS.index(position.to_move) == ("red", "black").index(agent)
        env.step(slot)
    final, slot = next(moves)
    assert slot is None and env.unwrapped.position == final


@pytest.mark.parametrize("seed", range(4))
def test_a_round_episode_pays_reds_margin(seed: int) -> None:
    states = list(random_episode(load(episode="round"), seed))
    final = states[-1]
    assert final.is_terminal() and final.position.round_over
    strength = final.position.strength
    margin = strength["R"] - strength["B"]
    assert final.returns() == [margin, -margin]
    assert sum(not s.is_chance_node() for s in states[:-1]) == 8
    assert str(final).startswith(final.position.notation + "\n")


def tied_round() -> tuple[tuple[str, ...], list[int]]:
    """A layout and the moves of a round from it, Red starting, that ends with equal
    strengths."""
    for layout in LAYOUTS:
        states = [(State.new_round(layout, "R"), [])]
        while states:
            state, moves = states.pop()
            if state.round_over:
                if state.strength["R"] == state.strength["B"]:
                    return layout, moves
                continue
            states.extend((state.play(s), [*moves, s]) for s in state.legal_moves())
    raise AssertionError("no round ends tied")


def test_max_rounds_ends_a_match_without_a_winner_in_a_draw() -> None:
    layout, moves = tied_round()
    for max_rounds, ends in ((1, True), (2, False)):
        game = load(target=1, layout=format_board(layout), first="R", max_rounds=max_rounds)
        state = game.new_initial_state()
        for slot in moves:
            state.apply_action(slot)
        assert state.is_terminal() == ends
        if ends:
            assert state.returns() == [0.0, 0.0] and "a draw after max_rounds" in str(state)
        else:
            assert state.is_chance_node() and len(state.chance_outcomes()) == len(LAYOUTS)
            assert "chance draws the layout of round 2" in str(state)


def test_observations_are_the_envs_from_each_side() -> None:
    states = [s for s in random_episode(load(), 3) if not s.is_chance_node()]
    for state in states[:: max(1, len(states) // 10)]:
        text = str(state)
        assert text.startswith(state.position.notation + "\n")
        for player, color in enumerate(bo.PLAYER_COLORS):
            assert state.observation_string(player) == text
            assert state.information_state_string(player) == text
            expected = MatchSlotEncoding().encode(state.position, color)
            np.testing.assert_array_equal(np.array(state.observation_tensor(player)), expected)
        if not state.is_terminal():
            assert state.legal_actions() == list(state.position.legal_moves())
            assert state.action_to_string(state.current_player(), 4) == "slot 4"
    assert not any(load().new_initial_state().observation_tensor(0))


def test_a_clone_shares_its_immutable_node() -> None:
    state = load().new_initial_state()
    state.apply_action(0)
    state.apply_action(7)
    copy = state.clone()
    assert copy.node is state.node and str(copy) == str(state)
    copy.apply_action(copy.legal_actions()[0])
    assert copy.node is not state.node and state.position == State.new_round(LAYOUTS[7], "R")


# --- OpenSpiel's algorithms against the package's --------------------------------------------

LAYOUTS_TO_SEARCH = (LAYOUTS[0], LAYOUTS[777], parse_board(WORKED_EXAMPLE), LAYOUTS[-1])


@pytest.mark.parametrize("first", ["R", "B", None])
@pytest.mark.parametrize("layout", LAYOUTS_TO_SEARCH, ids=format_board)
def test_expectiminimax_agrees_with_the_solver(layout: tuple[str, ...], first: str | None) -> None:
    game = round_game(layout, first)
    value, action = minimax.expectiminimax(
        game.new_initial_state(), game.max_game_length(), None, 0
    )
    firsts = [first] if first else ["R", "B"]
    starts = [State.new_round(layout, f) for f in firsts]
    assert value == pytest.approx(np.mean([solver.margin_for(s, "R") for s in starts]))
    if first:  # the move it chose is one of the solver's best for the starter
        values = solver.move_values(starts[0])
        assert values[action] == max(values.values())


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(4))
def test_expectiminimax_agrees_with_the_solver_on_many_layouts(chunk: int) -> None:
    for layout in LAYOUTS[chunk::40]:
        for first in ("R", "B"):
            game = round_game(layout, first)
            value, _ = minimax.expectiminimax(game.new_initial_state(), 8, None, 0)
            assert value == solver.margin_for(State.new_round(layout, first), "R")


EXPLOITED = (("B R B W R B W R W", "R"), ("B R R W B R W B W", "B"))
"""Layouts and starters on which the shipped agent gives points away (and so the others)."""

PLAYERS = ("random", "greedy", "perfect-0.3", "buttonup-ppo")


@pytest.mark.parametrize(  # each player on one of the set-ups (every pair: on many layouts)
    ("player", "layout", "first"),
    [  # the greedy bot and the shipped agent in the default suite, the others slow
        pytest.param(
            player,
            *EXPLOITED[i % 2],
            marks=pytest.mark.slow if player in ("random", "perfect-0.3") else (),
        )
        for i, player in enumerate(PLAYERS)
    ],
)
def test_openspiels_exploitability_is_the_packages(player: str, layout: str, first: str) -> None:
    game = round_game(layout, first)
    theirs = exploitability.exploitability(game, bo.policy(player, game))
    ours = exploit.exploitability(  # a round game: its graded bots play the round
        make_opponent(player, objective="round"), layouts=(parse_board(layout),), first=first
    )
    assert theirs == pytest.approx(ours.exploitability, abs=1e-9)
    assert theirs > 0


@pytest.mark.slow
@pytest.mark.parametrize("player", PLAYERS)
def test_openspiels_exploitability_is_the_packages_on_many_layouts(player: str) -> None:
    for layout, first in itertools.product(LAYOUTS[5::150], ("R", "B")):
        game = round_game(layout, first)
        theirs = exploitability.exploitability(game, bo.policy(player, game))
        made = make_opponent(player, objective="round")  # as bo.policy makes it for a round
        ours = exploit.exploitability(made, layouts=(layout,), first=first)
        assert theirs == pytest.approx(ours.exploitability, abs=1e-9)


# slow: OpenSpiel's two best responses agreeing is OpenSpiel's own check; its (C++) best
# response against the package's exploitability stays in the default suite (the test above)
@pytest.mark.slow
def test_python_best_response_agrees_with_the_cpp_one() -> None:
    """OpenSpiel's Python best response (nash_conv) takes the policies too."""
    layout, first = EXPLOITED[0]
    game = round_game(layout, first)
    policy = bo.policy("perfect-0.3", game)
    nash_conv = exploitability.nash_conv(game, policy, use_cpp_br=False)
    assert nash_conv / 2 == pytest.approx(exploitability.exploitability(game, policy))


@pytest.mark.parametrize(  # a bot and a policy; every bot under -m slow
    "opponent",
    [
        "random",
        *(pytest.param(b, marks=pytest.mark.slow) for b in ("greedy", "perfect", "perfect-0.3")),
        "buttonup-ppo",
    ],
)
def test_mcts_plays_whole_matches_against_the_bots(opponent: str) -> None:
    game = load(target=3)
    rng = np.random.RandomState(0)
    searcher = mcts.MCTSBot(
        game,
        uct_c=2.0,
        max_simulations=40,
        evaluator=mcts.RandomRolloutEvaluator(random_state=np.random.RandomState(1)),
        random_state=np.random.RandomState(2),
    )
    wins = 0
    for seat in (0, 1, 0, 1):
        bots = [bo.bot(opponent, game, seed=seat)] * 2
        bots[seat] = searcher
        state = game.new_initial_state()
        returns = evaluate_bots.evaluate_bots(state, bots, rng)
        assert state.is_terminal() and state.position.match_over
        winner = bo.PLAYER_COLORS.index(state.position.winner)
        assert returns[winner] == 1.0 and returns[1 - winner] == -1.0
        wins += returns[seat] > 0
    if opponent == "random":
        assert wins >= 3


# --- the package's players in OpenSpiel --------------------------------------------------------


class LowestSlot:
    """A player of one's own: always the lowest legal slot."""

    def act(self, state: State) -> int:
        return state.legal_moves()[0]


def player_specs(tmp_path: Path, linear_policy: Any) -> dict[str, Any]:
    return {
        "perfect": "perfect",
        "greedy": "greedy",
        "random": "random",
        "perfect-0.1": "perfect-0.1",
        "buttonup-ppo": "buttonup-ppo",
        "shipped file": shipped_policy_path("buttonup-ppo"),
        "slots .onnx": str(linear_policy(tmp_path / "slots.onnx", "slots", 0)),
        "act(state)": LowestSlot(),
    }


KINDS = ("perfect", "greedy", "random", "perfect-0.1", "buttonup-ppo", "shipped file")
KINDS += ("slots .onnx", "act(state)")


@pytest.mark.parametrize("kind", KINDS)
def test_every_player_is_a_bot_and_a_policy(kind: str, tmp_path: Path, linear_policy: Any) -> None:
    spec = player_specs(tmp_path, linear_policy)[kind]
    game = load(target=3)
    bot = bo.bot(spec, game, seed=1)
    policy = bo.policy(spec, game)
    assert isinstance(bot, pyspiel.Bot) and isinstance(policy, openspiel_policy.Policy)
    for state in itertools.islice(random_episode(game, 5), 80):
        if state.is_chance_node() or state.is_terminal():
            continue
        legal = state.legal_actions()
        probabilities = policy.action_probabilities(state)
        assert sorted(probabilities) == legal
        assert sum(probabilities.values()) == pytest.approx(1.0)
        action = bot.step(state)
        assert action in legal and probabilities[action] > 0
    # a whole match between the bot and the random bot, through OpenSpiel's evaluate_bots
    returns = evaluate_bots.evaluate_bots(
        game.new_initial_state(), [bot, bo.bot("random", game, seed=2)], np.random.RandomState(0)
    )
    assert sorted(returns) == [-1.0, 1.0]


def test_a_bots_choices_follow_its_seed() -> None:
    game = load()
    states = [s.clone() for s in random_episode(game, 9) if not s.is_chance_node()][:-1]
    one, again = bo.bot("random", game, seed=4), bo.bot("random", game, seed=4)
    other = bo.bot("random", game, seed=5)
    choices = [one.step(s) for s in states]
    assert choices == [again.step(s) for s in states] != [other.step(s) for s in states]


def test_perfect_bot_policy_is_the_solvers_best_moves() -> None:
    game = round_game(WORKED_EXAMPLE, "R")
    state = game.new_initial_state()
    assert bo.policy("perfect", game).action_probabilities(state) == {1: 0.5, 2: 0.0, 6: 0.5}
    assert bo.policy(make_bot("perfect"), game).action_probabilities(state)[2] == 0.0


def test_bad_players_and_games_are_refused_in_a_sentence() -> None:
    game = load()
    with pytest.raises(ValueError, match="'stockfish' is not a bot name"):
        bo.bot("stockfish", game)
    with pytest.raises(ValueError, match="not a graded bot"):
        bo.policy("perfect-2", game)
    with pytest.raises(ValueError, match="is not python_button_up"):
        bo.bot("random", pyspiel.load_game("tic_tac_toe"))
    with pytest.raises(ValueError, match="no player moves in this state"):
        bo.bot("random", game).step(game.new_initial_state())


@pytest.mark.slow
def test_expectiminimax_agrees_with_the_match_solver_on_a_short_match() -> None:
    """OpenSpiel's own expectiminimax on a match small enough to search: to one point, the
    first layout fixed and Red starting, cut after two rounds (a draw, 0 to both). The layout's
    best round is a tie, so the value goes through the second round: Black starts it (equal
    scores: who did not start), its 1,680 layouts are drawn by chance, and a second tie is a
    draw. Every first move's value equals the package's truncated match (a draw is worth half
    a win: OpenSpiel's return v is the probability (1 + v) / 2)."""
    from buttonup_env.game.equity import match_equity, match_move_values

    layout = LAYOUTS[3]
    game = load(target=1, layout=format_board(layout), first="R", max_rounds=2)
    second_rounds: dict[str, float] = {}

    def second_round(state: Any) -> float:
        """A chance node before round 2, searched once (every tied line leads to the same)."""
        key = str(state.child(0))
        if key not in second_rounds:
            second_rounds[key] = minimax.expectiminimax(state, 8, second_round, 0)[0]
        return second_rounds[key]

    root = game.new_initial_state()
    values = match_move_values(State.new_round(layout, "R", target=1), rounds_left=2)
    assert sorted(values) == root.legal_actions()
    for action in root.legal_actions():
        value, _ = minimax.expectiminimax(root.child(action), 7, second_round, 0)
        assert (1 + value) / 2 == pytest.approx(values[action], abs=1e-12)
    assert len(second_rounds) == 1  # the tie was reached, and searched
    (value,) = second_rounds.values()
    black_starts = match_equity(1, rounds_left=1).red[0, 0, 1]
    assert (1 + value) / 2 == pytest.approx(black_starts, abs=1e-12)
    assert 0.0 < black_starts < 1.0 and max(values.values()) == pytest.approx(black_starts)
