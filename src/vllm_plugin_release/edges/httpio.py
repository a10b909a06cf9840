"""Waiting on a server says so (a heartbeat line, then NoAnswer naming the URL), and one
bounded GET for files read from outside: at most `limit` bytes, the whole answer within a
total deadline, redirects only within the URL's origin, proxies as urllib honours them."""

from __future__ import annotations

import contextlib
import http.client
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import OutsideFailure, origin
from vllm_plugin_release.core.errors import scrub as redact_url  # a URL without its user info
from vllm_plugin_release.edges import settings

USER_AGENT = "vllm-plugin-release"
CHUNK = 1 << 16


class NotFound(Exception):
    """HTTP 404."""


class _Connections:
    """The connections a request opens, so the deadline can shut their sockets down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPConnection] = []

    def factory(self, cls: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
            connection = cls(*args, **kwargs)
            with self._lock:
                self._open.append(connection)
            return connection

        return make

    def abort(self) -> None:
        with self._lock:
            for connection in self._open:
                if connection.sock is not None:
                    shut_down(connection.sock.fileno())


class _Http(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self.connections = connections

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self.connections.factory(http.client.HTTPConnection), req)


class _Https(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self.connections = connections

    def https_open(self, req: urllib.request.Request) -> Any:
        make = self.connections.factory(http.client.HTTPSConnection)
        return self.do_open(make, req, context=self._context)  # type: ignore[attr-defined]


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """A redirect stays on the origin of the first URL (no `file:`, no other host)."""

    max_redirections = 5

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if origin(newurl) != origin(req.full_url):
            raise OutsideFailure(
                f"{redact_url(req.full_url)} redirects to {redact_url(newurl)}, another "
                "origin: not followed",
                hint="the store must serve its files itself",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _body(response: Any, limit: int, url: str) -> bytes:
    length = response.headers.get("Content-Length")
    if length and length.strip().isdigit() and int(length) > limit:
        raise bounded.too_large(redact_url(url), limit)
    chunks: list[bytes] = []
    total = 0
    while chunk := response.read1(CHUNK):
        total += len(chunk)
        if total > limit:
            raise bounded.too_large(redact_url(url), limit)
        chunks.append(chunk)
    return b"".join(chunks)


def get(url: str, limit: int, deadline: float, *, what: str) -> bytes:
    """The body of `url` (at most `limit` bytes, within `deadline` seconds: then its sockets are
    shut down). NotFound on 404, bounded.TooLarge past `limit`, else OutsideFailure."""
    connections = _Connections()
    opener = urllib.request.build_opener(_Http(connections), _Https(connections), _SameOrigin())
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    shown = redact_url(url)

    def fetch() -> bytes:
        with opener.open(request, timeout=deadline) as response:
            return _body(response, limit, url)

    try:
        return waiting(fetch, shown, abort=connections.abort, limit=deadline)
    except NoAnswer:
        raise OutsideFailure(
            f"{shown}: the {what} did not answer in full within {deadline:g} s",
            hint="the server is down or too slow; VPR_STORE_TIMEOUT sets the deadline",
        )
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotFound(shown)
        raise OutsideFailure(f"{shown}: the {what} answered HTTP {exc.code}")
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise OutsideFailure(f"{shown}: the {what} is unreachable or its answer broken ({reason})")
    finally:
        connections.abort()


T = TypeVar("T")


class NoAnswer(Exception):
    """The server accepted nothing or answered nothing within the timeout."""

    def __init__(self, url: str, waited: float) -> None:
        super().__init__(f"{url}: no answer after waiting {waited:.0f} s")
        self.url = url
        self.waited = waited


def timeout() -> float:
    return settings.number("VPR_NET_TIMEOUT")


def shut_down(fd: int) -> None:
    """Shut down the socket `fd` (both ways) without closing it: a read blocked on it in
    another thread returns, so closing its response no longer waits for that read."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()


def waiting(
    what: Callable[[], T],
    url: str,
    abort: Callable[[], None] | None = None,
    limit: float | None = None,
) -> T:
    """`what()` with a waiting line every heartbeat and `NoAnswer` once the timeout has passed; when
    the wait is given up (timeout, Ctrl-C, SIGTERM) `abort` unblocks the abandoned call."""
    limit = timeout() if limit is None else limit
    beat = settings.number("VPR_NET_HEARTBEAT")
    box: dict[str, object] = {}

    def call() -> None:
        try:
            box["value"] = what()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    started = time.monotonic()
    worker.start()
    try:
        while True:
            left = limit - (time.monotonic() - started)
            worker.join(min(beat, max(left, 0)))
            if not worker.is_alive():
                break
            waited = time.monotonic() - started
            if waited >= limit:
                raise NoAnswer(url, waited)
            print(f"vpr: waiting for {url} ({waited:.0f} s so far)", file=sys.stderr, flush=True)
    except BaseException:
        if abort is not None:
            abort()
        raise
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
