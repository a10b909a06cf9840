"""The manifest's `conformance` section, made from scorecard.json as the manifest reads it
(`CardIntake`, `parse_card_intake`): the verdict, each check's status, summary and first
evidence, what was deferred, and the workload answers; a verdict its own checks
contradict is a gate failure.

`parse_card_intake` takes the object `core/records.read_with` read (bounded, a JSON
object) and checks each key it keeps: BadInput naming scorecard.json, the dotted key and
the command that writes it (`stages/manifestkeys`). A value the manifest copies is checked
as the manifest's schema would check it; one it never copies is not read. (`conform/
cardread` has the conform layer's own reader; `stages` is below it and does not use it.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.records import SCORECARD
from vllm_plugin_release.stages.manifestkeys import (
    as_object,
    get_key,
    iterated,
    kind_problem,
    text_or_none,
)

EVIDENCE_KEPT = 5  # evidence items per check copied into the manifest (the scorecard has all)

Status = Literal["pass", "warn", "fail", "deferred"]
Verdict = Literal["fleet", "pilot", "lab"]
Outcome = Literal["supported", "refused", "changed", "slow_path", "deferred"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail", "deferred")
VERDICTS: tuple[Verdict, ...] = ("fleet", "pilot", "lab")
OUTCOMES: tuple[Outcome, ...] = ("supported", "refused", "changed", "slow_path", "deferred")


@dataclass(frozen=True)
class Evidence:
    """One evidence item as the manifest keeps it: its note, file, line and source (the
    text of a value that is not text; a line only when it is an integer). `note` None: the
    item gives none (the manifest shows ""); an item that is no object is its text as note."""

    note: str | None
    file: str | None
    line: int | None
    source: str | None

    def to_json(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {} if self.note is None else {"note": self.note}
        if self.file is not None:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        if self.source is not None:
            out["source"] = self.source
        if self.note is None:
            out["note"] = ""
        return out


@dataclass(frozen=True)
class CheckIntake:
    """One check of the scorecard: its status, summary (the text of what is written, ""
    when none), the first EVIDENCE_KEPT evidence items and how many it has (a text given
    as evidence counts its characters, each one an item, as the manifest always had it)."""

    status: Status
    summary: str
    evidence: tuple[Evidence, ...]
    evidence_count: int

    def to_json(self) -> dict[str, str | int | list[dict[str, str | int]]]:
        return {
            "status": self.status,
            "summary": self.summary,
            "evidence": [item.to_json() for item in self.evidence],
            "evidence_count": self.evidence_count,
        }


@dataclass(frozen=True)
class Deferred:
    """A check deferred to another runner: its name, why, and the command that runs it;
    each None when not given (an empty value is not given; the text of one that is no text)."""

    check: str | None
    reason: str | None
    run_with: str | None

    def to_json(self) -> dict[str, str]:
        given = (("check", self.check), ("reason", self.reason), ("run_with", self.run_with))
        return {key: value for key, value in given if value is not None}


@dataclass(frozen=True)
class Feature:
    """A feature of the request mix and the plugin's answer (`workload.features`); the
    optional keys None when not given."""

    feature: str
    share: int | float | None
    needed: bool
    outcome: Outcome
    where: str | None
    path: str | None

    def to_json(self) -> dict[str, str | int | float | bool]:
        out: dict[str, str | int | float | bool] = {"feature": self.feature}
        if self.share is not None:
            out["share"] = self.share
        out.update(needed=self.needed, outcome=self.outcome)
        if self.where is not None:
            out["where"] = self.where
        if self.path is not None:
            out["path"] = self.path
        return out


@dataclass(frozen=True)
class PathShare:
    """The requests on one path and their share (`workload.paths`); `instead_of`: the path
    it leaves, when it names one (`says_instead`: the key is given, null included)."""

    requests: int
    share: int | float
    instead_of: str | None
    says_instead: bool

    def to_json(self) -> dict[str, str | int | float | None]:
        out: dict[str, str | int | float | None] = {"requests": self.requests, "share": self.share}
        if self.says_instead:
            out["instead_of"] = self.instead_of
        return out


@dataclass(frozen=True)
class Plan:
    """A variant plan's verdict and why (`plans`; the text of each reason)."""

    verdict: Verdict
    why: tuple[str, ...]

    def to_json(self) -> dict[str, str | list[str]]:
        return {"verdict": self.verdict, "why": list(self.why)}


@dataclass(frozen=True)
class Models:
    """The model the workload names, whether the plugin's docs list it, and the models the
    workload check's table shows (`checks.workload.details.models.table`)."""

    model: str | None
    listed: bool | None
    table: tuple[str, ...]

    def to_json(self) -> dict[str, str | bool | list[str] | None]:
        return {"model": self.model, "listed": self.listed, "table": list(self.table)}


@dataclass(frozen=True)
class WorkloadIntake:
    """The workload answers the scorecard carries (`workload`, `plans`)."""

    platform: str | None
    features: tuple[Feature, ...]
    paths: Mapping[str, PathShare]
    plans: Mapping[str, Plan]
    models: Models


@dataclass(frozen=True)
class CardIntake:
    """scorecard.json as the manifest reads it: the verdict, the runner, each check (by
    name, sorted), the checks it defers that are not among its checks (scorecard v2 lists
    the ones this runner never ran), and the workload answers (None without `workload`)."""

    verdict: Verdict
    runner: str | None
    checks: Mapping[str, CheckIntake]
    deferred: tuple[Deferred, ...]
    workload: WorkloadIntake | None


# ---------------------------------------------------------------------------
# Reading scorecard.json


def _evidence(item: Any) -> Evidence:
    """An evidence item reduced to note/file/line/source."""
    if not isinstance(item, dict):
        return Evidence(str(item), None, None, None)
    note, file, line, source = (item.get(k) for k in ("note", "file", "line", "source"))
    return Evidence(
        note=None if note is None else str(note),
        file=None if file is None else str(file),
        line=line if isinstance(line, int) else None,
        source=None if source is None else str(source),
    )


def _check(name: str, result: Any) -> CheckIntake:
    file = SCORECARD
    status = get_key(result, "status", f"{file}: checks.{name}")
    if status not in STATUSES:
        raise kind_problem(file, f"checks.{name}.status", "pass, warn, fail or deferred")
    evidence = result.get("evidence") or []
    if not isinstance(evidence, list | str):  # sliced and counted
        raise kind_problem(file, f"checks.{name}.evidence", "a list")
    return CheckIntake(
        status=status,
        summary=str(result.get("summary", "")),
        evidence=tuple(_evidence(item) for item in evidence[:EVIDENCE_KEPT]),
        evidence_count=len(evidence),
    )


def _given(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    return str(value) if value else None


def _deferred(value: Any, checks: Mapping[str, CheckIntake]) -> tuple[Deferred, ...]:
    """The scorecard's deferred items (objects) that name no check it has."""
    out = []
    for index, item in enumerate(iterated(value, "deferred", SCORECARD)):
        if not isinstance(item, dict):
            continue
        check = item.get("check")
        if isinstance(check, list | dict):  # no name of a check
            raise kind_problem(SCORECARD, f"deferred.{index}.check", "text")
        if not (isinstance(check, str) and check in checks):
            out.append(Deferred(*(_given(item, k) for k in ("check", "reason", "run_with"))))
    return tuple(out)


def parse_card_intake(data: Any) -> CardIntake:
    """scorecard.json's object (read by `records.read_with`) as the manifest reads it;
    BadInput naming scorecard.json, the dotted key and `vpr conform`."""
    file = SCORECARD
    verdict = get_key(data, "verdict", file)
    if verdict not in VERDICTS:
        raise BadInput(f"{file}: verdict must be fleet, pilot or lab, got {verdict!r}")
    checks_in = get_key(data, "checks", file)
    if not isinstance(checks_in, dict):
        raise BadInput(f"{file}: 'checks' must be an object of check name -> result")
    checks = {name: _check(name, checks_in[name]) for name in sorted(checks_in)}
    deferred = _deferred(data.get("deferred"), checks)
    runner = text_or_none(data.get("runner"), "runner", SCORECARD)
    return CardIntake(verdict, runner, checks, deferred, _workload(data, checks_in))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _feature(index: int, x: dict[str, Any]) -> Feature:
    at = f"workload.features.{index}"
    if not isinstance(x.get("feature"), str):
        raise kind_problem(SCORECARD, f"{at}.feature", "text")
    if not isinstance(x.get("needed"), bool):
        raise kind_problem(SCORECARD, f"{at}.needed", "true or false")
    if x.get("outcome") not in OUTCOMES:
        raise kind_problem(SCORECARD, f"{at}.outcome", f"{', '.join(OUTCOMES[:-1])} or deferred")
    if "share" in x and not _number(x["share"]):
        raise kind_problem(SCORECARD, f"{at}.share", "a number")
    for key in ("where", "path"):
        if key in x and not isinstance(x[key], str):
            raise kind_problem(SCORECARD, f"{at}.{key}", "text")
    share, where, path = x.get("share"), x.get("where"), x.get("path")
    return Feature(x["feature"], share, x["needed"], x["outcome"], where, path)


def _path(name: str, mark: dict[str, Any]) -> PathShare:
    at = f"workload.paths.{name}"
    if type(mark.get("requests")) is not int:
        raise kind_problem(SCORECARD, f"{at}.requests", "an integer")
    if not _number(mark.get("share")):
        raise kind_problem(SCORECARD, f"{at}.share", "a number")
    instead = text_or_none(mark.get("instead_of"), f"{at}.instead_of", SCORECARD)
    return PathShare(mark["requests"], mark["share"], instead, "instead_of" in mark)


def _plan(name: str, plan: dict[str, Any]) -> Plan:
    verdict = plan["verdict"]
    if verdict not in VERDICTS:
        raise kind_problem(SCORECARD, f"plans.{name}.verdict", "fleet, pilot or lab")
    why = iterated(plan.get("why"), f"plans.{name}.why", SCORECARD)
    return Plan(verdict, tuple(str(w) for w in why))


def _models(models: dict[str, Any], checks_in: dict[str, Any]) -> Models:
    listed = models.get("listed")
    if listed is not None and not isinstance(listed, bool):
        raise kind_problem(SCORECARD, "workload.models.listed", "true, false or null")
    model = text_or_none(models.get("model"), "workload.models.model", SCORECARD)
    return Models(model, listed, models_table(checks_in))


def _workload(data: dict[str, Any], checks_in: dict[str, Any]) -> WorkloadIntake | None:
    """The workload answers the scorecard carries (`workload`, `plans`; None when it has
    no workload); BadInput naming the key of a part that is not what it is read as."""
    facts = data.get("workload")
    if not isinstance(facts, dict):
        return None
    f = SCORECARD
    models = as_object(facts.get("models"), "workload.models", f)
    features = facts.get("features") or []
    if not isinstance(features, list) or not all(isinstance(x, dict) for x in features):
        raise kind_problem(f, "workload.features", "a list of objects")
    paths = as_object(facts.get("paths"), "workload.paths", f)
    if not all(isinstance(mark, dict) for mark in paths.values()):
        raise kind_problem(f, "workload.paths", "an object of objects")
    plans = as_object(data.get("plans"), "plans", f)
    if not all(isinstance(plan, dict) and "verdict" in plan for plan in plans.values()):
        raise kind_problem(f, "plans", "an object of objects with a verdict")
    return WorkloadIntake(
        platform=text_or_none(facts.get("platform"), "workload.platform", SCORECARD),
        features=tuple(_feature(i, x) for i, x in enumerate(features)),
        paths={name: _path(name, mark) for name, mark in paths.items()},
        plans={name: _plan(name, plan) for name, plan in plans.items()},
        models=_models(models, checks_in),
    )


def models_table(checks_in: dict[str, Any]) -> tuple[str, ...]:
    """The models the workload check's details list (`checks.workload.details.models`)."""
    f, at = SCORECARD, "checks.workload"
    check = as_object(checks_in.get("workload"), at, f)
    details = check.get("details", {})
    if not isinstance(details, dict):
        raise kind_problem(f, f"{at}.details", "an object")
    models = as_object(details.get("models"), f"{at}.details.models", f)
    rows = iterated(models.get("table"), f"{at}.details.models.table", f)
    return tuple(str(r.get("model")) for r in rows if isinstance(r, dict))


# ---------------------------------------------------------------------------
# The manifest's section


def check_verdict(verdict: str, checks: Mapping[str, CheckIntake], file: str) -> None:
    """A verdict that contradicts its own checks is a gate failure, never recorded as is."""
    statuses = {c.status for c in checks.values()}
    if verdict == "fleet" and statuses - {"pass", "warn"}:
        bad = sorted(n for n, c in checks.items() if c.status not in ("pass", "warn"))
        raise GateFailed(
            f"{file}: verdict 'fleet' but checks {', '.join(bad)} did not pass",
            hint="fleet needs every check passed, hardware included; re-run `vpr conform`",
        )
    if verdict == "pilot" and "fail" in statuses:
        bad = sorted(n for n, c in checks.items() if c.status == "fail")
        raise GateFailed(f"{file}: verdict 'pilot' but checks {', '.join(bad)} failed")


def conformance(card: CardIntake | None) -> dict[str, Any]:
    """The manifest's `conformance` section ("absent" without scorecard.json); GateFailed
    when the verdict contradicts the checks."""
    if card is None:
        return {"status": "absent", "verdict": None, "runner": None, "checks": {}, "deferred": []}
    checks = {name: check.to_json() for name, check in card.checks.items()}
    deferred = [
        Deferred(name, check.summary, None).to_json()
        for name, check in card.checks.items()
        if check.status == "deferred"
    ]
    # scorecard v2 also lists the checks this runner never ran (the hardware part).
    deferred += [item.to_json() for item in card.deferred]
    check_verdict(card.verdict, card.checks, SCORECARD)
    out: dict[str, Any] = {
        "status": "present",
        "verdict": card.verdict,
        "runner": card.runner,
        "checks": checks,
        "deferred": deferred,
    }
    if card.workload is not None:
        out["workload"] = workload(card.workload)
    return out


def workload(answers: WorkloadIntake) -> dict[str, Any]:
    """The workload answers as the manifest records them: each feature's answer, the share
    on each path, each plan's verdict and why, the models the plugin's docs show."""
    return {
        "platform": answers.platform,
        "features": [feature.to_json() for feature in answers.features],
        "paths": {name: mark.to_json() for name, mark in answers.paths.items()},
        "plans": {name: plan.to_json() for name, plan in answers.plans.items()},
        "models": answers.models.to_json(),
    }
