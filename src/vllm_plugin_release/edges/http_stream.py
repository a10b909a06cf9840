"""An HTTP client for a live OpenAI-compatible server (httpx), GETs and streamed POSTs for
the load test; every transport error is an `EndpointFailure` naming what was being done."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypedDict

import httpx


class EndpointFailure(Exception):
    """The endpoint refused, reset or timed out: stop the run."""


def _failure(exc: Exception, what: str) -> EndpointFailure:
    if isinstance(exc, httpx.TimeoutException):
        return EndpointFailure(f"{what}: timed out ({type(exc).__name__})")
    return EndpointFailure(f"{what}: {type(exc).__name__}: {exc}")


class StreamOptions(TypedDict):
    include_usage: bool


class _Completion(TypedDict):
    model: str
    prompt: str | list[int]  # text, or token ids
    max_tokens: int
    temperature: float
    stream: bool
    stream_options: StreamOptions


class CompletionBody(_Completion, total=False):
    """A streamed `/v1/completions` request, as JSON (the keys in the order sent); these
    two are vLLM's own (exactly `max_tokens` tokens), left out for other servers."""

    ignore_eos: bool
    min_tokens: int


@dataclass
class Answer:
    status: int
    text: str

    def json(self) -> Any:
        import json

        return json.loads(self.text)


class Stream:
    """A streamed response: its status, then its body (`read`) or its lines (`lines`)."""

    def __init__(self, response: httpx.Response, what: str) -> None:
        self._response = response
        self._what = what
        self.status = response.status_code

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx.HTTPError as exc:
            raise _failure(exc, self._what) from None

    async def lines(self) -> AsyncIterator[str]:
        try:
            async for line in self._response.aiter_lines():
                yield line
        except httpx.HTTPError as exc:
            raise _failure(exc, self._what) from None


class Client:
    def __init__(self, inner: httpx.AsyncClient) -> None:
        self._inner = inner

    async def get(self, url: str) -> Answer:
        try:
            response = await self._inner.get(url)
        except httpx.HTTPError as exc:
            raise _failure(exc, f"GET {url}") from None
        return Answer(response.status_code, response.text)

    @contextlib.asynccontextmanager
    async def stream_post(self, url: str, body: CompletionBody, what: str) -> AsyncIterator[Stream]:
        try:
            async with self._inner.stream("POST", url, json=body) as response:
                yield Stream(response, what)
        except httpx.HTTPError as exc:
            raise _failure(exc, what) from None


@contextlib.asynccontextmanager
async def connect(*, connect_timeout_s: float, request_timeout_s: float) -> AsyncIterator[Client]:
    """A client with bounded timeouts, unlimited connections, no proxy from the environment."""
    timeout = httpx.Timeout(
        connect=connect_timeout_s,
        read=request_timeout_s,
        write=request_timeout_s,
        pool=request_timeout_s,
    )
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as inner:
        yield Client(inner)
