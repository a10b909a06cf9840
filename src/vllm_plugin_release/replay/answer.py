"""The replay job's answer (inenv/replay.py's result), each part `model.py` reads checked
once here, so a garbled answer is a JobFailed naming the key; columns kept as written."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

from vllm_plugin_release.core import jobanswer

JOB = "replay"
# Per-step columns every side that ran writes (start and end are clock times; the rest
# counts); PER_STEP_MORE may be absent (older answers).
CLOCK = ("start", "end")
PER_STEP = ("prefill_tokens", "decode_tokens", "prefill_requests", "decode_requests", "preemptions")
PER_STEP_MORE = ("partial_prefills", "prefill_pending")


class SideAnswer(NamedTuple):
    """One scheduler's replay: which scheduler, policy and settings (quoted as written), and
    what it did or why it crashed."""

    label: str
    scheduler: str | None
    scheduler_class: str | None
    policy: dict[str, Any] | None  # the policy asked for and what it changed (quoted)
    settings_requested: dict[str, Any] | None  # the scheduler's settings (quoted)
    settings_effective: dict[str, Any] | None
    crashed: str | None
    traceback: list[str]
    steps: dict[str, list[float]]  # column name -> one value per step (a count, a time)
    tokens: list[list[int]]  # per request: [first step, gap, count, ...] (run-length)
    rejected: list[dict[str, Any]]  # [{index, ...}] as written
    unfinished: int
    one_token_prompt_chunks: int  # final prompt chunks of one token
    stopped: str | None
    timing: dict[str, float] | None


@dataclass(frozen=True)
class ReplayAnswer:
    """inenv/replay.py's result: each scheduler's side by label, in the request's order."""

    vllm_version: str | None
    import_s: float | None
    results: dict[str, SideAnswer]
    per_request_path: list[str | None] | None  # the slow path each request took (marks)
    paths_error: str | None  # why the marks could not be made

    @property
    def marked(self) -> bool:
        return self.per_request_path is not None or self.paths_error is not None


def parse_answer(answer: Any, labels: tuple[str, ...], requests: int | None = None) -> ReplayAnswer:
    """The answer to a request of the schedulers `labels` (and of `requests` requests,
    when given); JobFailed naming the key that is not what inenv/replay.py writes."""
    data = _table(answer, "(the answer)")
    results = _table(data.get("results"), "results")
    sides = {label: _side(results.get(label), label, requests) for label in labels}
    paths = data.get("paths")
    per_request, error = None, None
    if paths:
        paths = _table(paths, "paths")
        if "error" in paths:
            error = str(paths["error"])
        else:
            per_request = paths.get("per_request") or []
            if not isinstance(per_request, list) or not all(
                p is None or isinstance(p, str) for p in per_request
            ):
                raise jobanswer.problem(JOB, "paths.per_request", per_request, "a list of names")
    return ReplayAnswer(
        jobanswer.optional_text(data.get("vllm_version"), JOB, "vllm_version"),
        jobanswer.optional_number(data.get("import_s"), JOB, "import_s"),
        sides,
        per_request,
        error,
    )


def _table(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise jobanswer.problem(JOB, key, value, "an object")
    return value


def _optional_table(value: object, key: str) -> dict[str, Any] | None:
    return None if value is None else _table(value, key)


# The error for a value of the answer that is not what it should be (key, value, wanted).
answer_problem = functools.partial(jobanswer.problem, JOB)


def _side(value: object, label: str, requests: int | None) -> SideAnswer:
    key = f"results.{label}"
    side = _table(value, key)
    crashed = jobanswer.optional_text(side.get("crashed"), JOB, f"{key}.crashed")
    ran = crashed is None
    return SideAnswer(
        label,
        jobanswer.optional_text(side.get("scheduler"), JOB, f"{key}.scheduler"),
        jobanswer.optional_text(side.get("scheduler_class"), JOB, f"{key}.scheduler_class"),
        _optional_table(side.get("policy"), f"{key}.policy"),
        _optional_table(side.get("settings_requested"), f"{key}.settings_requested"),
        _optional_table(side.get("settings_effective"), f"{key}.settings_effective"),
        crashed,
        jobanswer.texts(side.get("traceback", []), JOB, f"{key}.traceback"),
        _steps(side.get("steps"), f"{key}.steps") if ran else {},
        _tokens(side.get("tokens"), f"{key}.tokens", requests) if ran else [],
        _rejected(side.get("rejected", []), f"{key}.rejected"),
        jobanswer.count(side.get("unfinished", 0), JOB, f"{key}.unfinished"),
        jobanswer.count(
            side.get("one_token_prompt_chunks", 0), JOB, f"{key}.one_token_prompt_chunks"
        ),
        jobanswer.optional_text(side.get("stopped"), JOB, f"{key}.stopped"),
        _timing(side.get("timing"), f"{key}.timing"),
    )


def _column(value: object, key: str) -> list[float]:
    if not isinstance(value, list):
        raise jobanswer.problem(JOB, key, value, "a list, one value a step")
    return value


def _steps(value: object, key: str) -> dict[str, list[float]]:
    steps = _table(value, key)
    out = {name: _column(steps.get(name), f"{key}.{name}") for name in (*CLOCK, *PER_STEP)}
    out.update((n, _column(steps[n], f"{key}.{n}")) for n in PER_STEP_MORE if n in steps)
    count = len(out["start"])
    for name, column in out.items():
        if len(column) != count:
            raise jobanswer.problem(JOB, f"{key}.{name}", column, f"{count} values, one a step")
    return out


def _tokens(value: object, key: str, requests: int | None) -> list[list[int]]:
    """Per request, the run-length steps of its tokens: [first, gap, count, ...]."""
    if not isinstance(value, list) or (requests is not None and len(value) != requests):
        wanted = f"a list of {requests} requests" if requests is not None else "a list"
        raise jobanswer.problem(JOB, key, value, wanted)
    for i, encoded in enumerate(value):
        if not isinstance(encoded, list):
            raise jobanswer.problem(JOB, f"{key}[{i}]", encoded, "a list of step numbers")
    return value


def _rejected(value: object, key: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise jobanswer.problem(JOB, key, value, "a list of rejected requests")
    for i, item in enumerate(value):
        jobanswer.count(_table(item, f"{key}[{i}]").get("index"), JOB, f"{key}[{i}].index")
    return value


def _timing(value: object, key: str) -> dict[str, float] | None:
    if not value:
        return None
    timing = _table(value, key)
    for name in ("scheduler_s", "loop_wall_s", *timing):
        if jobanswer.optional_number(timing.get(name), JOB, f"{key}.{name}") is None:
            raise jobanswer.problem(JOB, f"{key}.{name}", None, "a number")
    return timing
