"""Waiting on the network says so: a heartbeat line while an index keeps us waiting,
and an error that names the URL and how long we waited.

`VPR_NET_TIMEOUT` (seconds, default 60) bounds the wait for an answer;
`VPR_NET_HEARTBEAT` (seconds, default 15) is the interval of the waiting lines.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from vllm_plugin_release.edges import settings

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
    """`what()` (a blocking request to `url`), with a waiting line every heartbeat and
    `NoAnswer` once the timeout (`limit`, else VPR_NET_TIMEOUT) has passed. Exceptions of
    `what` pass through; when the wait is given up (timeout, Ctrl-C, SIGTERM) `abort`
    unblocks the abandoned call."""
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
