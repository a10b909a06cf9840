"""The replay's models: its answer from the pairing environment (each part read checked
once: a JobFailed naming the key), the per-step cost model and its fit, and the metrics of a
replay (step composition, TTFT, inter-token latency, stalls, throughput)."""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core import jobanswer
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay.mix import RequestMix, csv_rows

JOB = "replay"
# Per-step columns every side that ran writes (start and end are clock times; the rest
# counts); PER_STEP_MORE may be absent (older answers).
CLOCK = ("start", "end")
PER_STEP = ("prefill_tokens", "decode_tokens", "prefill_requests", "decode_requests", "preemptions")
PER_STEP_MORE = ("partial_prefills", "prefill_pending")


class SideAnswer(NamedTuple):
    """One scheduler's replay: what ran (quoted as written) and what it did, or its crash."""

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
    """The answer for the schedulers `labels`; JobFailed naming a key not as written."""
    data = _object(answer, "(the answer)")
    results = _object(data.get("results"), "results")
    sides = {label: _side(results.get(label), label, requests) for label in labels}
    paths = data.get("paths")
    per_request, error = None, None
    if paths:
        paths = _object(paths, "paths")
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


def _object(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise jobanswer.problem(JOB, key, value, "an object")
    return value


def _optional_object(value: object, key: str) -> dict[str, Any] | None:
    return None if value is None else _object(value, key)


# The error for a value of the answer that is not what it should be (key, value, wanted).
answer_problem = functools.partial(jobanswer.problem, JOB)


def _side(value: object, label: str, requests: int | None) -> SideAnswer:
    key = f"results.{label}"
    side = _object(value, key)
    crashed = jobanswer.optional_text(side.get("crashed"), JOB, f"{key}.crashed")
    ran = crashed is None
    return SideAnswer(
        label,
        jobanswer.optional_text(side.get("scheduler"), JOB, f"{key}.scheduler"),
        jobanswer.optional_text(side.get("scheduler_class"), JOB, f"{key}.scheduler_class"),
        _optional_object(side.get("policy"), f"{key}.policy"),
        _optional_object(side.get("settings_requested"), f"{key}.settings_requested"),
        _optional_object(side.get("settings_effective"), f"{key}.settings_effective"),
        crashed,
        jobanswer.texts(side.get("traceback", []), JOB, f"{key}.traceback"),
        _steps(side.get("steps"), f"{key}.steps") if ran else {},
        _token_runs(side.get("tokens"), f"{key}.tokens", requests) if ran else [],
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
    steps = _object(value, key)
    out = {name: _column(steps.get(name), f"{key}.{name}") for name in (*CLOCK, *PER_STEP)}
    out.update((n, _column(steps[n], f"{key}.{n}")) for n in PER_STEP_MORE if n in steps)
    count = len(out["start"])
    for name, column in out.items():
        if len(column) != count:
            raise jobanswer.problem(JOB, f"{key}.{name}", column, f"{count} values, one a step")
    return out


def _token_runs(value: object, key: str, requests: int | None) -> list[list[int]]:
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
        jobanswer.count(_object(item, f"{key}[{i}]").get("index"), JOB, f"{key}[{i}].index")
    return value


def _timing(value: object, key: str) -> dict[str, float] | None:
    if not value:
        return None
    timing = _object(value, key)
    for name in ("scheduler_s", "loop_wall_s", *timing):
        if jobanswer.optional_number(timing.get(name), JOB, f"{key}.{name}") is None:
            raise jobanswer.problem(JOB, f"{key}.{name}", None, "a number")
    return timing


@dataclass(frozen=True)
class CostModel:
    """t_step = a + b * prefill_tokens + c * decode_requests (seconds), plus d_P for each
    request sampled on slow path P in the step."""

    a: float
    b: float
    c: float
    source: str = "default (illustrative, not measured)"
    # Seconds per request that takes slow path NAME in a step (its token sampled there).
    paths: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


PATH_COLUMN = "path:"  # a calibration column `path:NAME`: requests on slow path NAME


def read_calibration(path: Path) -> tuple[list[tuple[float, ...]], list[str]]:
    """(prefill_tokens, decode_requests, seconds, *path counts) rows from a CSV with a
    header, and the slow paths it measures (its `path:NAME` columns, in header order)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read calibration file: {exc.strerror or exc}") from None
    reader = csv.reader(lines)
    header = [h.strip() for h in next(reader, [])]
    wanted: tuple[str, ...] = ("prefill_tokens", "decode_requests", "seconds")
    if any(c not in header for c in wanted):
        raise BadInput(f"{path}:1: header must name {','.join(wanted)}")
    paths = [h[len(PATH_COLUMN) :] for h in header if h.startswith(PATH_COLUMN)]
    paths = [name for name in paths if name]
    wanted += tuple(PATH_COLUMN + name for name in paths)
    rows = []
    for number, record in csv_rows(path, reader, header):
        try:
            row = tuple(float(record[c]) for c in wanted)
        except ValueError:
            raise BadInput(f"{path}:{number}: {','.join(wanted)} must be numbers") from None
        if any(not math.isfinite(v) or v < 0 for v in row):
            raise BadInput(f"{path}:{number}: values must be finite and >= 0")
        rows.append(row)
    if len(rows) < 3:
        raise BadInput(f"{path}: need at least 3 measured steps to fit a, b and c")
    return rows, paths  # type: ignore[return-value]


def fit_cost_model(
    rows: Sequence[tuple[float, ...]], *, source: str = "fitted", paths: Sequence[str] = ()
) -> CostModel:
    """Least-squares fit of t = a + b*prefill_tokens + c*decode_requests (+ d_P * requests
    on each slow path P: the rows' columns after the third), clipped at 0."""
    import numpy as np

    data = np.asarray(rows, dtype=float)
    extra = [data[:, 3 + i] for i in range(len(paths))]
    design = np.column_stack([np.ones(len(data)), data[:, 0], data[:, 1], *extra])
    coef, *_ = np.linalg.lstsq(design, data[:, 2], rcond=None)
    if np.linalg.matrix_rank(design) < 3 + len(paths):
        raise BadInput(
            f"cost model calibration ({source}): the measured steps do not vary enough in "
            "prefill tokens, decode requests"
            + (" and requests per slow path" if paths else "")
            + " to separate the terms",
            hint="measure prefill-only and decode-only steps of several sizes"
            + (", with and without requests on each slow path" if paths else ""),
        )
    a, b, c, *d = (max(0.0, float(x)) for x in coef)
    return CostModel(a, b, c, source=source, paths=dict(zip(paths, d)))


# Figures compared as plugin / upstream.
RATIO_KEYS = (
    ("ttft_p50_s", ("ttft_s", "p50")),
    ("ttft_p99_s", ("ttft_s", "p99")),
    ("itl_p50_s", ("itl_s", "p50")),
    ("itl_mean_s", ("itl_s", "mean")),
    ("itl_p99_s", ("itl_s", "p99")),
    ("itl_max_s", ("itl_s", "max")),
    ("longest_decode_stall_steps", ("longest_decode_stall_steps",)),
    ("output_tokens_per_s", ("output_tokens_per_s",)),
    ("steps", ("steps",)),
)


def _percentiles(values: Any) -> dict[str, float | None]:
    import numpy as np

    if len(values) == 0:
        return {"p50": None, "p99": None, "mean": None, "max": None}
    arr = np.asarray(values, dtype=float)
    p50, p99 = np.percentile(arr, [50, 99])
    return {"p50": _r(p50), "p99": _r(p99), "max": _r(arr.max()), "mean": _r(arr.mean())}


def _r(value: float) -> float:
    """Rounded for a stable, readable JSON (microsecond resolution)."""
    return round(float(value), 6)


@dataclass
class Analysis:
    """Summary for replay.json plus the arrays the plots need."""

    summary: dict[str, Any]
    step_start: Any
    step_end: Any
    prefill_tokens: Any
    decode_tokens: Any
    mixed: Any
    itl: Any
    ttft: Any


def expand_tokens(encoded: Sequence[int]) -> Any:
    """[first, gap, count, ...] -> array of step indices at which tokens were emitted."""
    import numpy as np

    if not encoded:
        return np.zeros(0, dtype=np.int64)
    gaps = np.asarray(encoded[1::2], dtype=np.int64)
    counts = np.asarray(encoded[2::2], dtype=np.int64)
    steps = np.empty(1 + int(counts.sum()), dtype=np.int64)
    steps[0] = encoded[0]
    if len(steps) > 1:
        np.cumsum(np.repeat(gaps, counts), out=steps[1:])
        steps[1:] += encoded[0]
    return steps


# The array type of each per-step column that is not a count.
_NOT_COUNTS = {"start": float, "end": float, "prefill_pending": bool}


def _columns(side: SideAnswer) -> dict[str, Any]:
    """The per-step columns of a side as arrays, each checked to hold one number a step."""
    import numpy as np

    zeros = [0] * len(side.steps["start"])  # a column an older answer lacks
    out = {}
    for name in (*CLOCK, *PER_STEP, *PER_STEP_MORE):
        dtype = _NOT_COUNTS.get(name, "int64")
        values, where = side.steps.get(name, zeros), f"results.{side.label}.steps.{name}"
        try:
            out[name] = np.asarray(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise answer_problem(where, values, f"numbers ({exc})")
        if out[name].shape != (len(zeros),):
            raise answer_problem(where, values, f"{len(zeros)} numbers, one a step")
    return out


def _composition(steps: dict[str, Any], side: SideAnswer) -> tuple[dict[str, Any], Any]:
    """What the steps held (summary figures), and which steps mixed prefill with decode."""
    import numpy as np

    has_pf, has_dec = steps["prefill_requests"] > 0, steps["decode_requests"] > 0
    mixed = has_pf & has_dec
    count = len(steps["start"])
    figures = {
        "steps": count,
        "mixed_steps": int(mixed.sum()),
        # The share of steps that mixed prefill with decode work (0 with no steps).
        "mixed_step_share": _r(mixed.sum() / count) if count else 0.0,
        "prefill_only_steps": int((has_pf & ~has_dec).sum()),
        "decode_only_steps": int((has_dec & ~has_pf).sum()),
        "empty_steps": int((~has_pf & ~has_dec).sum()),
        "first_mixed_step": int(np.argmax(mixed)) if mixed.any() else None,
        # Steps holding a prefill chunk that did not finish its prompt.
        "chunked_prefill_steps": int((steps["partial_prefills"] > 0).sum()),
        # Steps with decode work while prefill work was pending before the step (requests
        # waiting for admission, or a prompt part-way prefilled): decodes run between
        # prefill work instead of waiting for it to drain.
        "interleaved_decode_steps": int((has_dec & steps["prefill_pending"]).sum()),
        "preemptions": int(steps["preemptions"].sum()),
        # Final prompt chunks of one token: counted as prefill, not decode (see inenv).
        "one_token_prompt_chunks": side.one_token_prompt_chunks,
        "prefill_tokens": int(steps["prefill_tokens"].sum()),
        "decode_tokens": int(steps["decode_tokens"].sum()),
    }
    return figures, mixed


@dataclass
class _Tokens:
    """Per-request token figures over the replay's token timelines."""

    ttft: Any
    itl: Any
    produced: int
    completed: int
    capped: int
    longest_stall: int
    stall_request: int | None
    last_token_time: float


def _tokens(
    side: SideAnswer, mix: RequestMix, end: Any, arrival: Any, rejected: set[int]
) -> _Tokens:
    """TTFT, inter-token latencies and request outcomes from the encoded token steps."""
    import numpy as np

    ttft: list[float] = []
    itl_parts = []
    longest_stall = 0
    stall_request = None
    produced = 0
    completed = capped = 0
    last_token_time = 0.0
    for index, encoded in enumerate(side.tokens):
        if index in rejected or not encoded:
            continue
        try:
            token_steps = expand_tokens(encoded)
            times = end[token_steps]
        except (TypeError, ValueError, IndexError, OverflowError) as exc:
            wanted = f"[first step, gap, count, ...] within {len(end)} steps ({exc})"
            raise answer_problem(f"results.{side.label}.tokens[{index}]", encoded, wanted)
        produced += len(token_steps)
        ttft.append(times[0] - arrival[index])
        last_token_time = max(last_token_time, float(times[-1]))
        if len(token_steps) > 1:
            itl_parts.append(np.diff(times))
            gap = int(max(encoded[1::2])) - 1
            if gap > longest_stall:
                longest_stall, stall_request = gap, index
        if len(token_steps) >= mix.output[index]:
            completed += 1
        else:
            capped += 1
    itl = np.concatenate(itl_parts) if itl_parts else np.zeros(0)
    ttft_arr = np.asarray(ttft, dtype=float)
    return _Tokens(
        ttft_arr, itl, produced, completed, capped, longest_stall, stall_request, last_token_time
    )


def _identity(side: SideAnswer) -> dict[str, Any]:
    """Which scheduler ran, under which policy and settings."""
    return {
        "scheduler": side.scheduler,
        "scheduler_class": side.scheduler_class,
        "policy": side.policy,
        "settings_requested": side.settings_requested,
        "settings_effective": side.settings_effective,
    }


def analyze(side: SideAnswer, mix: RequestMix) -> Analysis:
    """Metrics for one scheduler's replay."""
    import numpy as np

    steps = _columns(side)
    composition, mixed = _composition(steps, side)
    rejected = {r["index"] for r in side.rejected}
    arrival = np.asarray(mix.arrival, dtype=float)
    tokens = _tokens(side, mix, steps["end"], arrival, rejected)
    unfinished = side.unfinished
    capped = tokens.capped
    if side.stopped:
        # Requests cut off by the stop are not "capped": they never got the chance.
        capped = max(0, capped - unfinished)
    first_arrival = float(arrival.min()) if len(arrival) else 0.0
    makespan = max(0.0, tokens.last_token_time - first_arrival)
    summary: dict[str, Any] = {
        **_identity(side),
        **composition,
        "requests": {
            "total": len(mix),
            "completed": tokens.completed,
            "rejected": len(rejected),
            "length_capped": capped,
            "unfinished": unfinished,
        },
        "rejected": side.rejected,
        "output_tokens": tokens.produced,
        "ttft_s": _percentiles(tokens.ttft),
        "itl_s": _percentiles(tokens.itl),
        "longest_decode_stall_steps": tokens.longest_stall,
        "longest_decode_stall_request": tokens.stall_request,
        "output_tokens_per_s": _r(tokens.produced / makespan) if makespan > 0 else None,
        "makespan_s": _r(makespan),
        "stopped": side.stopped,
    }
    return Analysis(
        summary,
        steps["start"],
        steps["end"],
        steps["prefill_tokens"],
        steps["decode_tokens"],
        mixed,
        tokens.itl,
        tokens.ttft,
    )


def _dig(summary: dict[str, Any], path: Sequence[str]) -> Any:
    node: Any = summary
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def ratios(plugin: dict[str, Any], upstream: dict[str, Any]) -> dict[str, float | None]:
    """plugin / upstream for the headline figures (None where undefined)."""
    out: dict[str, float | None] = {}
    for name, path in RATIO_KEYS:
        p, u = _dig(plugin, path), _dig(upstream, path)
        out[name] = round(p / u, 4) if isinstance(p, (int, float)) and u else None
    return out


def crashed_summary(side: SideAnswer, mix: RequestMix) -> dict[str, Any]:
    """The summary of a scheduler that crashed: no figures, the failure said."""
    steps = ("steps", "mixed_steps", "mixed_step_share", "prefill_only_steps")
    return {
        **_identity(side),
        "crashed": side.crashed,
        "traceback": side.traceback,
        **dict.fromkeys((*steps, "decode_only_steps", "empty_steps")),
        "requests": {"total": len(mix)},
        **dict.fromkeys(("ttft_s", "itl_s", "longest_decode_stall_steps", "output_tokens_per_s")),
    }


def build_report(
    answer: ReplayAnswer,
    mix: RequestMix,
    *,
    name: str,
    replay_config: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Analysis]]:
    """replay.json content (deterministic for a given mix and environment) + analyses."""
    analyses: dict[str, Analysis] = {}
    sides: dict[str, dict[str, Any]] = {}
    for label in ("plugin", "upstream"):
        side = answer.results[label]
        if side.crashed is not None:
            sides[label] = crashed_summary(side, mix)
        else:
            analyses[label] = analyze(side, mix)
            sides[label] = analyses[label].summary
    report = {
        "schema": "vpr-replay/1",
        "name": name,
        "vllm_version": answer.vllm_version,
        "mix": mix.summary(),
        "config": replay_config,
        "plugin": sides["plugin"],
        "upstream": sides["upstream"],
        "ratios": ratios(sides["plugin"], sides["upstream"]),
    }
    marks = path_marks(answer, replay_config.get("slow_paths") or [], mix)
    if marks is not None:
        report["paths"] = marks
    return report, analyses


def path_marks(
    answer: ReplayAnswer, slow_paths: list[dict[str, Any]], mix: RequestMix
) -> dict[str, Any] | None:
    """Which requests took each slow path on the plugin side (the plugin's own predicates,
    asked in the environment), their share of the mix, and the price per sampled token the
    cost model added; None when nothing was marked."""
    if not answer.marked:
        return None
    if answer.paths_error is not None:
        return {"error": answer.paths_error}
    per = answer.per_request_path or []
    total = len(per) or 1
    out: dict[str, Any] = {}
    for path in slow_paths:
        name = path["name"]
        indices = [i for i, taken in enumerate(per) if taken == name]
        out[name] = {
            "instead_of": path.get("instead_of"),
            "requests": len(indices),
            "share": _r(len(indices) / total),
            "indices": indices,
        }
    rest = sum(1 for taken in per if taken is None)
    out["default"] = {"requests": rest, "share": _r(rest / total)}
    return {"per_path": out, "requests": len(mix)}


def timing_report(answer: ReplayAnswer) -> dict[str, Any]:
    """Harness cost against the schedulers' own (not deterministic: kept out of replay.json)."""
    out: dict[str, Any] = {"import_s": answer.import_s}
    total_sched = total_wall = 0.0
    for label, side in answer.results.items():
        timing = side.timing
        if not timing:
            continue
        sched = timing["scheduler_s"]
        wall = timing["loop_wall_s"] + timing.get("encode_s", 0.0)
        total_sched += sched
        total_wall += wall
        out[label] = {
            **{k: round(v, 4) for k, v in timing.items()},
            "steps": len(side.steps["start"]),
            "overhead_ratio": round(wall / sched, 3) if sched else None,
        }
    out["scheduler_s"] = round(total_sched, 4)
    out["replay_wall_s"] = round(total_wall, 4)
    out["overhead_ratio"] = round(total_wall / total_sched, 3) if total_sched else None
    return out


# The headline a reader sees first (scorecard, scheduler check).

_RERUN = "run `vpr replay` again; the record is malformed"
HEADLINE = (
    ("ITL p50", "itl_p50_s"),
    ("ITL p99", "itl_p99_s"),
    ("ITL max", "itl_max_s"),
    ("TTFT p99", "ttft_p99_s"),
    ("throughput", "output_tokens_per_s"),
)


class PathShare(NamedTuple):
    """A path's share of a mix's requests: a slow path, or the rest ("default")."""

    name: str
    requests: int
    share: float | None
    instead_of: str | None = None

    def to_json(self) -> dict[str, str | int | float | None]:
        out: dict[str, str | int | float | None] = {}
        if self.name != "default":
            out["instead_of"] = self.instead_of
        out.update(requests=self.requests, share=self.share)
        return out


@dataclass(frozen=True, slots=True)
class Headline:
    """What a reader sees first of a replay: the plugin / upstream ratios of the HEADLINE
    figures, each side's mixed-step share, and the slow paths' shares (None: not marked).
    Read from replay.json once (`headline`); `to_json` is the scorecard's `replay`."""

    ratios: Mapping[str, float | None]  # per HEADLINE key
    mixed_step_share: Mapping[str, float | None]  # plugin, upstream
    paths: Mapping[str, PathShare] | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ratios": dict(self.ratios),
            "mixed_step_share": dict(self.mixed_step_share),
        }
        if self.paths:
            out["paths"] = {name: mark.to_json() for name, mark in self.paths.items()}
        return out


def _number(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise BadInput(f"{where} is {value!r}, expected a number or null", hint=_RERUN)


def _table(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadInput(f"{where} is {type(value).__name__}, expected an object", hint=_RERUN)
    return value


def path_shares(per_path: object, where: str) -> dict[str, PathShare]:
    """Each path's share, checked: BadInput naming `where` and the key."""
    out = {}
    for name, mark in _table(per_path, where).items():
        at = f"{where}.{name}"
        mark = _table(mark, at)
        requests, instead_of = mark.get("requests"), mark.get("instead_of")
        if not isinstance(requests, int) or isinstance(requests, bool) or requests < 0:
            raise BadInput(f"{at}.requests is {requests!r}, expected a count", hint=_RERUN)
        if instead_of is not None and not isinstance(instead_of, str):
            raise BadInput(f"{at}.instead_of is {instead_of!r}, expected text", hint=_RERUN)
        share = _number(mark.get("share"), f"{at}.share")
        out[name] = PathShare(name, requests, share, instead_of)
    return out


def headline(report: object, where: str | Path = "replay.json") -> Headline:
    """The headline of replay.json's object, checked: BadInput naming `where` and the key."""
    report = _table(report, str(where))
    ratios = _table(report.get("ratios"), f"{where}: ratios")
    per_path = _table(report.get("paths"), f"{where}: paths").get("per_path")
    return Headline(
        {key: _number(ratios.get(key), f"{where}: ratios.{key}") for _, key in HEADLINE},
        {
            side: _number(
                _table(report.get(side), f"{where}: {side}").get("mixed_step_share"),
                f"{where}: {side}.mixed_step_share",
            )
            for side in ("plugin", "upstream")
        },
        path_shares(per_path, f"{where}: paths.per_path") if per_path else None,
    )


def path_sentences(paths: Mapping[str, PathShare]) -> list[str]:
    """`38.0% of requests leave the device sampler for the host sampler`, per slow path."""
    out = []
    for name, mark in paths.items():
        if name == "default":
            continue
        where = (
            f"leave the {mark.instead_of} for the {name}" if mark.instead_of else f"take the {name}"
        )
        out.append(f"{_share(mark.share)} of requests {where}")
    return out


def _times(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "n/a"


def _share(value: Any) -> str:
    return f"{value * 100:.1f}%" if isinstance(value, (int, float)) else "n/a"


def headline_text(h: Headline) -> str:
    """`plugin vs upstream: ITL p50 1.04x, ITL p99 1.17x, ...; mixed steps 0.0% vs 12.3%`."""
    figures = ", ".join(f"{label} {_times(h.ratios[key])}" for label, key in HEADLINE)
    share = h.mixed_step_share
    text = (
        f"plugin vs upstream: {figures}; mixed steps "
        f"{_share(share['plugin'])} vs {_share(share['upstream'])}"
    )
    if h.paths:
        text += "; " + ", ".join(path_sentences(h.paths))
    return text


# The report as the conform side reads it (the scheduler check).

# The step counters of a side the scheduler check compares with the docs.
COUNTERS = ("steps", "mixed_steps", "chunked_prefill_steps", "interleaved_decode_steps")


class SideCounts(NamedTuple):
    """One side of a replay report: its crash or stop, its step counters, first mixed step."""

    crashed: str | None
    stopped: str | None
    counts: Mapping[str, int]
    first_mixed_step: int | None


@dataclass(frozen=True)
class ReplayReport:
    """A replay report as the scheduler check reads it: each side and the headline."""

    plugin: SideCounts | None
    upstream: SideCounts | None
    headline: Headline


def parse_report(report: object, where: str = "scheduler replay") -> ReplayReport:
    """The report, each value read checked once: BadInput naming `where` and the key."""
    if not isinstance(report, Mapping):
        raise BadInput(f"{where} must be a table, got {type(report).__name__}")
    return ReplayReport(
        _side_counts(report, "plugin", where),
        _side_counts(report, "upstream", where),
        headline(report, where),
    )


def _side_counts(report: Mapping[str, object], side: str, where: str) -> SideCounts | None:
    block = report.get(side)
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise BadInput(f"{where}: {side!r} must be a table of counters, got {block!r}")
    counts: dict[str, int] = {}
    for key in (*COUNTERS, "first_mixed_step"):
        value = block.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadInput(
                f"{where}: {side}.{key} must be a count (integer >= 0), got {value!r}",
                hint="re-run the replay; its output is malformed",
            )
        counts[key] = value
    said = {}
    for key in ("crashed", "stopped"):
        value = block.get(key)
        if value is not None and not isinstance(value, str):
            raise BadInput(f"{where}: {side}.{key} is {value!r}, expected text", hint=_RERUN)
        said[key] = value or None
    first = counts.pop("first_mixed_step", None)
    return SideCounts(said["crashed"], said["stopped"], counts, first)
