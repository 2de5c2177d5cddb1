"""buttonup-web's server in a thread of the test process, on a free port of loopback (not a
test module): uvicorn as ``buttonup-web`` runs it (``ui.web.server.make_server``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from buttonup_env.ui.web import server as web_server


@contextlib.contextmanager
def serving(app: Any, header_timeout: float | None = None) -> Iterator[int]:
    """Serve ``app`` until the block ends; its port."""
    sock = web_server.listen("127.0.0.1", 0)
    uv = web_server.make_server(app, header_timeout=header_timeout)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    try:
        while not uv.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield sock.getsockname()[1]
    finally:
        uv.should_exit = True
        thread.join(timeout=20)
        sock.close()
