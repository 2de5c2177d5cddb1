"""What every request to the web app meets (buttonup_env.ui.web.guard): the Host check against DNS
rebinding, the body cap, the header and body timeouts, JSON errors when a policy fails, the
records file at start-up, and a property over request bodies. The timeouts and the body cap
are tested against the real server (uvicorn, as buttonup-web runs it) on loopback."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web app needs the web extra: pip install -e '.[web]'")

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buttonup_env.game.rules import State
from buttonup_env.ui.web import cli
from buttonup_env.ui.web.app import SECURITY_HEADERS, create_app
from buttonup_env.ui.web.games import OfferedPlayer, offer
from buttonup_env.ui.web.guard import MAX_BODY_BYTES, AllowedHosts, host_name

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
    code = cli.main(
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
    code = cli.main(argv, stdout=out, stderr=err)
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
            handle.truncate(cli.MAX_RECORDS_BYTES + 1)  # sparse: no disk used
        says = f"is {cli.MAX_RECORDS_BYTES + 1:,} bytes; the server reads records files of at"
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new_game=bodies, move=move_bodies)
def test_no_request_body_makes_the_api_fail(new_game: bytes, move: bytes) -> None:
    check_request(new_game, move)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new_game=bodies, move=move_bodies)
def test_no_request_body_makes_the_api_fail_long_run(new_game: bytes, move: bytes) -> None:
    check_request(new_game, move)


# --- the real server on loopback: timeouts and the body cap as a client meets them ------------

HEADER_TIMEOUT = 0.5


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    """buttonup-web's server (cli.make_server: uvicorn with the header timeout) on a free
    port of 127.0.0.1, in a thread, with a short header timeout."""
    sock = cli.listen("127.0.0.1", 0)
    app = create_app(offer([]), hosts=AllowedHosts.serving("127.0.0.1"))
    uv = cli.make_server(app, header_timeout=HEADER_TIMEOUT)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield "127.0.0.1", sock.getsockname()[1]
    uv.should_exit = True
    thread.join(timeout=20)
    sock.close()


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

    sock = cli.listen("127.0.0.1", 0)
    app = create_app(offer([]))
    for middleware in app.user_middleware:  # a short body timeout for this server
        if middleware.cls is guard.RequestGuard:
            middleware.kwargs["body_timeout"] = 0.5
    uv = cli.make_server(app, header_timeout=5)
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
