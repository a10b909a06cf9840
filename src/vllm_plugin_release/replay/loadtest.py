"""Live mixed-load test: the spec's request mix streamed against a running OpenAI-compatible
server, time to first token and inter-token gaps measured per request, bounded."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges.http_stream import (
    Client,
    CompletionBody,
    EndpointFailure,
    connect,
)
from vllm_plugin_release.replay.mix import RequestMix

# A token id every tokenizer has; a prompt of N of them is N tokens long.
PROMPT_TOKEN_ID = 100


@dataclass
class RequestRecord:
    index: int
    arrival_s: float  # planned send time, from the start of the run
    prompt_tokens: int
    max_tokens: int
    sent_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    status: int | None = None
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        if self.first_token_s is None or self.sent_s is None:
            return None
        return self.first_token_s - self.sent_s

    def itls(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.chunk_times_s)]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["chunk_times_s"] = [round(t, 6) for t in self.chunk_times_s]
        for key in ("sent_s", "first_token_s", "done_s"):
            if data[key] is not None:
                data[key] = round(data[key], 6)
        data["ttft_s"] = None if self.ttft is None else round(self.ttft, 6)
        return data


@dataclass
class LoadOptions:
    model: str | None = None
    max_requests: int = 200
    duration_s: float = 300.0
    request_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    prompt_mode: str = "tokens"  # "tokens" (token-id array) or "text"
    vllm_extras: bool = True
    time_scale: float = 1.0  # arrival times are multiplied by this


def parse_metrics(text: str) -> dict[str, float]:
    """`name{labels}` -> value for every sample line of a Prometheus text exposition."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "}" in line:
            key, _, rest = line.rpartition("}")
            key += "}"
        else:
            key, _, rest = line.partition(" ")
        parts = rest.split()
        if not parts:
            continue
        try:
            samples[key.strip()] = float(parts[0])
        except ValueError:
            continue
    return samples


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Change of every counter-like sample (…_total, …_sum, …_count, …_bucket)."""
    out = {}
    for key, value in after.items():
        name = key.split("{", 1)[0]
        if name.endswith(("_total", "_sum", "_count", "_bucket")) and key in before:
            change = value - before[key]
            if change:
                out[key] = round(change, 6)
    return out


def _base(endpoint: str) -> str:
    base = endpoint.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    if not base.startswith(("http://", "https://")):
        raise BadInput(f"--endpoint {endpoint!r}: expected http://HOST:PORT")
    return base


async def _get_metrics(client: Client, base: str) -> dict[str, Any]:
    answer = await client.get(f"{base}/metrics")
    if answer.status != 200:
        return {"available": False, "reason": f"HTTP {answer.status}"}
    return {"available": True, "samples": parse_metrics(answer.text)}


async def _model_name(client: Client, base: str) -> str:
    answer = await client.get(f"{base}/v1/models")
    try:
        return str(answer.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise EndpointFailure(
            f"GET {base}/v1/models: HTTP {answer.status}, no model listed; pass --model NAME"
        ) from None


def _body(record: RequestRecord, model: str, options: LoadOptions) -> CompletionBody:
    prompt: str | list[int]
    if options.prompt_mode == "text":
        prompt = " ".join(["hello"] * record.prompt_tokens)
    else:
        prompt = [PROMPT_TOKEN_ID] * record.prompt_tokens
    body: CompletionBody = {
        "model": model,
        "prompt": prompt,
        "max_tokens": record.max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.vllm_extras:
        body["ignore_eos"] = True
        body["min_tokens"] = record.max_tokens
    return body


async def _send(
    client: Client, base: str, model: str, record: RequestRecord, t0: float, options: LoadOptions
) -> None:
    delay = t0 + record.arrival_s - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    clock = time.perf_counter
    record.sent_s = clock() - t0
    usage_tokens = None
    try:
        async with client.stream_post(
            f"{base}/v1/completions", _body(record, model, options), f"request {record.index}"
        ) as resp:
            record.status = resp.status
            if resp.status != 200:
                text = (await resp.read()).decode("utf-8", "replace")
                record.error = f"HTTP {resp.status}: {text[:300]}"
                record.done_s = clock() - t0
                return
            async for line in resp.lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = clock() - t0
                try:
                    event = json.loads(data)
                except json.JSONDecodeError:
                    record.error = f"malformed stream event: {data[:120]!r}"
                    continue
                usage = event.get("usage")
                if usage and usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
                choices = event.get("choices") or []
                if choices and (choices[0].get("text") or choices[0].get("token_ids")):
                    if record.first_token_s is None:
                        record.first_token_s = now
                    record.chunk_times_s.append(now)
    except EndpointFailure as exc:
        record.error = str(exc)
        record.done_s = clock() - t0
        raise EndpointFailure(record.error) from None
    record.done_s = clock() - t0
    chunks = len(record.chunk_times_s)
    record.output_tokens = usage_tokens if usage_tokens is not None else chunks


def _plan(mix: RequestMix, options: LoadOptions) -> list[RequestRecord]:
    """One record per request to send, its arrival scaled by `time_scale`."""
    return [
        RequestRecord(
            index=index,
            arrival_s=mix.arrival[index] * options.time_scale,
            prompt_tokens=mix.prompt[index],
            max_tokens=mix.output[index],
        )
        for index in range(min(len(mix), options.max_requests))
    ]


async def _await_requests(
    tasks: list[asyncio.Future[None]], t0: float, options: LoadOptions
) -> str | None:
    """Wait for the requests within the time bound; what stopped the run early, if anything."""
    failure: str | None = None
    deadline = t0 + options.duration_s
    pending = set(tasks)
    while pending:
        left = deadline - time.perf_counter()
        if left <= 0:
            failure = f"the run exceeded its time bound of {options.duration_s:g} s"
            break
        done, pending = await asyncio.wait(
            pending, timeout=left, return_when=asyncio.FIRST_EXCEPTION
        )
        for task in done:
            exc = task.exception()
            if isinstance(exc, EndpointFailure):
                failure = str(exc)
            elif isinstance(exc, asyncio.TimeoutError):
                failure = f"a request got no complete answer within {options.request_timeout_s:g} s"
            elif exc is not None:
                failure = f"{type(exc).__name__}: {exc}"
        if failure:
            break
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return failure


async def _run(
    base: str,
    mix: RequestMix,
    options: LoadOptions,
    records: list[RequestRecord],
    state: dict[str, Any],
) -> None:
    async with connect(
        connect_timeout_s=options.connect_timeout_s, request_timeout_s=options.request_timeout_s
    ) as client:
        state["metrics_before"] = await _get_metrics(client, base)
        model = options.model or await _model_name(client, base)
        state["model"] = model
        t0 = time.perf_counter()
        state["started"] = time.time()
        records.extend(_plan(mix, options))
        tasks = [
            asyncio.ensure_future(
                asyncio.wait_for(
                    _send(client, base, model, r, t0, options),
                    timeout=r.arrival_s + options.request_timeout_s,
                )
            )
            for r in records
        ]
        failure = await _await_requests(tasks, t0, options)
        for r in records:
            if r.sent_s is not None and r.done_s is None:
                r.error = r.error or "cancelled: the run stopped before this request finished"
        state["wall_s"] = time.perf_counter() - t0
        if failure:
            state["failure"] = failure
        try:
            state["metrics_after"] = await _get_metrics(client, base)
        except EndpointFailure as exc:
            state["metrics_after"] = {"available": False, "reason": str(exc)}


class Stats(NamedTuple):
    """Percentiles, mean and maximum of a latency series, in seconds (None: no values)."""

    p50: float | None
    p99: float | None
    mean: float | None
    max: float | None


class RequestCounts(NamedTuple):
    planned: int
    sent: int
    completed: int
    errors: int
    fewer_tokens_than_requested: int


class LoadSummaryJson(TypedDict):
    requests: dict[str, int]
    ttft_s: dict[str, float | None]
    itl_s: dict[str, float | None]
    output_tokens: int
    output_tokens_per_s: float | None


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """What a load test measured (loadtest.json's `summary`)."""

    requests: RequestCounts
    ttft_s: Stats
    itl_s: Stats
    output_tokens: int
    output_tokens_per_s: float | None

    def to_json(self) -> LoadSummaryJson:
        return {
            "requests": self.requests._asdict(),
            "ttft_s": self.ttft_s._asdict(),
            "itl_s": self.itl_s._asdict(),
            "output_tokens": self.output_tokens,
            "output_tokens_per_s": self.output_tokens_per_s,
        }


@dataclass(frozen=True, slots=True)
class LoadResult:
    """A load test's outcome, typed; `raw` is loadtest.json's object, only to serialise it."""

    endpoint: str
    model: str | None
    wall_s: float
    error: str | None  # None: complete
    summary: LoadSummary
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.raw


def _stats(values: list[float]) -> Stats:
    if not values:
        return Stats(None, None, None, None)
    ordered = sorted(values)

    def pct(q: float) -> float:
        pos = (len(ordered) - 1) * q
        low, high = math.floor(pos), math.ceil(pos)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return Stats(
        round(pct(0.5), 6),
        round(pct(0.99), 6),
        round(sum(ordered) / len(ordered), 6),
        round(ordered[-1], 6),
    )


def summarize(records: list[RequestRecord]) -> LoadSummary:
    sent = [r for r in records if r.sent_s is not None]
    ok = [r for r in sent if r.error is None and r.done_s is not None]
    ttfts = [r.ttft for r in sent if r.ttft is not None]
    itls = [gap for r in sent for gap in r.itls()]
    tokens = sum(r.output_tokens or len(r.chunk_times_s) for r in sent)
    first = min((r.sent_s for r in sent), default=0.0) or 0.0
    last = max((r.chunk_times_s[-1] for r in sent if r.chunk_times_s), default=first)
    span = last - first
    return LoadSummary(
        RequestCounts(
            planned=len(records),
            sent=len(sent),
            completed=len(ok),
            errors=len([r for r in sent if r.error]),
            fewer_tokens_than_requested=sum(r.output_tokens < r.max_tokens for r in ok),
        ),
        _stats(ttfts),
        _stats(itls),
        tokens,
        round(tokens / span, 3) if span > 0 else None,
    )


def run(
    endpoint: str,
    mix: RequestMix,
    options: LoadOptions,
    *,
    out: Path | None = None,
) -> LoadResult:
    """Run the load test; write `out` (always, also on failure); OutsideFailure on failure."""
    if options.max_requests < 1 or options.duration_s <= 0 or options.request_timeout_s <= 0:
        raise BadInput("--max-requests, --duration and --request-timeout must be positive")
    if options.prompt_mode not in ("tokens", "text"):
        raise BadInput(f"--prompt-mode {options.prompt_mode!r}: expected tokens or text")
    base = _base(endpoint)
    records: list[RequestRecord] = []
    state: dict[str, Any] = {}
    error: str | None = None
    try:
        asyncio.run(_run(base, mix, options, records, state))
    except EndpointFailure as exc:
        error = str(exc)
    error = error or state.get("failure")
    before = state.get("metrics_before") or {"available": False, "reason": "not reached"}
    after = state.get("metrics_after") or {"available": False, "reason": "not reached"}
    metrics: dict[str, Any] = {"before": before, "after": after}
    if before.get("available") and after.get("available"):
        metrics["delta"] = metrics_delta(before["samples"], after["samples"])
    summary = summarize(records)
    if not error and summary.requests.errors:
        error = f"{summary.requests.errors} of {summary.requests.sent} requests failed"
    result = {
        "schema": "vpr-loadtest/1",
        "endpoint": base,
        "model": state.get("model", options.model),
        "mix": mix.summary(),
        "options": asdict(options),
        "started_unix": state.get("started"),
        "wall_s": round(state.get("wall_s", 0.0), 3),
        "complete": error is None,
        "error": error,
        "summary": summary.to_json(),
        "metrics": metrics,
        "requests": [r.to_json() for r in records],
    }
    if out is not None:
        from vllm_plugin_release.core.cache import atomic_write_text

        atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    if error:
        kept = f"; what was measured so far is in {out}" if out else ""
        raise OutsideFailure(
            f"load test against {base} stopped: {error}{kept}",
            hint="check that the server is up and answers /v1/completions with stream=true",
        )
    return LoadResult(base, result["model"], result["wall_s"], error, summary, result)
