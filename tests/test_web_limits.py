"""What every request to the web app meets (buttonup_env.ui.web.guard): the Host check against DNS
rebinding, the body cap, the header and body timeouts, JSON errors when a policy fails, the
records file at start-up, and a property over request bodies. The timeouts and the body cap
are tested against the real server (uvicorn, as buttonup-web runs it) on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the web app needs the web extra: pip install -e '.[web]'")

from fastapi.testclient import TestClient

try:  # Starlette's test client moved to httpx2; older installs have httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installation
    import httpx  # type: ignore[no-redef]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threaded_server import serving

from buttonup_env.game.rules import LAYOUTS, State, next_starter
from buttonup_env.ui.web import errors, games, replays
from buttonup_env.ui.web import server as web_server
from buttonup_env.ui.web import store as stores
from buttonup_env.ui.web.app import SECURITY_HEADERS, create_app
from buttonup_env.ui.web.guard import MAX_BODY_BYTES, MAX_RESPONSE_BYTES, AllowedHosts, host_name
from buttonup_env.ui.web.offered import OfferedPlayer, offer
from buttonup_env.ui.web.replays import (
    EVENTS_PER_ROUND,
    MAX_RECORDS_PAGE,
    MAX_REPLAY_ROUNDS,
    load_records,
)

LOCAL = "http://127.0.0.1:8000"


def sentence(response: Any) -> str:
    """The one-sentence ``detail`` of a JSON error."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    detail = response.json()["detail"]
    assert detail[:1].isupper() and detail.endswith(".") and "\n" not in detail, detail
    return detail


# --- Host: only the names the server is served under ------------------------------------------

HOSTS = [
    # (the Host header, who serves: loopback or every address, the status)
    ("127.0.0.1:8000", "127.0.0.1", 200),
    ("localhost", "127.0.0.1", 200),
    ("LOCALHOST:8000", "127.0.0.1", 200),
    ("app.localhost:8000", "127.0.0.1", 200),
    ("[::1]:8000", "127.0.0.1", 200),
    ("127.0.0.2", "127.0.0.1", 200),  # 127.0.0.0/8 is loopback
    ("localhost.", "127.0.0.1", 200),
    ("evil.example", "127.0.0.1", 421),  # DNS rebinding: a name that resolves to 127.0.0.1
    ("evil.example:8000", "127.0.0.1", 421),
    ("localhost.evil.example", "127.0.0.1", 421),
    ("127.0.0.1.nip.io", "127.0.0.1", 421),
    ("192.168.1.5:8000", "127.0.0.1", 421),  # another address than the one listened on
    ("", "127.0.0.1", 400),
    ("a b", "127.0.0.1", 400),
    ("[::1", "127.0.0.1", 400),
    ("x:y:z", "127.0.0.1", 400),
    ("user@evil.example", "127.0.0.1", 400),
    ("192.168.1.5:8000", "0.0.0.0", 200),  # listening everywhere: any address
    ("evil.example", "0.0.0.0", 421),  # ... but still no other site's name
    ("myhost.lan", "myhost.lan", 200),  # --host names itself
    ("evil.example", "myhost.lan", 421),
]


@pytest.mark.parametrize(("header", "host", "status"), HOSTS)
def test_the_host_header_is_checked(header: str, host: str, status: int) -> None:
    client = TestClient(create_app(offer([]), hosts=AllowedHosts.serving(host)))
    response = client.get("/api/options", headers={"Host": header})
    assert response.status_code == status, response.text
    if status != 200:
        detail = sentence(response)
        assert ("does not answer for the host" in detail) == (status == 421)
        for name, value in SECURITY_HEADERS.items():
            assert response.headers[name] == value


def test_allowed_hosts_add_names_and_a_star_allows_any() -> None:
    hosts = AllowedHosts.serving("127.0.0.1", ["Proxy.Example.", "[fd00::1]"])
    assert hosts.allows("proxy.example:443") and hosts.allows("[fd00::1]:80")
    assert not hosts.allows("other.example")
    assert AllowedHosts.serving("127.0.0.1", ["*"]).allows("anything.example")
    everywhere = AllowedHosts.serving("0.0.0.0")
    assert everywhere.allows(socket.gethostname()) and everywhere.allows("10.1.2.3")
    assert host_name("[::1]:8000") == "::1" and host_name("Example.COM.:80") == "example.com"


def test_the_command_line_answers_its_host_and_allowed_hosts(monkeypatch: Any) -> None:
    served: list[Any] = []
    monkeypatch.setattr("uvicorn.Server.run", lambda self, sockets: served.append(self.config.app))
    code = web_server.main(
        ["--port", "0", "--opponent", "random", "--allowed-host", "game.example"],
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    assert code == 0 and served
    client = TestClient(served[0])
    for header, status in (("game.example", 200), ("127.0.0.1:1", 200), ("evil.example", 421)):
        assert client.get("/api/options", headers={"Host": header}).status_code == status


# --- bodies: capped, and read in time ---------------------------------------------------------


def test_a_body_over_the_cap_gets_413(tmp_path: Path) -> None:
    client = TestClient(
        create_app(offer([])), base_url=LOCAL, headers={"content-type": "application/json"}
    )
    fits = json.dumps({"black": "random", "seed": 1}) + " " * (MAX_BODY_BYTES - 40)
    assert client.post("/api/games", content=fits).status_code == 201
    big = json.dumps({"black": "random", "red": "x" * MAX_BODY_BYTES})
    response = client.post("/api/games", content=big)
    assert response.status_code == 413
    assert f"larger than {MAX_BODY_BYTES:,} bytes" in sentence(response)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(100):
            yield b" " * 1000

    response = client.post("/api/games", content=chunks())
    assert response.status_code == 413
    response = client.post("/api/games", content=b"{}", headers={"Content-Length": "x"})
    assert response.status_code == 400 and "Content-Length" in sentence(response)


# --- a policy that fails while it plays: JSON, a sentence -------------------------------------


class Broken:
    """A player whose runtime fails (as a policy's onnxruntime session can)."""

    def act(self, state: State) -> int:
        raise RuntimeError("ONNXRuntimeError: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION\nmore")


class Cheat:
    def act(self, state: State) -> int:
        return next(s for s in range(9) if s not in state.legal_moves())


@pytest.mark.parametrize(
    ("player", "says"),
    [(Broken(), "failed to choose a move on"), (Cheat(), "which is not legal on")],
)
def test_a_player_that_fails_gets_a_json_500(player: Any, says: str) -> None:
    offered = [OfferedPlayer("bad", "the policy bad.onnx", lambda: player), *offer([])]
    client = TestClient(create_app(offered), base_url=LOCAL, raise_server_exceptions=False)
    view = client.post("/api/games", json={"red": "bad", "black": "random", "seed": 3}).json()
    for _ in range(10):  # watch mode: the random bot plays until it is the bad player's turn
        response = client.post(f"/api/games/{view['id']}/step")
        if response.status_code != 200:
            break
    assert response.status_code == 500
    detail = sentence(response)
    assert detail.startswith("The policy bad.onnx ") and says in detail, detail
    assert client.get(f"/api/games/{view['id']}").status_code == 200  # the game is still there


# --- the records file at start-up -------------------------------------------------------------


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = web_server.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_hostile_records_file_starts_the_server_with_a_note(
    tmp_path: Path, data_dir: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr("uvicorn.Server.run", lambda self, sockets: None)
    path = tmp_path / "hostile.jsonl"
    valid = (data_dir / "rounds.jsonl").read_text().splitlines()[0]
    lines = [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"id": 1' + b"1" * 5000 + b"}",
        json.dumps({"id": "a\nb\x1b"}).encode(),
        valid.encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = run_main(["--port", "0", "--opponent", "random", "--records", str(path)])
    assert code == 0 and err == "", err
    note = out.splitlines()[0]
    assert note.startswith(f"note: {path}: 1 record to replay, 3 invalid skipped")
    assert "nested too deeply" in note and note.isprintable()


@pytest.mark.parametrize("kind", ["device", "too large"])
def test_a_records_file_the_server_cannot_hold_is_refused(kind: str, tmp_path: Path) -> None:
    if kind == "device":
        path = Path("/dev/zero")
        if not path.exists():
            pytest.skip("needs /dev/zero")
        says = "--records: /dev/zero is not a regular file"
    else:
        path = tmp_path / "huge.jsonl"
        with open(path, "wb") as handle:
            handle.truncate(web_server.MAX_RECORDS_BYTES + 1)  # sparse: no disk used
        says = (
            f"is {web_server.MAX_RECORDS_BYTES + 1:,} bytes; the server reads records files of at"
        )
    code, _, err = run_main(["--port", "0", "--records", str(path)])
    assert code == 2 and err.count("\n") == 1 and says in err, err


# --- a property: no request body makes the API fail -------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=15,
)
new_game_fields = st.fixed_dictionaries(
    {},
    optional={
        "red": st.sampled_from(["human", "random", "perfect", "nobody"]) | json_values,
        "black": st.sampled_from(["human", "random", "greedy"]) | json_values,
        "target": st.integers(-5, 200) | json_values,
        "seed": st.integers(-(2**64), 2**64) | json_values,
        "extra": json_values,
    },
)
bodies = (
    new_game_fields.map(json.dumps)
    | json_values.map(lambda v: json.dumps(v, allow_nan=True))
    | st.text(max_size=50)
).map(str.encode) | st.binary(max_size=50)
slots = st.fixed_dictionaries({"slot": st.integers(-3, 12) | json_values})
move_bodies = slots.map(json.dumps).map(str.encode) | bodies

FUZZ_CLIENT = TestClient(create_app(offer([])), base_url=LOCAL, raise_server_exceptions=True)


def check_request(new_game: bytes, move: bytes) -> None:
    """Whatever the bodies, an answer the API documents, never a 500; a refused move leaves
    the game as it was."""
    response = FUZZ_CLIENT.post(
        "/api/games", content=new_game, headers={"content-type": "application/json"}
    )
    assert response.status_code in (201, 400, 413, 422), response.text
    if response.status_code != 201:
        sentence(response)
        response = FUZZ_CLIENT.post("/api/games", json={"red": "human", "black": "random"})
    game = response.json()["id"]
    before = FUZZ_CLIENT.get(f"/api/games/{game}").json()
    answer = FUZZ_CLIENT.post(
        f"/api/games/{game}/moves", content=move, headers={"content-type": "application/json"}
    )
    assert answer.status_code in (200, 400, 409, 413, 422), answer.text
    if answer.status_code != 200:
        sentence(answer)
        assert FUZZ_CLIENT.get(f"/api/games/{game}").json() == before


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new_game=bodies, move=move_bodies)
def test_no_request_body_makes_the_api_fail(new_game: bytes, move: bytes) -> None:
    check_request(new_game, move)  # 3,000 bodies in the long run (the slow tests, in CI)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new_game=bodies, move=move_bodies)
def test_no_request_body_makes_the_api_fail_long_run(new_game: bytes, move: bytes) -> None:
    check_request(new_game, move)


# --- the real server on loopback: timeouts and the body cap as a client meets them ------------

HEADER_TIMEOUT = 0.5


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    """buttonup-web's server (web_server.make_server: uvicorn with the header timeout) on a free
    port of 127.0.0.1, in a thread, with a short header timeout."""
    app = create_app(offer([]), hosts=AllowedHosts.serving("127.0.0.1"))
    with serving(app, header_timeout=HEADER_TIMEOUT) as port:
        yield "127.0.0.1", port


def connect(server: tuple[str, int]) -> socket.socket:
    conn = socket.create_connection(server, timeout=10)
    return conn


def read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_slow_partial_headers_are_timed_out(server: tuple[str, int]) -> None:
    for opening in (b"", b"GET /api/options HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
        with connect(server) as conn:
            start = time.monotonic()
            conn.sendall(opening)
            for _ in range(3):  # a byte now and then keeps no connection open
                time.sleep(HEADER_TIMEOUT / 4)
                try:
                    conn.sendall(b"X")
                except OSError:
                    break
            assert read_all(conn) == b""  # closed, without an answer
            assert time.monotonic() - start < HEADER_TIMEOUT + 3


def test_a_kept_alive_connection_gets_the_timeout_for_its_next_request(
    server: tuple[str, int],
) -> None:
    with connect(server) as conn:
        conn.sendall(b"GET /api/options HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = conn.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        conn.sendall(b"GET /api/options HTTP/1.1\r\nHost: 127.")  # and then nothing
        rest = read_all(conn)
        assert b"HTTP/1.1" not in rest and time.monotonic() - start < HEADER_TIMEOUT + 3


def test_the_body_cap_answers_before_the_body_is_sent(server: tuple[str, int]) -> None:
    with connect(server) as conn:
        conn.sendall(
            b"POST /api/games HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100000000\r\n\r\n{"black": '
        )
        start = time.monotonic()
        answer = read_all(conn)  # the server does not wait for the 100 MB
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert time.monotonic() - start < 3
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert "larger than 4,096 bytes" in json.loads(body)["detail"]


def test_a_chunked_body_over_the_cap_is_cut_off(server: tuple[str, int]) -> None:
    with connect(server) as conn:
        conn.sendall(
            b"POST /api/games HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(5):  # 5 KiB, then nothing more: the answer comes before any reset
            conn.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")
        answer = read_all(conn)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_a_body_that_does_not_come_gets_408() -> None:
    from buttonup_env.ui.web import guard

    sock = web_server.listen("127.0.0.1", 0)
    app = create_app(offer([]))
    for middleware in app.user_middleware:  # a short body timeout for this server
        if middleware.cls is guard.RequestGuard:
            middleware.kwargs["body_timeout"] = 0.5
    uv = web_server.make_server(app, header_timeout=5)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.02)
    try:
        with connect(("127.0.0.1", sock.getsockname()[1])) as conn:
            conn.sendall(
                b"POST /api/games HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n{"
            )
            answer = read_all(conn)
    finally:
        uv.should_exit = True
        thread.join(timeout=20)
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert "did not arrive within 0.5 s" in json.loads(answer.partition(b"\r\n\r\n")[2])["detail"]


def test_a_rebinding_host_is_refused_by_the_real_server(server: tuple[str, int]) -> None:
    with connect(server) as conn:
        conn.sendall(b"GET /api/options HTTP/1.1\r\nHost: evil.example:8000\r\n\r\n")
        answer = conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 421 ")
    with connect(server) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
        answer = conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400 ")


# --- players that think too long ----------------------------------------------------------------


class Slow:
    """A player that thinks until it is released (or a minute has passed)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def act(self, state: State) -> int:
        self.release.wait(60)
        return state.legal_moves()[0]


def test_a_slow_player_holds_up_nobody_else_and_gets_a_sentence() -> None:
    """A player thinking forever: its request gets a 500 sentence after the time limit, and
    meanwhile another client's requests are answered at once (the real server, two
    connections)."""
    from buttonup_env.ui.web.workers import Workers

    release = threading.Event()
    offered = [OfferedPlayer("slow", "the policy slow.onnx", lambda: Slow(release)), *offer([])]
    app = create_app(offered, workers=Workers(seconds=1.5), hosts=AllowedHosts.serving("127.0.0.1"))
    sock = web_server.listen("127.0.0.1", 0)
    uv = web_server.make_server(app)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    answers: list[Any] = []
    try:
        with (
            httpx.Client(base_url=base, timeout=10) as first,
            httpx.Client(base_url=base, timeout=10) as second,
        ):
            game = first.post("/api/games", json={"red": "slow", "black": "random", "seed": 1})
            game_id = game.json()["id"]
            assert game.json()["state"]["to_move"] == "R"  # the slow player's turn (watch mode)
            stepping = threading.Thread(
                target=lambda: answers.append(first.post(f"/api/games/{game_id}/step"))
            )
            start = time.monotonic()
            stepping.start()
            time.sleep(0.2)
            for _ in range(3):  # another client, while the slow player thinks
                asked = time.monotonic()
                assert second.get("/api/options").status_code == 200
                other = second.post("/api/games", json={"black": "random"})
                assert other.status_code == 201
                assert time.monotonic() - asked < 0.5
            busy = second.post(f"/api/games/{game_id}/step")  # the same game: not now
            assert busy.status_code == 409 and "still answering" in sentence(busy)
            stepping.join(10)
            assert 1.5 <= time.monotonic() - start < 5
        response = answers[0]
        assert response.status_code == 500
        assert sentence(response).startswith("The policy slow.onnx did not choose a move on ")
        assert "within 1.5 s" in sentence(response)
    finally:
        release.set()
        uv.should_exit = True
        thread.join(timeout=20)
        sock.close()


SLOW_SERVER = """
import sys, threading
from buttonup_env.ui.web import server
from buttonup_env.ui.web.app import create_app
from buttonup_env.ui.web.offered import OfferedPlayer, offer

class Slow:
    def act(self, state):
        threading.Event().wait(600)  # thinks for ten minutes

app = create_app([OfferedPlayer("slow", "the slow player", Slow), *offer([])])
sock = server.listen("127.0.0.1", 0)
print(sock.getsockname()[1], flush=True)
server.serve(server.make_server(app), sock)
print("Stopped.", flush=True)
"""


@pytest.mark.parametrize(  # Ctrl-C's; kill's takes the same path (slow)
    "signal_number",
    [pytest.param(signal.SIGTERM, marks=pytest.mark.slow), signal.SIGINT],
    ids=["TERM", "INT"],
)
def test_a_signal_stops_the_server_while_a_player_thinks(signal_number: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_SERVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base = f"http://127.0.0.1:{int(process.stdout.readline())}"
        with httpx.Client(base_url=base, timeout=20) as http:
            deadline = time.monotonic() + 30
            while True:  # the port is bound before the server listens on it
                try:
                    http.get("/api/options")
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline, "the server did not start"
                    time.sleep(0.05)
            game = http.post("/api/games", json={"red": "slow", "black": "random", "seed": 1})
            assert game.json()["state"]["to_move"] == "R"  # the slow player's turn
            game_id = game.json()["id"]
            answers: list[Any] = []
            stuck = threading.Thread(
                target=lambda: answers.append(http.post(f"/api/games/{game_id}/step")), daemon=True
            )
            stuck.start()
            time.sleep(0.3)  # the step is under way, its player thinking
            start = time.monotonic()
            process.send_signal(signal_number)
            out, err = process.communicate(timeout=30)
            stuck.join(10)
        assert time.monotonic() - start < web_server.SHUTDOWN_SECONDS + 5
        assert answers[0].status_code == 503  # answered as the server stopped, not cut off
        assert answers[0].json()["detail"] == "The server is stopping."
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == "Stopped.\n" and "Traceback" not in err, err


# --- records: how many, how long, how large an answer ---------------------------------------


def tied_match(rounds: int, record_id: str = "tied") -> dict[str, Any]:
    """A valid match record at target 1 of ``rounds`` rounds: all tied (nobody scores) but the
    last. Tied rounds score nothing, so a match can go on for any number of them."""
    rng = np.random.default_rng(0)
    tie = win = None
    while tie is None or win is None:
        layout = LAYOUTS[int(rng.integers(len(LAYOUTS)))]
        state = State.new_round(layout, "R", target=1)
        moves = []
        while not state.round_over:
            moves.append(int(rng.choice(state.legal_moves())))
            state = state.play(moves[-1])
        entry = {"layout": " ".join(layout), "moves": moves}
        if state.strength["R"] == state.strength["B"]:
            tie = tie or entry
        else:
            win = win or entry
    score = {"R": 0, "B": 0}
    starter: Any = "R"
    played = []
    for number in range(rounds):
        if number:
            starter = next_starter(score, starter)  # a tie leaves the score at 0-0
        played.append(dict(tie if number < rounds - 1 else win, first=starter))
    return {"id": record_id, "target": 1, "first": "R", "rounds": played}


def test_a_record_of_13001_tied_rounds_is_not_offered(tmp_path: Path) -> None:
    """The 0.9 MB record that gave a 60 MB answer and blocked the server for 14 s: skipped at
    start-up with a note, as the first invalid record."""
    path = tmp_path / "tied.jsonl"
    lines = [tied_match(13_001, "long"), tied_match(3, "short")]
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines))
    assert 850_000 < path.stat().st_size < 1 << 20  # 0.9 MB: a line the reader takes
    start = time.monotonic()
    stored, notes = load_records([path])
    assert time.monotonic() - start < 2  # counted, not replayed
    assert [r.id for r in stored] == ["short"]
    assert (
        "1 invalid skipped (first, long: it has 13,001 rounds; the server replays records of at "
        f"most {MAX_REPLAY_ROUNDS:,}" in notes[0]
    )


def test_the_longest_record_offered_is_replayed_off_the_loop_once_and_within_the_cap() -> None:
    record = tied_match(MAX_REPLAY_ROUNDS)
    stored = [replays._stored("longest", record)]
    app = create_app(offer([]), stored)

    async def both() -> tuple[Any, float, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            replaying = asyncio.ensure_future(client.get("/api/records/0"))
            await asyncio.sleep(0.05)  # the replay is being computed
            asked = time.monotonic()
            options = await client.get("/api/options")  # answered meanwhile
            waited = time.monotonic() - asked
            assert options.status_code == 200 and not replaying.done()
            return await replaying, waited, await client.get("/api/records/0")

    replay, waited, again = asyncio.run(both())
    assert waited < 0.3, waited
    assert replay.status_code == 200 and replay.content == again.content  # the same, cached
    events = replay.json()["events"]
    assert len(events) == EVENTS_PER_ROUND * MAX_REPLAY_ROUNDS + 1  # and the match's end
    assert len(replay.content) < MAX_RESPONSE_BYTES


def test_the_records_served_are_capped_and_the_rest_is_not_read(
    tmp_path: Path, data_dir: Path
) -> None:
    rounds = data_dir / "rounds.jsonl"
    path = tmp_path / "more.jsonl"
    path.write_bytes(rounds.read_bytes()[:2000].rsplit(b"\n", 1)[0] + b"\n" + b"{not json\n" * 50)
    stored, notes = load_records([rounds, path], max_records=250)
    assert len(stored) == 250
    assert notes == [
        f"{rounds}: 250 records to replay; the rest is not read, the server offers at most 250 "
        "records",
        f"{path}: not read, the server offers at most 250 records",
    ]


def test_the_records_are_listed_a_page_at_a_time(data_dir: Path) -> None:
    stored, _ = load_records([data_dir / "rounds.jsonl", data_dir / "matches.jsonl"])
    client = TestClient(create_app(offer([]), stored), base_url=LOCAL)
    first = client.get("/api/records").json()
    assert first["total"] == 340 and first["start"] == 0 and len(first["records"]) == 100
    page = client.get("/api/records", params={"start": 300, "count": 50}).json()
    assert [r["index"] for r in page["records"]] == list(range(300, 340))
    assert client.get("/api/records", params={"start": 340}).json()["records"] == []
    for params, says in (
        ({"count": MAX_RECORDS_PAGE + 1}, '"count"'),
        ({"count": 0}, '"count"'),
        ({"start": -1}, '"start"'),
        ({"start": "x"}, '"start"'),
    ):
        response = client.get("/api/records", params=params)
        assert response.status_code == 422 and says in sentence(response), response.text


def test_an_answer_over_the_cap_is_refused_in_a_sentence(data_dir: Path) -> None:
    stored, _ = load_records([data_dir / "rounds.jsonl"])
    client = TestClient(create_app(offer([]), stored, max_response=20_000), base_url=LOCAL)
    assert client.get("/api/records", params={"count": 10}).status_code == 200
    response = client.get("/api/records", params={"count": 500})
    assert response.status_code == 500
    assert "more than the 20,000 this server sends" in sentence(response)


def test_an_answer_without_a_length_is_cut_off_at_the_cap() -> None:
    from buttonup_env.ui.web.guard import RequestGuard

    async def streaming(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(100):
            await send({"type": "http.response.body", "body": b"x" * 1000, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    sent: list[bytes] = []

    async def send(message: Any) -> None:
        sent.append(message.get("body", b""))

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    guard = RequestGuard(streaming, max_response=10_000)
    scope = {"type": "http", "headers": [(b"host", b"localhost")]}
    with pytest.raises(RuntimeError, match="more than 10,000 bytes was cut off"):
        asyncio.run(guard(scope, receive, send))
    assert sum(map(len, sent)) <= 10_000


# --- games: a share for each client -----------------------------------------------------------


def test_a_client_beyond_its_share_pushes_out_its_own_games_only() -> None:
    app = create_app(offer([]), max_games_per_client=3)
    alice = TestClient(app, base_url=LOCAL, client=("10.0.0.1", 5000))
    bob = TestClient(app, base_url=LOCAL, client=("10.0.0.2", 5000))
    bobs = bob.post("/api/games", json={"black": "random"}).json()["id"]
    alices = [alice.post("/api/games", json={"black": "random"}).json()["id"] for _ in range(20)]
    assert bob.get(f"/api/games/{bobs}").status_code == 200  # still there
    assert [alice.get(f"/api/games/{g}").status_code for g in alices] == [404] * 17 + [200] * 3
    assert app.state.store.games_of("10.0.0.1") == 3 and len(app.state.store) == 4


def test_a_full_server_refuses_a_new_client_until_a_game_is_left_unused() -> None:
    now = [0.0]
    store = stores.GameStore(max_games=4, max_per_client=2, idle_seconds=60, clock=lambda: now[0])
    game = lambda: games.Game(store.new_id(), None, None)  # noqa: E731
    for client in ("a", "a", "b", "b"):
        store.add(game(), client)
    with pytest.raises(errors.StoreFull, match="keeps 4 games, as many as it may"):
        store.add(game(), "c")
    store.add(game(), "a")  # a client with games makes room from its own
    assert store.games_of("a") == 2 and store.games_of("b") == 2
    now[0] = 61.0
    kept = game()
    store.add(kept, "c")  # the games unused for a minute make room
    assert store.games_of("c") == 1 and kept.id in store


def test_a_full_server_answers_503() -> None:
    app = create_app(offer([]), max_games=2, max_games_per_client=1)
    for number in (1, 2):
        client = TestClient(app, base_url=LOCAL, client=(f"10.0.0.{number}", 1))
        assert client.post("/api/games", json={"black": "random"}).status_code == 201
    late = TestClient(app, base_url=LOCAL, client=("10.0.0.3", 1))
    response = late.post("/api/games", json={"black": "random"})
    assert response.status_code == 503 and "try again later" in sentence(response)


@pytest.mark.parametrize(
    ("host", "client"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),  # the same machine's other address
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
        (None, "unknown"),
    ],
)
def test_clients_are_addresses_and_ipv6_networks(host: str | None, client: str) -> None:
    assert stores.client_of(host) == client


# --- the command line's output ----------------------------------------------------------------


@pytest.mark.parametrize("output", ["closed", "full"])
def test_the_command_with_no_output_says_so_and_does_not_serve(
    output: str, monkeypatch: Any
) -> None:
    served: list[Any] = []
    monkeypatch.setattr("uvicorn.Server.run", lambda self, sockets: served.append(self))
    err = io.StringIO()
    if output == "closed":
        monkeypatch.setattr(sys, "stdout", None)
        code = web_server.main(["--port", "0", "--opponent", "random"], stderr=err)
        says = "standard output is closed"
    else:
        if not Path("/dev/full").exists():
            pytest.skip("needs /dev/full")
        full = open("/dev/full", "w")  # closed below: closing it fails too
        try:
            code = web_server.main(["--port", "0", "--opponent", "random"], stdout=full, stderr=err)
        finally:
            with contextlib.suppress(OSError):
                full.close()
        says = "cannot write to standard output (No space left on device)"
    assert code == 2 and not served
    assert err.getvalue() == f"python -m buttonup_env.web: error: {says}\n"
