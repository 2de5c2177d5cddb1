"""The web server's resident memory while clients send it large request bodies.

    python benchmarks/bench_web_body.py [--bodies 4] [--megabytes 100]

Starts ``buttonup-web`` (``python -m buttonup_env.web --port 0``) in its own process, waits a
second, then opens ``--bodies`` connections at once, each posting a body of ``--megabytes``
MiB to ``/api/games`` as fast as the server takes it, and samples the server's VmRSS (from
``/proc``, so Linux only) every 50 ms until every client is done, then once more a second
later. Without a cap on request bodies the server holds them; with it (``RequestGuard``: 413
for a body over 4 KiB, before it is read) its memory does not move.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


def resident_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def post(port: int, megabytes: int) -> None:
    """One client: the headers of a ``megabytes`` MiB body, then the body, then the answer."""
    chunk = b" " * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(
            b"POST /api/games HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {megabytes << 20}\r\n\r\n".encode()
        )
        try:
            for _ in range(megabytes):
                conn.sendall(chunk)
            conn.recv(1000)
        except OSError:  # the server answered 413 and closed the connection
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=4, help="clients at once (default 4)")
    parser.add_argument("--megabytes", type=int, default=100, help="MiB a body (default 100)")
    args = parser.parse_args()
    if args.bodies < 1 or args.megabytes < 1:
        parser.error("--bodies and --megabytes must be >= 1")
    command = [sys.executable, "-m", "buttonup_env.web", "--port", "0", "--opponent", "random"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = ""
        while "served at" not in line:
            line = server.stdout.readline()
            if not line:
                raise SystemExit(f"the server did not start: {server.stderr.read()}")  # type: ignore[union-attr]
        port = int(re.search(r":(\d+)/", line)[1])  # type: ignore[index]
        time.sleep(1)
        before = peak = resident_mb(server.pid)
        clients = [
            threading.Thread(target=post, args=(port, args.megabytes)) for _ in range(args.bodies)
        ]
        for client in clients:
            client.start()
        while any(client.is_alive() for client in clients):
            peak = max(peak, resident_mb(server.pid))
            time.sleep(0.05)
        time.sleep(1)
        after = resident_mb(server.pid)
    finally:
        server.terminate()
        server.wait()
    print(
        f"{args.bodies} bodies of {args.megabytes} MiB: server resident memory {before} MB "
        f"before, {peak} MB at the peak, {after} MB after"
    )


if __name__ == "__main__":
    main()
