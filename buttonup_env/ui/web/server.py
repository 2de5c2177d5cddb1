"""``buttonup-web`` (``python -m buttonup_env.web``): serve the web app on this machine.

Prints the address to open, then serves until Ctrl-C or SIGTERM. Every request meets
:class:`~buttonup_env.ui.web.guard.RequestGuard` first: only the host names it is served under
(``localhost``, loopback addresses, ``--host`` and ``--allowed-host``; 421 for others, against
DNS rebinding), bodies of at most 4 KiB (413), headers within 10 seconds. Bots and policies
think beside the event loop with a time limit of 10 s a move, so the server answers other
clients and its signals meanwhile; once stopped it waits at most :data:`SHUTDOWN_SECONDS` for
the requests under way. Exit status: 0 once stopped; 2 for a bad argument, opponent or records
file, an address it cannot listen on, or a standard output that is closed or cannot be written
(one error line); 1 when the ``web`` extra is not installed.

On ``--host 0.0.0.0`` (or any address other machines reach) anyone who reaches the port can
play: there is no login. Each client, an IP address (an IPv6 client's /64), keeps at most 50
games; its own least recently used game makes room for its next, never another client's. The
server keeps 1,000 games in all: when that many are in use (none left for an hour), a new
client's game is refused with 503 until one is. Clients behind one proxy or NAT share one
address, and so one share.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import ipaddress
import os
import signal
import socket
import stat
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from ...players.shipped import SHIPPED_DIR
from ..cli import Checked, StreamError, after_output_failed, parse_arguments, report, whole_number

if TYPE_CHECKING:  # the web extra's packages are imported only once the arguments are read
    from .offered import OfferedPlayer
from .replays import StoredRecord

SHIPPED_MODELS = (SHIPPED_DIR / "buttonup-ppo.onnx",)
"""Where the shipped agent is looked for (:data:`buttonup_env.players.shipped.SHIPPED_DIR`)."""

SHIPPED_LABEL = "the shipped agent (buttonup-ppo)"

LEVELS = ("perfect-0.5", "perfect-0.25", "perfect-0.1", "perfect-0.05")
"""The graded bots offered as levels between the greedy bot and perfect play, weakest first:
the perfect bot playing a random legal move half of the time, a quarter, a tenth, a twentieth
(:class:`buttonup_env.players.bots.GradedBot`; their ratings are in the shipped league)."""


def default_opponent() -> tuple[str, str | None]:
    """The default opponent: the shipped agent, else the perfect bot with a note saying why."""
    for path in SHIPPED_MODELS:
        if path.is_file():
            return str(path), None
    return "perfect", (
        f"the shipped agent was not found (looked for {' and '.join(map(str, SHIPPED_MODELS))}), "
        "so the default opponent is the perfect bot"
    )


class StartError(Exception):
    """Something on the command line cannot be served (the message is one line)."""


_port = whole_number(0, "port", 65535)
"""An argparse type: a port number, 0 to 65535."""


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m buttonup_env.web``."""
    parser = argparse.ArgumentParser(
        prog="python -m buttonup_env.web",
        description="Play, watch and replay Button Up! in the browser: serves a local web app "
        "and prints its address.",
        epilog="Exit status: 0 once stopped with Ctrl-C or SIGTERM; 2 for a bad argument, "
        "opponent or records file, an address it cannot listen on, or an output that is closed "
        "or cannot be written; 1 without the web extra (pip install 'buttonup-env[web]'). "
        "On an address other machines reach, each client (IP address) keeps at most 50 games "
        "and pushes out only its own.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1, this machine only; any other "
        "prints a warning)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a host name the server also answers, besides localhost, loopback addresses and "
        "--host (requests naming any other host get 421, which keeps pages of other sites "
        "from reaching it by DNS rebinding); repeat for several, * for any",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=8000,
        help="the port to listen on (default 8000; 0 picks a free one)",
    )
    parser.add_argument(
        "--opponent",
        action="append",
        metavar="random|greedy|perfect|perfect-P|PATH.onnx",
        help="a player to offer: a bot, a graded bot perfect-P (a random move with probability "
        "P, else the perfect one) or an exported .onnx policy; repeat to offer several, "
        "the first is the default opponent (default: the shipped agent buttonup-ppo, or the "
        "perfect bot if it is missing); the three bots and the levels "
        f"{', '.join(LEVELS)} are always offered too",
    )
    parser.add_argument(
        "--records",
        action="append",
        metavar="FILE",
        help="a JSON Lines file of round or match records (the format python -m "
        "buttonup_env.ui.replay checks) to offer for replay; repeat for several files",
    )
    return parser


def ratings_of(specs: list[str]) -> dict[str, float]:
    """The shipped league's ratings (:func:`buttonup_env.players.shipped.shipped_ratings`) of the
    bots and graded bots by name, and of each of ``specs`` that is a shipped policy (by its name or
    its file)."""
    from ...players.shipped import shipped_policies, shipped_policy_path, shipped_ratings

    ratings = shipped_ratings()
    found = dict(ratings)
    for spec in specs:
        for name in shipped_policies():
            if name not in ratings:
                continue
            path = Path(spec)
            if spec == name or (path.is_file() and path.resolve() == shipped_policy_path(name)):
                found[spec] = ratings[name]
    return found


def _players(specs: list[str] | None) -> tuple[list[OfferedPlayer], list[str]]:
    """The players to offer (the graded bots of :data:`LEVELS` among them, each player with
    its rating in the shipped league) and the notes to show about them; :class:`StartError`
    if bad."""
    from .offered import offer

    notes: list[str] = []
    if specs:
        try:
            return offer(specs, levels=LEVELS, ratings=ratings_of(specs)), notes
        except ValueError as error:
            raise StartError(f"--opponent: {error}") from None
    spec, note = default_opponent()
    if note is None:
        try:
            labels = {spec: SHIPPED_LABEL}
            return offer([spec], labels, LEVELS, ratings_of([spec])), notes
        except ValueError as error:  # e.g. onnxruntime missing
            note = f"the shipped agent could not be loaded ({error}), so the default opponent "
            note += "is the perfect bot"
    notes.append(note)
    return offer(["perfect"], levels=LEVELS, ratings=ratings_of([])), notes


MAX_RECORDS_BYTES = 64 << 20
"""The largest records file the server reads at start-up (64 MiB: about 100,000 matches)."""


def _records(paths: list[str] | None) -> tuple[list[StoredRecord], list[str]]:
    """The valid records of ``paths`` and a note per file; :class:`StartError` if a file is
    unreadable, not a regular file (a folder, a device such as /dev/zero, a pipe) or larger
    than :data:`MAX_RECORDS_BYTES`."""
    from ...game.records import printable
    from .replays import load_records

    if not paths:
        return [], []
    for path in paths:
        shown = printable(path)
        try:
            info = os.stat(path)
        except OSError as error:
            raise StartError(f"--records: cannot read {shown}: {error.strerror}") from None
        if stat.S_ISDIR(info.st_mode):
            raise StartError(f"--records: {shown} is a folder; give a JSON Lines file of records")
        if not stat.S_ISREG(info.st_mode):
            raise StartError(
                f"--records: {shown} is not a regular file (a device or a pipe); give a JSON "
                "Lines file of records"
            )
        if info.st_size > MAX_RECORDS_BYTES:
            raise StartError(
                f"--records: {shown} is {info.st_size:,} bytes; the server reads records files of "
                f"at most {MAX_RECORDS_BYTES:,} bytes (python -m buttonup_env.replay checks "
                "larger ones)"
            )
    try:
        return load_records(paths)
    except OSError as error:
        why = error.strerror or str(error)
        name = printable(str(error.filename or ", ".join(paths)))
        raise StartError(f"--records: cannot read {name}: {why}") from None


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` and listening, so that a browser that connects as
    soon as the address is printed waits for the server rather than being refused;
    :class:`StartError` in one line when it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise StartError(f"--host {host!r} cannot be resolved ({error.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a busy port still fails
        sock.bind(address)
        sock.listen()  # uvicorn listens again with its own backlog when it starts
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise StartError(
                f"port {port} on {host} is in use; choose another with --port (0 picks a free one)"
            ) from None
        if error.errno == errno.EACCES:
            raise StartError(
                f"not allowed to listen on port {port} of {host} (ports below 1024 need root); "
                "choose another with --port"
            ) from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise StartError(f"--host {host} is not an address of this machine") from None
        raise StartError(f"cannot listen on {host} port {port}: {error.strerror}") from None
    return sock


def is_loopback(sock: socket.socket) -> bool:
    """True when ``sock`` listens on a loopback address only (127.0.0.0/8 or ::1)."""
    address = ipaddress.ip_address(sock.getsockname()[0].split("%")[0])
    return address.is_loopback


def url(sock: socket.socket, host: str) -> str:
    """The address to open in a browser."""
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


SHUTDOWN_SECONDS = 3.0
"""Once told to stop, how long the server waits for the requests under way before it cancels
them (a bot's move may otherwise keep one waiting up to its 10 s)."""


def make_server(app: Any, header_timeout: float | None = None) -> Any:
    """The uvicorn server ``buttonup-web`` runs ``app`` with: quiet, closing connections whose
    request headers take longer than ``header_timeout`` seconds to arrive (default
    :data:`~buttonup_env.ui.web.guard.HEADER_TIMEOUT`), and stopping within
    :data:`SHUTDOWN_SECONDS` of Ctrl-C or SIGTERM: the requests waiting for a bot's move are
    answered at once (503, the server is stopping)."""
    import uvicorn

    from .guard import HEADER_TIMEOUT, header_timeout_protocol

    protocol = header_timeout_protocol(HEADER_TIMEOUT if header_timeout is None else header_timeout)
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
    )
    workers = getattr(getattr(app, "state", None), "workers", None)

    class Server(uvicorn.Server):  # type: ignore[misc]
        """uvicorn's server, answering the requests that wait for a bot as it stops."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if workers is not None:
                workers.stop()
            await super().shutdown(sockets=sockets)

        def run(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                super().run(sockets=sockets)
            finally:  # no thread may come back from onnxruntime while the interpreter ends
                if workers is not None:
                    workers.settle()

    return Server(config)


class _Terminated(Exception):
    """SIGTERM arrived (uvicorn stops first, then raises the signal again: this is its end)."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def serve(server: Any, sock: socket.socket) -> None:
    """Run ``server`` on ``sock`` until Ctrl-C or SIGTERM; both end it the same way."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main else None
    try:
        with contextlib.suppress(KeyboardInterrupt, _Terminated):  # uvicorn stops, then re-raises
            server.run(sockets=[sock])
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Serve the web app until Ctrl-C or SIGTERM; return the exit status."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = build_parser()
    try:
        out = Checked(stdout, "standard output")
        args = parse_arguments(parser, argv, out, stderr)
        if isinstance(args, int):
            out.flush()
            return args
        return _serve_arguments(parser, args, out, stderr)
    except StreamError as error:
        report(stderr, f"{parser.prog}: error: {error}")
        after_output_failed(stdout)
        return 2
    except BrokenPipeError:  # the reader of the address went away
        after_output_failed(stdout)
        return 1


def _serve_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, out: Checked, stderr: TextIO | None
) -> int:
    """Serve what the parsed command line asks for; return the exit status."""
    try:
        import uvicorn  # noqa: F401 - make_server's, looked for before anything starts

        from .app import create_app
        from .guard import AllowedHosts
    except ImportError as error:
        report(
            stderr,
            f"{parser.prog}: error: the web app needs FastAPI and uvicorn ({error.name} is "
            "missing): pip install 'buttonup-env[web]'",
        )
        return 1
    try:
        players, notes = _players(args.opponent)
        records, record_notes = _records(args.records)
        sock = listen(args.host, args.port)
    except StartError as error:
        report(stderr, f"{parser.prog}: error: {error}")
        return 2
    with sock:
        for note in [*notes, *record_notes]:
            out.write(f"note: {note}\n")
        if not is_loopback(sock):
            report(
                stderr,
                f"warning: listening on {args.host}, which other machines may reach: anyone who "
                "can reach it can start and play games (there is no login; each address keeps "
                "at most 50 games); --host 127.0.0.1 keeps it to this machine",
            )
        hosts = AllowedHosts.serving(args.host, args.allowed_host or ())
        app = create_app(players, records, notes=notes, hosts=hosts)
        out.write(f"Button Up! is served at {url(sock, args.host)} (Ctrl-C stops it)\n")
        out.flush()
        serve(make_server(app), sock)
    out.write("Stopped.\n")
    out.flush()
    return 0
