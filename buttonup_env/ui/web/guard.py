"""What every request meets before the web app's API sees it: the Host header it names, the
size of its body and the time it takes to arrive; and the size of every answer.

* **Host.** A page on another site can reach a server on this machine's loopback address by
  DNS rebinding: its own domain name is made to resolve to 127.0.0.1, and the browser then
  sends that name in the ``Host`` header. The server answers only the names it is served
  under (:class:`AllowedHosts`): ``localhost`` and its subdomains, loopback addresses, the
  ``--host`` it listens on and the names given with ``--allowed-host``; a request for another
  name gets 421, one without a readable ``Host`` 400.
* **Body.** Every request of the API fits in a few hundred bytes; a body of more than
  :data:`MAX_BODY_BYTES` gets 413 before it is read (by its ``Content-Length``, or as soon as
  that much has arrived), so a 100 MB upload costs no memory.
* **Time.** The headers of a request must arrive within :data:`HEADER_TIMEOUT` seconds of
  the connection (or of the previous response on it): :func:`header_timeout_protocol` closes
  connections that send their headers a byte at a time, or nothing. The body must follow
  within :data:`BODY_TIMEOUT` seconds, or the request gets 408.
* **Answer.** No answer is larger than :data:`MAX_RESPONSE_BYTES`: one that says it is larger
  (its ``Content-Length``) is replaced by a 500 saying so, and one without that header is cut
  off once it has sent that much. The API's answers stay far below it (a page of records, a
  replay of the longest record offered), so this is the last line, not the first.

Every refusal is ``{"detail": "<one sentence>"}``, as the API's own errors are.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

MAX_BODY_BYTES = 4096
"""The largest request body the app reads, in bytes (a new game's request is under 300)."""

MAX_RESPONSE_BYTES = 8 << 20
"""The largest answer the app sends, in bytes (a replay of 1,000 rounds is about 6 MB)."""

HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's headers."""

BODY_TIMEOUT = 10.0
"""Seconds a request has to send its body once its headers have arrived."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WILDCARDS = ("", "0.0.0.0", "::")
"""``--host`` values that listen on every address of the machine."""


def host_name(header: str) -> str | None:
    """The host a ``Host`` header names, in lower case, without its port or brackets or a
    final dot; None when the header is not a host (``a b``, ``[::1``, ``x:y:z``)."""
    text = header.strip().lower()
    if text.startswith("["):  # an IPv6 address, [::1] or [::1]:8000
        end = text.find("]")
        rest = text[end + 1 :] if end > 0 else "x"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        name = text[1:end]
    else:
        name, colon, port = text.rpartition(":")
        if not colon:
            name = text
        elif not port.isdigit() or ":" in name:
            return None
    name = name.removesuffix(".")
    if not name or any(c.isspace() or c in "/\\@?#" for c in name):
        return None
    return name


def _normal(name: str) -> str:
    """A host name or address as :func:`host_name` gives it (addresses in their short form)."""
    name = name.strip().lower().removeprefix("[").removesuffix("]").removesuffix(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@dataclass(frozen=True)
class AllowedHosts:
    """The ``Host`` names a server answers, besides ``localhost`` (and ``*.localhost``) and
    the loopback addresses, which it always answers."""

    names: frozenset[str] = field(default_factory=frozenset)
    """Host names and addresses, as :func:`host_name` gives them."""
    any_address: bool = False
    """Any IP address too (a server listening on all of them): DNS rebinding needs a name."""
    anything: bool = False
    """Every ``Host`` (``--allowed-host '*'``): no protection at all."""

    @classmethod
    def serving(cls, host: str, extra: Iterable[str] = ()) -> AllowedHosts:
        """What a server listening on ``host`` (``--host``) answers, with the ``extra`` names
        (``--allowed-host``; ``*`` for every name). On a wildcard (``0.0.0.0``, ``::``) that is
        any IP address and this machine's own names."""
        extra = [_normal(name) for name in extra]
        wildcard = host.strip().strip("[]") in WILDCARDS
        names = {_normal(host)} if not wildcard else set()
        if wildcard:
            names |= {_normal(socket.gethostname()), _normal(socket.getfqdn())}
        return cls(frozenset(names | set(extra)) - {"*", ""}, wildcard, "*" in extra)

    def allows(self, header: str) -> bool:
        """True when the ``Host`` header ``header`` names a host this server answers."""
        name = host_name(header)
        if name is None:
            return False
        if self.anything or name == "localhost" or name.endswith(".localhost"):
            return True
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return name in self.names
        return address.is_loopback or self.any_address or str(address) in self.names

    def describe(self) -> str:
        """The names answered, for messages."""
        names = ["localhost", *sorted(self.names - {"localhost"})]
        if self.any_address:
            names.append("any IP address")
        return ", ".join(names) + " and loopback addresses"


class RequestGuard:
    """An ASGI middleware: the Host check, the body cap, the body timeout and the answer cap
    (see the module docstring), in front of ``app``. Refusals carry ``headers`` (the app's
    security headers)."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: AllowedHosts | None = None,
        max_body: int = MAX_BODY_BYTES,
        body_timeout: float = BODY_TIMEOUT,
        headers: dict[str, str] | None = None,
        max_response: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.app = app
        self.hosts = hosts or AllowedHosts()
        self.max_body = max_body
        self.max_response = max_response
        self.body_timeout = body_timeout
        self.headers = dict(headers or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [(k.lower(), v) for k, v in scope.get("headers", [])]
        hosts = [v.decode("latin-1") for k, v in headers if k == b"host"]
        if len(hosts) != 1 or host_name(hosts[0]) is None:
            what = "no Host header" if not hosts else "a Host header that names no host"
            if len(hosts) > 1:
                what = "more than one Host header"
            await self._refuse(send, 400, f"the request has {what}")
            return
        if not self.hosts.allows(hosts[0]):
            shown = json.dumps(hosts[0][:60])
            await self._refuse(
                send,
                421,
                f"this server does not answer for the host {shown}, only for "
                f"{self.hosts.describe()}; a page of another site may be trying to reach it "
                "(start buttonup-web with --allowed-host NAME to answer another name)",
            )
            return
        lengths = [v for k, v in headers if k == b"content-length"]
        if lengths and not (len(lengths) == 1 and lengths[0].strip().isdigit()):
            await self._refuse(send, 400, "the request's Content-Length is not a number of bytes")
            return
        if lengths and int(lengths[0]) > self.max_body:
            await self._too_large(send)
            return
        body = await self._read_body(receive, send)
        if body is None:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, self._capped(send))

    def _capped(self, send: Send) -> Send:
        """``send``, never sending more than :attr:`max_response` bytes of body."""
        sent = 0
        refused = False

        async def capped(message: Message) -> None:
            nonlocal sent, refused
            if refused:
                return
            if message["type"] == "http.response.start":
                lengths = [
                    v for k, v in message.get("headers", []) if k.lower() == b"content-length"
                ]
                if lengths and lengths[0].strip().isdigit() and int(lengths[0]) > self.max_response:
                    refused = True
                    await self._refuse(
                        send,
                        500,
                        f"the answer would be {int(lengths[0]):,} bytes, more than the "
                        f"{self.max_response:,} this server sends",
                    )
                    return
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
                if sent > self.max_response:  # no Content-Length: cut off here
                    refused = True
                    raise RuntimeError(
                        f"an answer of more than {self.max_response:,} bytes was cut off"
                    )
            await send(message)

        return capped

    async def _read_body(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once a refusal is sent (too large, too slow, gone)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except asyncio.TimeoutError:
                await self._refuse(
                    send, 408, f"the request's body did not arrive within {self.body_timeout:g} s"
                )
                return None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._too_large(send)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        await self._refuse(
            send,
            413,
            f"the request's body is larger than {self.max_body:,} bytes; every request of "
            "this API fits in a few hundred",
        )

    async def _refuse(self, send: Send, status: int, text: str) -> None:
        sentence = text[:1].upper() + text[1:] + "."
        body = json.dumps({"detail": sentence}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),  # the rest of a refused body is not read
            *((k.lower().encode(), v.encode()) for k, v in self.headers.items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def header_timeout_protocol(seconds: float = HEADER_TIMEOUT) -> type:
    """uvicorn's h11 HTTP protocol, closing every connection whose request headers have not
    all arrived ``seconds`` after it opened or after its previous response (uvicorn itself
    waits for them forever). Give it to ``uvicorn.Config(http=...)``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):  # type: ignore[misc]
        """See :func:`header_timeout_protocol`."""

        _headers_due: asyncio.TimerHandle | None = None

        def _wait_for_headers(self) -> None:
            self._headers_arrived()
            self._headers_due = self.loop.call_later(seconds, self._too_slow)

        def _headers_arrived(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
                self._headers_due = None

        def _too_slow(self) -> None:
            self._headers_due = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._wait_for_headers()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle:  # a request's headers are in: its cycle has begun
                self._headers_arrived()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            if self.cycle is cycle and not self.transport.is_closing():
                self._wait_for_headers()  # for the next request on this connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_arrived()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
