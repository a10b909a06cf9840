"""scorecard.json as a typed, frozen record: what a check returns (`CheckResult`) and the
card's one reader (bounded, checked key by key, exit 2 naming the file and the key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput

Status = Literal["pass", "warn", "fail", "deferred"]
Verdict = Literal["fleet", "pilot", "lab"]
Outcome = Literal["supported", "refused", "changed", "slow_path", "deferred"]
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "deferred")
VERDICTS: tuple[str, ...] = ("fleet", "pilot", "lab")
OUTCOMES: tuple[str, ...] = ("supported", "refused", "changed", "slow_path", "deferred")
# What the card states beside the checks (`conform.suite.card_facts`).
FACT_KEYS = ("wheels", "runtime", "certified_on", "tool", "replay", "pairing_id")


@dataclass(frozen=True)
class Evidence:
    """One observation behind a verdict: where it was seen and what was seen."""

    note: str
    file: str | None = None
    line: int | None = None
    value: Any = None
    source: str | None = None  # e.g. "sdist", "plugin", "index", "replay"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    threshold: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "threshold": self.threshold,
            "details": self.details,
        }


def _given(**keys: object) -> dict[str, Any]:
    return {key: value for key, value in keys.items() if value is not None}


class Deferred(NamedTuple):
    """A check not run (`deferred`): its name, why, and what would run it."""

    check: str | None
    reason: str | None
    run_with: str | None

    def to_json(self) -> dict[str, Any]:
        return _given(**self._asdict())


class Feature(NamedTuple):
    """A feature of the request mix and the plugin's answer (`workload.features`)."""

    feature: str
    needed: bool
    outcome: Outcome
    share: int | float | None
    where: str | None
    path: str | None
    label: str | None
    requests: int | None

    def to_json(self) -> dict[str, Any]:
        return _given(**self._asdict())


class PathShare(NamedTuple):
    """The requests on one path and their share (`workload.paths`); `instead_of`: the path
    it leaves, when the key is given (`says_instead`, null included)."""

    requests: int
    share: int | float
    instead_of: str | None
    says_instead: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": self.requests, "share": self.share}
        if self.says_instead:
            out["instead_of"] = self.instead_of
        return out


class Models(NamedTuple):
    """The model the workload names, whether the plugin's docs list it, how many models
    the card shows, and those the workload check's table lists (its details)."""

    model: str | None
    listed: bool | None
    shown: int | None
    table: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "listed": self.listed, "shown": self.shown}


class Workload(NamedTuple):
    """The workload answers the card carries (`workload`)."""

    platform: str | None
    features: tuple[Feature, ...]
    paths: Mapping[str, PathShare]
    models: Models

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "features": [f.to_json() for f in self.features],
            "paths": {name: mark.to_json() for name, mark in self.paths.items()},
            "models": self.models.to_json(),
        }


class Plan(NamedTuple):
    """A variant plan's verdict and why (`plans`), and the status and summary of the check
    whose answer the plan replaced (`answers`, by check name)."""

    description: str | None
    verdict: Verdict
    why: tuple[str, ...]
    answers: Mapping[str, tuple[str, str]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"description": self.description, "verdict": self.verdict}
        out["why"] = list(self.why)
        for name, (status, summary) in self.answers.items():
            out[name] = {"status": status, "summary": summary}
        return out


class Explanation(NamedTuple):
    """Why the verdict is what it is, and what the next level needs (`explanation`)."""

    meaning: str
    why: tuple[str, ...]
    next_level: str | None
    needs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "why": list(self.why), "needs": list(self.needs)}


class Pairing(NamedTuple):
    """The pairing the card is for (`pairing`); the wheels' sha256 null before they exist."""

    name: str
    core: str
    plugin: str
    core_wheel_sha256: str | None
    plugin_wheel_sha256: str | None

    def to_json(self) -> dict[str, str | None]:
        return self._asdict()


class WheelRow(NamedTuple):
    """A wheel the card certifies (`wheels`): its role (core, plugin), name and sha256."""

    role: str
    filename: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return self._asdict()


class RuntimeSeen(NamedTuple):
    """The vendor runtime as the environment found it (`runtime`): each None when not said."""

    name: str | None
    status: str | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return _given(**self._asdict())


class ReplaySeen(NamedTuple):
    """The replay's headline (`replay`): plugin/upstream ratios, each side's mixed-step
    share, the slow paths' shares (None: not marked) and the plots beside the card."""

    ratios: Mapping[str, float | None]
    mixed_step_share: Mapping[str, float | None]
    paths: Mapping[str, PathShare] | None
    plots: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ratios": dict(self.ratios)}
        out["mixed_step_share"] = dict(self.mixed_step_share)
        if self.paths is not None:
            out["paths"] = {name: mark.to_json() for name, mark in self.paths.items()}
        out["plots"] = list(self.plots)
        return out


class Facts(NamedTuple):
    """What the card states beside the checks (FACT_KEYS), each None when not stated."""

    pairing_id: str | None = None
    wheels: tuple[WheelRow, ...] | None = None
    runtime: RuntimeSeen | None = None
    certified_on: str | None = None
    tool: tuple[str, str] | None = None  # the tool's name and version
    replay: ReplaySeen | None = None

    def to_json(self) -> dict[str, Any]:
        shown = {
            "pairing_id": self.pairing_id,
            "wheels": None if self.wheels is None else [w.to_json() for w in self.wheels],
            "runtime": None if self.runtime is None else self.runtime.to_json(),
            "certified_on": self.certified_on,
            "tool": None if self.tool is None else dict(zip(("name", "version"), self.tool)),
            "replay": None if self.replay is None else self.replay.to_json(),
        }
        return _given(**shown)


class Scorecard(NamedTuple):
    """A scorecard as read; `to_json` writes it back from these fields."""

    verdict: Verdict
    runner: str
    pairing: Pairing
    results: tuple[CheckResult, ...]  # in the file's order (by name)
    deferred: tuple[Deferred, ...] = ()
    workload: Workload | None = None
    plans: Mapping[str, Plan] = {}
    explanation: Explanation | None = None
    blocked: tuple[str, str] | None = None  # why no environment could be made: reason, hint
    facts: Facts = Facts()
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "runner": self.runner,
            "pairing": self.pairing.to_json(),
            "deferred": [d.to_json() for d in self.deferred],
            "checks": {r.name: r.to_json() for r in sorted(self.results, key=lambda r: r.name)},
            "summary": {s: sum(1 for r in self.results if r.status == s) for s in STATUSES},
            **self.facts.to_json(),
        }
        if self.version is not None:
            out["scorecard_version"] = self.version
        if self.explanation is not None:
            out["explanation"] = self.explanation.to_json()
        if self.blocked is not None:
            out["blocked"] = dict(zip(("reason", "hint"), self.blocked))
        if self.plans:
            out["plans"] = {name: plan.to_json() for name, plan in self.plans.items()}
        if self.workload is not None:
            out["workload"] = self.workload.to_json()
        return out


def read(dist: Path, hint: str | None = None) -> Scorecard:
    """dist/scorecard.json, bounded and checked; BadInput naming the file and the key."""
    return records.read_with(
        dist, records.SCORECARD, lambda data: parse(data, str(dist / records.SCORECARD), hint), hint
    )


class _Bad(Exception):
    """A key of the card that is missing or of another kind (the reader adds the file)."""


def parse(data: Any, where: str, hint: str | None = None) -> Scorecard:
    """The card `data` checked and typed; BadInput naming `where` and the key."""
    try:
        return _parse(data)
    except _Bad as bad:
        again = hint or records.producer(records.SCORECARD)
        raise BadInput(
            f"{where}: {bad.args[0]}",
            hint=f"the record is incomplete or from another version; re-run `{again}`",
        ) from None


def _want(ok: bool, key: str, expected: str, value: Any) -> None:
    if not ok:
        text = repr(value)
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise _Bad(f"'{key}' must be {expected} (got {shown})")


def _text(node: Mapping[str, Any], key: str, at: str, required: bool = False) -> Any:
    value = node.get(key)
    ok = isinstance(value, str) or (value is None and not required)
    _want(ok, at + key, "text" if required else "text or null", value)
    return value


def _one_of(node: Mapping[str, Any], key: str, at: str, allowed: tuple[str, ...]) -> Any:
    value = node.get(key)
    expected = ", ".join(allowed[:-1]) + " or " + allowed[-1]
    _want(isinstance(value, str) and value in allowed, at + key, expected, value)
    return value


def _object(node: Mapping[str, Any], key: str, at: str, *, required: bool = False) -> Any:
    if key not in node and not required:
        return {}
    value = node.get(key)
    _want(isinstance(value, dict), at + key, "an object", value)
    return value


def _list(node: Mapping[str, Any], key: str, at: str, kind: type = dict) -> list[Any]:
    if key not in node:
        return []
    value = node[key]
    what = "a list of objects" if kind is dict else "a list of text"
    ok = isinstance(value, list) and all(isinstance(v, kind) for v in value)
    _want(ok, at + key, what, value)
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parse(data: Any) -> Scorecard:
    _want(isinstance(data, dict), "(the card)", "a JSON object", data)
    verdict = _one_of(data, "verdict", "", VERDICTS)
    runner = _text(data, "runner", "", required=True)
    pairing = _pairing(_object(data, "pairing", "", required=True))
    checks = _object(data, "checks", "", required=True)
    results = tuple(_result(str(name), entry) for name, entry in checks.items())
    version = data.get("scorecard_version")
    _want(version is None or _count(version), "scorecard_version", "an integer", version)
    blocked = None
    if "blocked" in data:
        why = _object(data, "blocked", "")
        blocked = (_text(why, "reason", "blocked.", True), _text(why, "hint", "blocked.", True))
    return Scorecard(
        verdict,
        runner,
        pairing,
        results,
        tuple(
            _deferred(item, f"deferred.{i}.") for i, item in enumerate(_list(data, "deferred", ""))
        ),
        _workload(data, results),
        {name: _plan(plan, f"plans.{name}.") for name, plan in _object(data, "plans", "").items()},
        _explanation(data),
        blocked,
        _facts(data),
        version,
    )


def _result(name: str, entry: Any) -> CheckResult:
    at = f"checks.{name}."
    _want(isinstance(entry, dict), at[:-1], "an object", entry)
    status = _one_of(entry, "status", at, STATUSES)
    summary = _text(entry, "summary", at, required="summary" in entry) or ""
    evidence = _list(entry, "evidence", at)
    found = [_evidence(e, f"{at}evidence.{n}") for n, e in enumerate(evidence)]
    threshold = _object(entry, "threshold", at)
    details = _object(entry, "details", at)
    return CheckResult(name, status, summary, found, threshold, details)


def _evidence(item: dict[str, Any], at: str) -> Evidence:
    unknown = sorted(set(item) - {"note", "file", "line", "value", "source"})
    _want(not unknown, at, "an object of note, file, line, value, source", unknown)
    _text(item, "note", at + ".", required=True)
    _text(item, "file", at + ".")
    _text(item, "source", at + ".")
    line = item.get("line")
    _want(line is None or _count(line), f"{at}.line", "an integer", line)
    return Evidence(**item)


def _deferred(item: dict[str, Any], at: str) -> Deferred:
    keys = ("check", "reason", "run_with")
    return Deferred(*(_text(item, key, at) for key in keys))


def _explanation(data: Mapping[str, Any]) -> Explanation | None:
    x = _object(data, "explanation", "")
    if not x:
        return None
    at = "explanation."
    meaning = _text(x, "meaning", at, required=True)
    why, needs = _list(x, "why", at, str), _list(x, "needs", at, str)
    return Explanation(meaning, tuple(why), _text(x, "next_level", at), tuple(needs))


def _plan(plan: Any, at: str) -> Plan:
    _want(isinstance(plan, dict), at[:-1], "an object", plan)
    verdict = _one_of(plan, "verdict", at, VERDICTS)
    why = _list(plan, "why", at, str)
    answers = {}
    for name, answer in plan.items():
        if name not in ("description", "verdict", "why"):
            _want(isinstance(answer, dict), at + name, "an object", answer)
            status = _one_of(answer, "status", f"{at}{name}.", STATUSES)
            answers[name] = (status, _text(answer, "summary", f"{at}{name}.", required=True))
    return Plan(_text(plan, "description", at), verdict, tuple(why), answers)


def _workload(data: Mapping[str, Any], results: tuple[CheckResult, ...]) -> Workload | None:
    facts = _object(data, "workload", "")
    if not facts:
        return None
    at = "workload."
    paths = _object(facts, "paths", at)
    return Workload(
        platform=_text(facts, "platform", at),
        features=tuple(
            _feature(x, f"{at}features.{i}.") for i, x in enumerate(_list(facts, "features", at))
        ),
        paths={name: _path(mark, f"{at}paths.{name}.") for name, mark in paths.items()},
        models=_models(_object(facts, "models", at), results),
    )


def _feature(x: dict[str, Any], at: str) -> Feature:
    needed, share, requests = x.get("needed"), x.get("share"), x.get("requests")
    _want(isinstance(needed, bool), at + "needed", "true or false", needed)
    _want("share" not in x or _number(share), at + "share", "a number", share)
    _want(requests is None or _count(requests), at + "requests", "an integer", requests)
    return Feature(
        _text(x, "feature", at, required=True),
        needed,
        _one_of(x, "outcome", at, OUTCOMES),
        share,
        _text(x, "where", at),
        _text(x, "path", at),
        _text(x, "label", at),
        requests,
    )


def _path(mark: Any, at: str, unmarked: bool = False) -> PathShare:
    """A path's requests and share (`unmarked`: the share may be null, as a replay's)."""
    _want(isinstance(mark, dict), at[:-1], "an object", mark)
    requests, share = mark.get("requests"), mark.get("share")
    _want(_count(requests), at + "requests", "an integer", requests)
    _want(_number(share) or (unmarked and share is None), at + "share", "a number", share)
    return PathShare(requests, share, _text(mark, "instead_of", at), "instead_of" in mark)


def _models(models: dict[str, Any], results: tuple[CheckResult, ...]) -> Models:
    at = "workload.models."
    listed, shown = models.get("listed"), models.get("shown")
    _want(listed is None or isinstance(listed, bool), at + "listed", "true, false or null", listed)
    _want(shown is None or _count(shown), at + "shown", "an integer", shown)
    return Models(_text(models, "model", at), listed, shown, _table(results))


def _table(results: tuple[CheckResult, ...]) -> tuple[str, ...]:
    """The models the workload check's details list (`checks.workload.details.models`)."""
    details = next((r.details for r in results if r.name == "workload"), {})
    at = "checks.workload.details."
    rows = _list(_object(details, "models", at), "table", at + "models.")
    return tuple(str(row.get("model")) for row in rows)


def _pairing(p: dict[str, Any]) -> Pairing:
    at = "pairing."
    name, core, plugin = (_text(p, key, at, True) for key in ("name", "core", "plugin"))
    return Pairing(
        name, core, plugin, _text(p, "core_wheel_sha256", at), _text(p, "plugin_wheel_sha256", at)
    )


def _facts(data: Mapping[str, Any]) -> Facts:
    wheels = None
    if "wheels" in data:
        rows = _list(data, "wheels", "")
        keys = ("role", "filename", "sha256")
        wheels = tuple(
            WheelRow(*(_text(row, k, f"wheels.{i}.", True) for k in keys))
            for i, row in enumerate(rows)
        )
    runtime = None
    if "runtime" in data:
        seen = _object(data, "runtime", "")
        runtime = RuntimeSeen(*(_text(seen, k, "runtime.") for k in ("name", "status", "reason")))
    tool = None
    if "tool" in data:
        named = _object(data, "tool", "")
        tool = (_text(named, "name", "tool.", True), _text(named, "version", "tool.", True))
    return Facts(
        _text(data, "pairing_id", ""),
        wheels,
        runtime,
        _text(data, "certified_on", ""),
        tool,
        _replay(_object(data, "replay", "")) if "replay" in data else None,
    )


def _figures(node: dict[str, Any], key: str) -> dict[str, float | None]:
    figures = _object(node, key, "replay.", required=True)
    for name, value in figures.items():
        _want(value is None or _number(value), f"replay.{key}.{name}", "a number or null", value)
    return figures


def _replay(replay: dict[str, Any]) -> ReplaySeen:
    paths = None
    if "paths" in replay:
        marks = _object(replay, "paths", "replay.")
        paths = {name: _path(mark, f"replay.paths.{name}.", True) for name, mark in marks.items()}
    plots = tuple(_list(replay, "plots", "replay.", str))
    return ReplaySeen(
        _figures(replay, "ratios"), _figures(replay, "mixed_step_share"), paths, plots
    )
