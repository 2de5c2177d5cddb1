"""The web app's API (FastAPI's test client), its games under load, and the command line."""

from __future__ import annotations

import asyncio
import io
import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the web app needs the web extra: pip install -e '.[web]'")

from fastapi.testclient import TestClient

from buttonup_env.game import solver
from buttonup_env.game.equity import best_moves, match_move_values
from buttonup_env.game.match import Match
from buttonup_env.game.records import read_records, replay_match
from buttonup_env.game.rules import State
from buttonup_env.ui.play import describe_move
from buttonup_env.ui.web import server
from buttonup_env.ui.web.app import STATIC, create_app
from buttonup_env.ui.web.offered import offer
from buttonup_env.ui.web.replays import load_records

try:  # Starlette's test client moved to httpx2; older installs have httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installation
    import httpx  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
SENTENCE = re.compile(r"^[A-Z0-9].*[.!?]$", re.DOTALL)
LOCAL = "http://127.0.0.1:8000"
"""Where the test client says it connects: the Host the server answers by default."""


@pytest.fixture(scope="module")
def records(data_dir: Path) -> list[Any]:
    stored, _ = load_records([data_dir / "rounds.jsonl", data_dir / "matches.jsonl"])
    return stored


@pytest.fixture
def client(records: list[Any]) -> TestClient:
    return TestClient(create_app(offer([]), records), base_url=LOCAL)


def new_game(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("black", "random")
    response = client.post("/api/games", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def rules_state(view: dict[str, Any]) -> State:
    """The rules' position for a StateView."""
    return State(view["board"], view["to_move"], view["score"], view["target"], view["starter"])


def check_events(before: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Every move event is its move played by the rules on the position before it."""
    state = before
    for event in events:
        if event["kind"] == "move":
            move = event["move"]
            assert move["mover"] == state["to_move"]
            assert move["slot"] in state["legal"]
            after = rules_state(state).play(move["slot"])
            shown = event["state"]
            assert shown["board"] == list(after.board)
            assert shown["score"] == after.score
            assert shown["round_over"] == after.round_over
            if not after.round_over:
                assert shown["to_move"] == after.to_move
            assert event["text"] == describe_move(
                rules_state(state), move["slot"], after, None
            ) or event["text"].startswith("You lift")
        state = event["state"]
    return state


def is_sentence(text: str) -> bool:
    return bool(SENTENCE.match(text)) and "\n" not in text


# --- the page --------------------------------------------------------------------------------
def test_the_page_and_its_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for path in re.findall(r'(?:src|href)="(/[^"]*)"', page.text):
        response = client.get(path)
        assert response.status_code == 200, path
    for name in ("app.js", "board.js", "style.css", "favicon.svg"):
        assert client.get(f"/static/{name}").status_code == 200
    favicon = client.get("/favicon.ico")
    assert favicon.status_code == 200
    assert favicon.headers["content-type"].startswith("image/svg+xml")


def test_the_page_needs_no_network() -> None:
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        # the only absolute address is the SVG namespace, which is a name, not a download
        addresses = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not addresses, f"{path.name} refers to {addresses}"


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2f%2e%2e%2frules.py",
        "/static//etc/passwd",
        "/static/%2Fetc%2Fpasswd",
        "/../../etc/passwd",
        "/api/records/..%2f..%2fetc%2fpasswd",
    ],
)
def test_no_request_reads_a_file_outside_the_page(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code in (404, 422), path
    assert "root:" not in response.text and "def " not in response.text


def test_the_api_describes_itself(client: TestClient) -> None:
    schema = client.get("/api/openapi.json").json()
    assert {"/api/games", "/api/games/{game_id}/moves", "/api/records/{index}"} <= set(
        schema["paths"]
    )
    assert client.get("/api/docs").status_code == 404  # its page would need a CDN


def test_an_unknown_address_gets_a_sentence(client: TestClient) -> None:
    response = client.get("/nothing-here")
    assert response.status_code == 404
    assert is_sentence(response.json()["detail"])
    response = client.delete("/api/options")
    assert response.status_code == 405
    assert is_sentence(response.json()["detail"])


# --- options and new games -------------------------------------------------------------------
def test_options_offer_the_players_default_first(records: list[Any]) -> None:
    app = create_app(offer(["greedy", "perfect"]), records, notes=["a note"])
    options = TestClient(app, base_url=LOCAL).get("/api/options").json()
    assert [p["key"] for p in options["players"]] == ["greedy", "perfect", "random"]
    assert options["default_opponent"] == "greedy"
    assert options["default_target"] == 15
    assert options["records"] == len(records)
    assert options["notes"] == ["a note"]


def test_a_policy_is_offered_by_its_name_not_its_path() -> None:
    shipped, note = server.default_opponent()
    assert note is None, note
    players = offer([shipped])
    assert [p.key for p in players] == ["buttonup-ppo", "random", "greedy", "perfect"]
    client = TestClient(create_app(players), base_url=LOCAL)
    view = new_game(client, black="buttonup-ppo", seed=3)
    assert view["players"]["B"]["key"] == "buttonup-ppo"
    assert str(REPO) not in json.dumps(view)


def test_a_new_game_against_a_bot(client: TestClient) -> None:
    view = new_game(client, red="human", black="random", target=3, seed=11)
    assert view["players"]["R"]["human"] and not view["players"]["B"]["human"]
    assert view["auto"] is True
    assert view["seed"] == 11
    events = view["events"]
    assert events[0]["kind"] == "round_start"
    state = check_events(events[0]["state"], events[1:])
    assert state == view["state"]
    assert view["state"]["to_move"] == "R"  # the bot's opening moves are already played
    assert view["state"]["target"] == 3 and view["state"]["round"] == 1


def test_the_seed_gives_the_terminal_game_s_layouts_and_starter(client: TestClient) -> None:
    for seed in (0, 1, 7):
        view = new_game(client, red="random", black="random", seed=seed)
        first = Match(np.random.default_rng(seed)).state
        assert view["events"][0]["state"]["board"] == list(first.board)
        assert view["events"][0]["state"]["to_move"] == first.to_move
        again = new_game(client, red="random", black="random", seed=seed)
        assert again["state"] == view["state"] and again["id"] != view["id"]


def test_game_ids_are_unguessable(client: TestClient) -> None:
    ids = {new_game(client)["id"] for _ in range(20)}
    assert len(ids) == 20
    assert all(len(i) >= 22 and re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"black": "stockfish"}, 'the black player "stockfish" is not offered'),
        ({"black": "random", "red": "../models/x.onnx"}, 'red player "../models/x.onnx" is not'),
        ({"black": "random", "target": 0}, "target"),
        ({"black": "random", "target": 101}, "target"),
        ({"black": "random", "target": "15"}, "target"),
        ({"black": "random", "target": 1.5}, "target"),
        ({"black": "random", "seed": -1}, "seed"),
        ({"red": "human"}, 'the field "black" is missing'),
        ({"black": "random", "colour": "R"}, 'unknown field "colour"'),
        ([1, 2], "request body"),
    ],
)
def test_a_bad_new_game_gets_one_sentence(client: TestClient, body: Any, says: str) -> None:
    response = client.post("/api/games", json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert is_sentence(detail), detail
    assert says.lower() in detail.lower()


def test_a_new_game_that_is_not_json_gets_one_sentence(client: TestClient) -> None:
    for content, kind in (
        ("{", "application/json"),
        ("black=random", "text/plain"),
        ('{"black": "random"}', "text/plain"),
    ):
        response = client.post("/api/games", content=content, headers={"content-type": kind})
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert is_sentence(detail) and "b'" not in detail, detail  # no Python bytes quoted
        if kind == "text/plain":
            assert "send it with Content-Type: application/json" in detail


def test_the_page_answers_head(client: TestClient) -> None:
    response = client.head("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")


# --- moves -----------------------------------------------------------------------------------
def a_game_at_the_person_s_turn(client: TestClient, seed: int = 5) -> dict[str, Any]:
    view = new_game(client, black="random", target=3, seed=seed)
    assert view["state"]["to_move"] == "R" and not view["state"]["round_over"]
    return view


def test_a_move_is_answered_by_the_bot(client: TestClient) -> None:
    view = a_game_at_the_person_s_turn(client)
    slot = view["state"]["legal"][0]
    response = client.post(f"/api/games/{view['id']}/moves", json={"slot": slot})
    assert response.status_code == 200
    after = response.json()
    events = after["events"]
    assert events[0]["kind"] == "move" and events[0]["move"]["slot"] == slot
    assert events[0]["text"].startswith(f"You lift slot {slot}")
    assert check_events(view["state"], events) == after["state"]
    state = after["state"]
    assert state["round_over"] or state["to_move"] == "R"
    assert client.get(f"/api/games/{view['id']}").json()["state"] == state


def test_a_sown_move_lists_where_each_button_went(client: TestClient) -> None:
    view = a_game_at_the_person_s_turn(client)
    before = view["state"]
    slot = before["legal"][0]
    event = client.post(f"/api/games/{view['id']}/moves", json={"slot": slot}).json()["events"][0]
    move = event["move"]
    assert move["lifted"] == before["board"][slot]
    assert "".join(d["buttons"] for d in move["drops"]) == move["lifted"]
    for drop in move["drops"]:
        assert event["state"]["board"][drop["slot"]].endswith(drop["buttons"])


@pytest.mark.parametrize("kind", ["empty", "no white", "nine", "negative", "huge"])
def test_an_illegal_move_gets_400_naming_the_legal_slots(client: TestClient, kind: str) -> None:
    view = a_game_at_the_person_s_turn(client)
    state = view["state"]
    board, legal = state["board"], state["legal"]
    slot = {
        "empty": next((s for s, stack in enumerate(board) if not stack), None),
        "no white": next((s for s, stack in enumerate(board) if stack and "W" not in stack), None),
        "nine": 9,
        "negative": -1,
        "huge": 10**30,
    }[kind]
    if slot is None:
        pytest.skip(f"this position has no {kind} slot")
    before = client.get(f"/api/games/{view['id']}").json()
    response = client.post(f"/api/games/{view['id']}/moves", json={"slot": slot})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert is_sentence(detail), detail
    assert f"slot {slot}" in detail.lower()
    assert ", ".join(map(str, legal)) in detail
    assert client.get(f"/api/games/{view['id']}").json() == before


@pytest.mark.parametrize(
    "body",
    [
        {"slot": "3"},
        {"slot": 3.0},
        {"slot": True},
        {"slot": None},
        {"slot": [3]},
        {},
        {"slot": 3, "again": 4},
        [3],
        "3",
    ],
)
def test_a_malformed_move_gets_422_naming_the_legal_slots(client: TestClient, body: Any) -> None:
    view = a_game_at_the_person_s_turn(client)
    legal = ", ".join(map(str, view["state"]["legal"]))
    before = client.get(f"/api/games/{view['id']}").json()
    response = client.post(f"/api/games/{view['id']}/moves", json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert is_sentence(detail), detail
    assert legal in detail
    assert client.get(f"/api/games/{view['id']}").json() == before


def test_a_move_with_no_body_or_bad_json_gets_422(client: TestClient) -> None:
    view = a_game_at_the_person_s_turn(client)
    for kwargs in (
        {},
        {"content": "{slot: 3", "headers": {"content-type": "application/json"}},
        {"content": "slot=3", "headers": {"content-type": "application/x-www-form-urlencoded"}},
    ):
        response = client.post(f"/api/games/{view['id']}/moves", **kwargs)  # type: ignore[arg-type]
        assert response.status_code == 422
        assert is_sentence(response.json()["detail"])


# --- unknown games ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", ""),
        ("POST", "/moves"),
        ("POST", "/step"),
        ("POST", "/next-round"),
        ("GET", "/hint"),
    ],
)
@pytest.mark.parametrize("game_id", ["nope", "A" * 22, "x" * 500])
def test_an_unknown_game_gets_404(client: TestClient, method: str, path: str, game_id: str) -> None:
    body = {"slot": 0} if path == "/moves" else None
    response = client.request(method, f"/api/games/{game_id}{path}", json=body)
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert is_sentence(detail) and "start a new game" in detail
    assert game_id not in detail


def test_the_oldest_games_are_dropped_beyond_the_cap() -> None:
    client = TestClient(create_app(offer([]), max_games=3), base_url=LOCAL)
    ids = [new_game(client, seed=s)["id"] for s in range(3)]
    assert client.get(f"/api/games/{ids[0]}").status_code == 200  # used: now the newest
    fourth = new_game(client)["id"]
    assert client.get(f"/api/games/{ids[1]}").status_code == 404  # the least recently used
    for kept in (ids[0], ids[2], fourth):
        assert client.get(f"/api/games/{kept}").status_code == 200
    for _ in range(3):
        new_game(client)
    assert client.get(f"/api/games/{ids[0]}").status_code == 404


# --- the moments of a game -------------------------------------------------------------------
def test_requests_that_do_not_fit_the_moment_get_409(client: TestClient) -> None:
    watch = new_game(client, red="random", black="greedy", target=2, seed=1)
    assert watch["auto"] is False and len(watch["events"]) == 1  # bots wait for /step
    response = client.post(f"/api/games/{watch['id']}/moves", json={"slot": 0})
    assert response.status_code == 409 and is_sentence(response.json()["detail"])
    response = client.post(f"/api/games/{watch['id']}/next-round")
    assert response.status_code == 409 and "not over" in response.json()["detail"]

    game = a_game_at_the_person_s_turn(client)
    response = client.post(f"/api/games/{game['id']}/step")
    assert response.status_code == 409 and "played by a person" in response.json()["detail"]


def test_a_match_played_to_its_end_through_the_api(client: TestClient) -> None:
    view = new_game(client, black="random", target=3, seed=2)
    rng = np.random.default_rng(2)
    state = check_events(view["events"][0]["state"], view["events"][1:])
    kinds = [e["kind"] for e in view["events"]]
    while not state["match_over"]:
        if state["round_over"]:
            response = client.post(f"/api/games/{view['id']}/next-round")
            hint = client.get(f"/api/games/{view['id']}/hint")
        else:
            slot = int(rng.choice(state["legal"]))
            response = client.post(f"/api/games/{view['id']}/moves", json={"slot": slot})
        assert response.status_code == 200, response.text
        events = response.json()["events"]
        kinds += [e["kind"] for e in events]
        first = events[0]["state"] if events[0]["kind"] == "round_start" else state
        state = check_events(first, events)
    assert max(state["score"]["R"], state["score"]["B"]) >= 3
    assert kinds[-2:] == ["round_end", "match_end"]
    assert kinds.count("round_start") == kinds.count("round_end") == state["round"]
    winner = "Red" if state["winner"] == "R" else "Black"
    last = response.json()["events"][-1]["text"]
    assert last.startswith(f"Match over: {winner} wins") and last.endswith(
        ("You win!", "You lose.")
    )
    for path in ("/moves", "/next-round"):
        response = client.post(f"/api/games/{view['id']}{path}", json={"slot": 0})
        assert response.status_code == 409 and "new game" in response.json()["detail"]
    hint = client.get(f"/api/games/{view['id']}/hint")
    assert hint.status_code == 409 and is_sentence(hint.json()["detail"])


def test_watching_two_bots_step_by_step(client: TestClient) -> None:
    view = new_game(client, red="greedy", black="perfect", target=2, seed=4)
    state = view["state"]
    moves = 0
    while not state["match_over"]:
        if state["round_over"]:
            response = client.post(f"/api/games/{view['id']}/next-round")
            events = response.json()["events"]
            assert [e["kind"] for e in events] == ["round_start"]  # bots wait for /step
        else:
            response = client.post(f"/api/games/{view['id']}/step")
            events = response.json()["events"]
            assert events[0]["kind"] == "move" and len([e for e in events if e["move"]]) == 1
            moves += 1
        assert response.status_code == 200
        state = check_events(state, events) if events[0]["kind"] == "move" else events[-1]["state"]
    assert moves == 8 * state["round"]
    response = client.post(f"/api/games/{view['id']}/step")
    assert response.status_code == 409


def test_the_hint_is_the_solver_s_value_of_each_move(client: TestClient) -> None:
    """Each legal move's chance of winning the match (the match solved at the game's score
    and starter), which are the best, and its round margin (the round solver)."""
    view = a_game_at_the_person_s_turn(client)
    hint = client.get(f"/api/games/{view['id']}/hint").json()
    state = rules_state(view["state"])
    values = solver.move_values(state)
    chances = match_move_values(state)
    assert hint["mover"] == "R"
    assert {m["slot"]: m["value"] for m in hint["moves"]} == values
    assert {m["slot"]: m["chance"] for m in hint["moves"]} == pytest.approx(chances)
    assert [m["slot"] for m in hint["moves"] if m["best"]] == best_moves(chances)
    assert hint["text"].startswith("hint: slot")
    assert "chance of winning the match" in hint["text"]


# --- records ---------------------------------------------------------------------------------
def all_records(client: TestClient, count: int = 100) -> list[dict[str, Any]]:
    """Every record offered, page by page (``count`` a page)."""
    listed: list[dict[str, Any]] = []
    while True:
        page = client.get("/api/records", params={"start": len(listed), "count": count}).json()
        assert page["start"] == len(listed) and len(page["records"]) <= count
        listed += page["records"]
        if len(listed) >= page["total"] or not page["records"]:
            return listed


def test_records_are_listed_and_replayed(client: TestClient, data_dir: Path) -> None:
    listed = all_records(client)
    assert len(listed) == 340  # 300 rounds and 40 matches
    assert [r["index"] for r in listed] == list(range(340))
    matches = [r for r in listed if r["kind"] == "match"]
    first_match = matches[0]
    replay = client.get(f"/api/records/{first_match['index']}").json()
    record = next(line.record for line in read_records(data_dir / "matches.jsonl"))
    assert replay["id"] == record["id"] == first_match["id"]
    end = replay_match(record)
    last = replay["events"][-1]
    assert last["kind"] == "match_end"
    assert last["state"]["score"] == end.score and last["state"]["winner"] == end.winner
    assert sum(e["kind"] == "move" for e in replay["events"]) == 8 * len(record["rounds"])
    check_events(replay["events"][0]["state"], replay["events"][1:2])


def test_a_round_record_is_replayed_from_0_0(client: TestClient) -> None:
    replay = client.get("/api/records/0").json()
    kinds = [e["kind"] for e in replay["events"]]
    assert kinds == ["round_start", *["move"] * 8, "round_end"]
    assert replay["summary"].startswith("round ")


def test_an_unknown_record_gets_404(client: TestClient) -> None:
    for index in ("340", "-1", "99999999999999999999"):
        response = client.get(f"/api/records/{index}")
        assert response.status_code == 404
        assert is_sentence(response.json()["detail"]) and "0 to 339" in response.json()["detail"]
    response = client.get("/api/records/x")
    assert response.status_code == 422 and is_sentence(response.json()["detail"])
    empty = TestClient(create_app(offer([])), base_url=LOCAL)
    assert empty.get("/api/records").json() == {"total": 0, "start": 0, "records": []}
    response = empty.get("/api/records/0")
    assert response.status_code == 404 and "--records" in response.json()["detail"]


def test_invalid_records_are_skipped_with_a_note(data_dir: Path) -> None:
    stored, notes = load_records([data_dir / "invalid.jsonl", data_dir / "rounds.jsonl"])
    assert len(stored) == 300
    assert notes[0].startswith(f"{data_dir / 'invalid.jsonl'}: 0 records to replay, 60 invalid")
    assert "python -m buttonup_env.replay" in notes[0]
    assert notes[1] == f"{data_dir / 'rounds.jsonl'}: 300 records to replay"


# --- many games at once ----------------------------------------------------------------------
async def _play_through(client: Any, seed: int) -> tuple[str, dict[str, Any]]:
    """Play a match against the random bot with moves drawn from ``seed``; check every answer."""
    rng = np.random.default_rng(seed)
    response = await client.post("/api/games", json={"black": "random", "target": 3, "seed": seed})
    assert response.status_code == 201
    view = response.json()
    game_id = view["id"]
    state = check_events(view["events"][0]["state"], view["events"][1:])
    while not state["match_over"]:
        if state["round_over"]:
            response = await client.post(f"/api/games/{game_id}/next-round")
        else:
            slot = int(rng.choice(state["legal"]))
            response = await client.post(f"/api/games/{game_id}/moves", json={"slot": slot})
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["id"] == game_id and answer["seed"] == seed
        events = answer["events"]
        first = events[0]["state"] if events[0]["kind"] == "round_start" else state
        state = check_events(first, events)
        assert state == answer["state"]
    final = await client.get(f"/api/games/{game_id}")
    assert final.json()["state"] == state
    return game_id, state


@pytest.mark.slow  # a load test
def test_200_concurrent_games_are_neither_lost_nor_mixed_up() -> None:
    app = create_app(offer([]), max_games_per_client=200)  # one client plays them all

    async def everyone() -> list[tuple[str, dict[str, Any]]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            return await asyncio.gather(*(_play_through(client, seed) for seed in range(200)))

    results = asyncio.run(everyone())
    assert len({game_id for game_id, _ in results}) == 200
    assert len(app.state.store) == 200
    # the same seeds played one at a time end the same way: no game took another's moves
    alone = TestClient(create_app(offer([])), base_url=LOCAL)

    async def replayed(seed: int) -> dict[str, Any]:
        transport = httpx.ASGITransport(app=alone.app)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            return (await _play_through(client, seed))[1]

    for seed in (0, 57, 199):
        assert asyncio.run(replayed(seed)) == results[seed][1]


# --- the command line ------------------------------------------------------------------------
def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = server.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_help_names_every_option() -> None:
    code, out, _ = run_main(["--help"])
    assert code == 0
    for option in ("--host", "--port", "--opponent", "--records"):
        assert option in out
    assert "default 127.0.0.1" in out and "default 8000" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--opponent", "stockfish"], "--opponent: opponent 'stockfish' is not a bot name"),
        (["--opponent", "missing.onnx"], "missing.onnx does not exist"),
        (["--records", "missing.jsonl"], "--records: cannot read missing.jsonl"),
        (["--records", "tests"], "--records: tests is a folder"),
        (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid' cannot be resolved"),
    ],
)
def test_bad_arguments_are_one_error_line(argv: list[str], says: str) -> None:
    code, _, err = run_main([*argv, "--port", "0"])
    assert code == 2
    assert err.count("\n") == 1 and says in err, err
    assert "Traceback" not in err


def test_bad_numbers_are_usage_errors() -> None:
    for argv in (["--port", "x"], ["--port", "-1"], ["--port", "65536"]):
        code, _, err = run_main(argv)
        assert code == 2 and "--port" in err


def test_graded_bots_are_offered_as_levels_with_their_ratings(records: list[Any]) -> None:
    levels = ("perfect-0.5", "perfect-0.10")
    ratings = {"random": 0.0, "perfect-0.5": 330.4, "perfect": 1100.0}
    players = offer(["perfect-0.3", "greedy"], levels=levels, ratings=ratings)
    assert [p.key for p in players] == [
        "perfect-0.3", "greedy", "random", "perfect-0.5", "perfect-0.1", "perfect"
    ]  # fmt: skip
    labels = {p.key: p.label for p in players}
    assert labels["perfect-0.3"] == "the perfect bot with 30% random moves"
    assert labels["perfect-0.5"] == "level 1 of 2: perfect, 50% random moves"
    assert labels["perfect-0.1"] == "level 2 of 2: perfect, 10% random moves"
    options = TestClient(create_app(players, records), base_url=LOCAL).get("/api/options").json()
    elo = {p["key"]: p["elo"] for p in options["players"]}
    assert elo == {"perfect-0.3": None, "greedy": None, "random": 0.0, "perfect-0.5": 330.4,
                   "perfect-0.1": None, "perfect": 1100.0}  # fmt: skip


def test_a_level_plays_as_its_graded_bot(records: list[Any]) -> None:
    client = TestClient(create_app(offer([], levels=["perfect-0.25"]), records), base_url=LOCAL)
    view = new_game(client, red="perfect-0.25", black="perfect", target=3, seed=4)
    assert view["players"]["R"]["label"] == "level 1 of 1: perfect, 25% random moves"
    state = view["state"]
    while not state["match_over"]:
        response = client.post(f"/api/games/{view['id']}/step")
        if response.status_code == 409:  # the round is over
            response = client.post(f"/api/games/{view['id']}/next-round")
        assert response.status_code == 200, response.text
        state = check_events(state, response.json()["events"])
    with pytest.raises(ValueError, match="'perfect-2' is not a graded bot"):
        offer(["perfect-2"])


def test_the_command_offers_the_levels_with_the_shipped_leagues_ratings() -> None:
    from buttonup_env.players.shipped import shipped_ratings

    ratings = shipped_ratings()
    players, _ = server._players(None)
    keys = [p.key for p in players]
    assert keys == ["buttonup-ppo", "random", "greedy", *server.LEVELS, "perfect"]
    for player in players:
        assert player.elo == ratings[player.key], player.key
    elo = [p.elo for p in players[1:]]  # the levels climb from the greedy bot to perfect play
    assert elo == sorted(elo)
    on_request, _ = server._players(["perfect-0.3", "buttonup-ppo"])
    assert on_request[0].elo is None and on_request[1].elo == ratings["buttonup-ppo"]


def test_without_the_web_extra_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now raises ImportError
    code, out, err = run_main(["--port", "0"])
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "pip install 'buttonup-env[web]'" in err


def test_a_busy_port_is_named() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run_main(["--port", str(port), "--opponent", "random"])
    assert code == 2
    assert f"port {port} on 127.0.0.1 is in use" in err and err.count("\n") == 1


def test_the_default_opponent_is_the_shipped_agent_or_the_perfect_bot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec, note = server.default_opponent()
    assert spec.endswith("buttonup-ppo.onnx") and note is None
    players, notes = server._players(None)
    assert players[0].key == "buttonup-ppo" and players[0].label == server.SHIPPED_LABEL
    assert notes == []

    monkeypatch.setattr(server, "SHIPPED_MODELS", (tmp_path / "gone.onnx",))
    spec, note = server.default_opponent()
    assert spec == "perfect" and note is not None and "gone.onnx" in note
    players, notes = server._players(None)
    assert players[0].key == "perfect" and notes == [note]


def test_listening_anywhere_but_loopback_prints_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[int] = []
    monkeypatch.setattr(
        "uvicorn.Server.run", lambda self, sockets: served.append(sockets[0].getsockname()[1])
    )
    code, out, err = run_main(["--host", "127.0.0.1", "--port", "0", "--opponent", "random"])
    assert code == 0 and err == "" and served
    assert f"served at http://127.0.0.1:{served[-1]}/" in out

    monkeypatch.setattr(server, "is_loopback", lambda sock: False)
    code, out, err = run_main(["--port", "0", "--opponent", "random"])
    assert code == 0 and err.startswith("warning: listening on 127.0.0.1, which other machines")


def test_the_printed_address_takes_connections_before_the_server_runs() -> None:
    with server.listen("127.0.0.1", 0) as sock:  # nothing accepts yet: the backlog holds them
        with socket.create_connection(sock.getsockname(), timeout=5):
            pass


def test_loopback_is_told_apart() -> None:
    with server.listen("127.0.0.1", 0) as sock:
        assert server.is_loopback(sock)
    with server.listen("localhost", 0) as sock:
        assert server.is_loopback(sock)


def test_the_command_serves_until_ctrl_c(data_dir: Path) -> None:
    command = [sys.executable, "-m", "buttonup_env.web", "--port", "0", "--opponent", "random"]
    process = subprocess.Popen(
        [*command, "--records", str(data_dir / "matches.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[0] == f"note: {data_dir / 'matches.jsonl'}: 40 records to replay\n"
        url = re.search(r"http://\S+/", lines[1])
        assert url, lines
        with httpx.Client(base_url=url.group(0), timeout=10) as http:
            assert http.get("/").status_code == 200
            assert http.get("/api/options").json()["records"] == 40
            view = http.post("/api/games", json={"black": "random", "target": 1}).json()
            assert http.get(f"/api/games/{view['id']}").json()["id"] == view["id"]
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.endswith("Stopped.\n") and "Traceback" not in err
