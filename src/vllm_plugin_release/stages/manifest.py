"""The pairing manifest: one deterministic JSON document per core/plugin pairing, made
from dist/NAME/'s stage records and the wheels they name (the same records, pins and
wheels give the same bytes; wall-clock and host data go to run.json)."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from vllm_plugin_release.buildspec.model import RuntimeSpec, Spec
from vllm_plugin_release.core import attest
from vllm_plugin_release.core.attest import (
    BuildPins,
    CorePins,
    GitPin,
    PluginTable,
    RuntimeTable,
    SdistPin,
    SpecPins,
)
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file, write_json
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import (
    KIND,
    MANIFEST_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    STATEMENT_FILE,
    PairingInputs,
    RuntimePins,
    SourcePin,
    file_bytes,
    validate,
)
from vllm_plugin_release.core.manifestmodel import Manifest, parse
from vllm_plugin_release.core.records import (
    BUILD_CORE,
    BUILD_GUARD,
    BUILD_PLUGIN,
    ENV,
    SCORECARD,
    build_record,
    env_record,
    read_object,
    read_with,
    run_file,
)
from vllm_plugin_release.core.records import producer as record_producer
from vllm_plugin_release.core.wheelfacts import files_digest, wheel_files, wheel_tags, wheel_version
from vllm_plugin_release.edges import keys, runner

# ---------------------------------------------------------------------------
# scorecard.json's keys as the manifest reads them: BadInput naming the record, the key
# and the command that writes it.


def get_key(record: dict[str, Any], dotted: str, file: str, *, required: bool = True) -> Any:
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if not required:
                return None
            raise problem(file, f"missing key {dotted!r}")
        node = node[part]
    return node


def problem(file: str, what: str) -> BadInput:
    """BadInput naming record `file` and `what` is wrong with it, and its producer."""
    producer = record_producer(file, "SPEC")
    return BadInput(
        f"{file}: {what}",
        hint=f"the record is incomplete or from another version; re-run `{producer}`",
    )


def kind_problem(file: str, dotted: str, expected: str) -> BadInput:
    return problem(file, f"{dotted!r} must be {expected}")


def as_object(value: Any, dotted: str, file: str) -> dict[str, Any]:
    """`value` (`file`'s `dotted` key) as an object: {} when empty; else BadInput."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise kind_problem(file, dotted, "an object")
    return value


def iterated(value: Any, dotted: str, file: str) -> list[Any] | str | dict[str, Any]:
    """`value` (`file`'s `dotted` key) to iterate: [] when empty; a number: BadInput."""
    if not value:
        return []
    if not isinstance(value, list | str | dict):
        raise kind_problem(file, dotted, "a list")
    return value


def text_or_none(value: Any, dotted: str, file: str) -> str | None:
    """`value` (`file`'s `dotted` key) as text or None; BadInput when it is neither."""
    if value is not None and not isinstance(value, str):
        raise kind_problem(file, dotted, "text or null")
    return value


# ---------------------------------------------------------------------------
# scorecard.json as the manifest reads it

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


# ---------------------------------------------------------------------------
# Stage records


@dataclass(frozen=True)
class Records:
    """The stage records of one pairing (build-core.json and build-plugin.json required;
    env.json, scorecard.json and build-guard.json None when not written), typed."""

    dist_dir: Path
    build_core: BuildRecord
    build_plugin: BuildRecord
    env: EnvRecord | None = None
    scorecard: CardIntake | None = None
    build_guard: BuildRecord | None = None


def read_records(dist_dir: Path, spec_path: str | None = None) -> Records:
    """Read the stage records in `dist_dir`; exit 2 naming a missing required one."""

    def hint(name: str) -> str:
        return record_producer(name, spec_path or "FILE")

    for name in (BUILD_CORE, BUILD_PLUGIN):
        if not (dist_dir / name).exists():
            raise BadInput(
                f"{dist_dir / name}: required stage record {name} is missing",
                hint=f"run `{hint(name)}` first (it writes {name})",
            )
    has = {name: (dist_dir / name).exists() for name in (ENV, SCORECARD, BUILD_GUARD)}
    return Records(
        dist_dir=dist_dir,
        build_core=build_record(dist_dir, BUILD_CORE, hint(BUILD_CORE)),
        build_plugin=build_record(dist_dir, BUILD_PLUGIN, hint(BUILD_PLUGIN)),
        env=env_record(dist_dir, hint=hint(ENV)) if has[ENV] else None,
        scorecard=read_with(dist_dir, SCORECARD, parse_card_intake, hint(SCORECARD))
        if has[SCORECARD]
        else None,
        build_guard=build_record(dist_dir, BUILD_GUARD, hint(BUILD_GUARD))
        if has[BUILD_GUARD]
        else None,
    )


# ---------------------------------------------------------------------------
# Wheels and pins

WHEEL_FACTS = "wheel-files"  # .vpr/stages/wheel-files/<wheel sha256>.json


def describe_wheel(
    dist_dir: Path, filename: str, sha256: str, record_file: str, memo: Path | None = None
) -> dict[str, Any]:
    """Facts about a wheel in dist_dir, after checking its sha256 against the stage record.
    `memo`: a folder where the facts of its files are kept by the wheel's sha256 (reading
    and checking every member against the wheel's RECORD is done once per wheel)."""
    path = dist_dir / filename
    if not path.is_file():
        raise BadInput(
            f"{path}: wheel named in {record_file} is missing",
            hint=f"re-run `{record_producer(record_file, 'FILE')}`",
        )
    actual = sha256_file(path)
    if actual != sha256:
        raise GateFailed(
            f"{path}: sha256 {actual} differs from {record_file} wheel.sha256 {sha256}",
            hint="the wheel changed after it was built; rebuild it",
        )
    digest, count = _files_facts(path, actual, memo)
    return {
        "filename": filename,
        "sha256": actual,
        "version": wheel_version(path),
        "size": path.stat().st_size,
        "files_sha256": digest,
        "files": count,
        "tags": wheel_tags(filename),
    }


class FilesFacts(NamedTuple):
    """A wheel's file facts as noted by its sha256 (`_files_facts`): the digest of its
    files and how many there are."""

    files_sha256: str
    files: int


def parse_files_facts(data: Any) -> FilesFacts | None:
    """A wheel-files note, typed; None when it is not one (64 hex digits, a count)."""
    digest = data.get("files_sha256") if isinstance(data, dict) else None
    files = data.get("files") if isinstance(data, dict) else None
    if (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
        and type(files) is int
        and files >= 0
    ):
        return FilesFacts(digest, files)
    return None


def _files_facts(path: Path, sha256: str, memo: Path | None) -> tuple[str, int]:
    """(files_sha256, number of files) of the wheel at `path`, whose bytes the caller has
    checked to be `sha256`: from `memo` when an earlier run noted them for those bytes
    (a malformed note is ignored), else read from the wheel, checked against its RECORD
    (GateFailed when they differ), and noted."""
    note = memo / f"{sha256}.json" if memo is not None else None
    if note is not None:
        kept = read_object(note, parse_files_facts)  # bounded; None when unusable
        if kept is not None:
            return kept.files_sha256, kept.files
    files = wheel_files(path)
    facts = files_digest(files), len(files)
    if note is not None:  # a read-only cache: the facts are simply read again next time
        with contextlib.suppress(OSError):
            write_json(note, {"files_sha256": facts[0], "files": facts[1]})
    return facts


def pins_from_spec(spec: Spec) -> SpecPins:
    """The spec's pins: what the pairing was asked to be built from, and what its
    statement signs (`SpecPins.to_json`)."""
    core = spec.core
    src = core.source
    source: SdistPin | GitPin
    if src.kind == "sdist":
        source = SdistPin(src.index, src.filename, src.sha256)
    else:
        source = GitPin(src.url, src.tag, src.commit)
    build = spec.build
    plugin = spec.plugin
    return SpecPins(
        name=spec.name,
        core=CorePins(core.name, core.version, core.target_device, core.source_date_epoch, source),
        plugin=None if plugin is None else PluginTable(plugin.name, dict(plugin.raw)),
        runtime=_runtime_table(spec.runtime),
        build=BuildPins(
            build.python, build.backend, build.base_image, build.torch, build.constraints
        ),
        api_approval=core.api_approval,
    )


def _runtime_table(runtime: RuntimeSpec | None) -> RuntimeTable | None:
    """The spec's `[runtime]` as its pins hold it: the table as written and the pins a
    pairing id holds, read from it."""
    if runtime is None:
        return None
    raw = dict(runtime.raw)
    return RuntimeTable(_runtime_pins(raw), raw)


# ---------------------------------------------------------------------------
# Building


def _iso(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _core_source(source: dict[str, Any], file: str) -> dict[str, Any]:
    kind = source.get("kind")
    if kind == "git":
        return {
            "kind": "git",
            "url": get_key(source, "url", file),
            "tag": source.get("tag"),
            "commit": get_key(source, "commit", file),
        }
    if kind == "sdist":
        filename = get_key(source, "filename", file)
        index = source.get("index")
        url = source.get("url") or (f"{index.rstrip('/')}/{filename}" if index else filename)
        return {
            "kind": "sdist",
            "url": url,
            "index": index,
            "filename": filename,
            "sha256": get_key(source, "sha256", file),
        }
    raise BadInput(f"{file}: core.source.kind must be 'sdist' or 'git', got {kind!r}")


def _runtime(env: EnvRecord | None, pins: RuntimePins | None) -> dict[str, Any]:
    pinned_version = None if pins is None else pins.version
    pinned_commit = None if pins is None else pins.commit
    observed = None if env is None or not env.runtime.named else env.runtime
    if pins is None and observed is None:
        return {
            "name": None,
            "status": "not-required",
            "version": None,
            "commit": None,
            "pinned_version": None,
            "pinned_commit": None,
            "note": "the spec names no vendor runtime",
        }
    name = (None if observed is None else observed.name) or (None if pins is None else pins.name)
    if env is None:
        status, note = "absent", "no env.json: the environment stage has not run"
    elif observed is None or observed.status != "present":
        status = "absent"
        why = None if observed is None else observed.reason
        note = f"absent on this runner ({env.runner})" + (f": {why}" if why else "")
    else:
        status, note = "present", f"present on the {env.runner} runner"
    found = observed if status == "present" else None  # what is read of a present one
    wheel = None if found is None else found.wheel
    return {
        "name": name,
        "status": status,
        **({"wheel": wheel.to_json()} if wheel is not None else {}),
        "version": None if found is None else found.version,
        "commit": None if found is None else (found.commit or pinned_commit),
        "pinned_version": pinned_version,
        "pinned_commit": pinned_commit,
        "note": note,
    }


def _core(records: Records, pins: SpecPins, memo: Path | None = None) -> dict[str, Any]:
    """The manifest's `core` section, from build-core.json and the core wheel."""
    bc, fc = records.build_core, BUILD_CORE
    core_wheel = describe_wheel(records.dist_dir, bc.wheel.filename, bc.wheel.sha256, fc, memo)
    build_env = bc.build_env
    assert build_env is not None  # build-core.json's, always read
    torch_file = build_env.torch_file
    return {
        "name": _recorded(bc.name, "core.name", fc),
        "version": _recorded(bc.version, "core.version", fc),
        "source": _core_source(dict(_recorded(bc.source, "core.source", fc)), fc),
        "target_device": _recorded(bc.target_device, "core.target_device", fc),
        "wheel": core_wheel,
        "reproducible": bc.reproducible,
        "isolated": bc.isolated,
        "build_env": {
            "lock_file": build_env.lock_file,
            "lock_sha256": build_env.lock_sha256,
            "torch": build_env.torch,
            # only when recorded (a build record of an older vpr has none)
            **({"torch_file": torch_file.to_json()} if torch_file is not None else {}),
            "core_declared_torch": build_env.core_declared_torch,
        },
        "python": _recorded(bc.python, "python", fc),
        **({"interpreter": bc.interpreter.to_json()} if bc.interpreter is not None else {}),
        "platform_tag": core_wheel["tags"]["platform"],
    }


def _entry_points(record: BuildRecord) -> dict[str, dict[str, str]]:
    return {
        group: dict(sorted(names.items())) for group, names in sorted(record.entry_points.items())
    }


def _plugin(records: Records, memo: Path | None = None) -> dict[str, Any]:
    """The manifest's `plugin` section, from build-plugin.json and the plugin wheel."""
    bp, fp = records.build_plugin, BUILD_PLUGIN
    return {
        "name": _recorded(bp.name, "plugin.name", fp),
        "version": _recorded(bp.version, "plugin.version", fp),
        "repository": _recorded(bp.repository, "plugin.repository", fp),
        "commit": bp.commit,
        "wheel": describe_wheel(records.dist_dir, bp.wheel.filename, bp.wheel.sha256, fp, memo),
        "entry_points": _entry_points(bp),
        "reproducible": bp.reproducible,
    }


def _guard(records: Records, memo: Path | None = None) -> dict[str, Any] | None:
    """The manifest's `guard` section (vpr-guard's wheel), from build-guard.json; None
    without one."""
    bg, fg = records.build_guard, BUILD_GUARD
    if bg is None:
        return None
    return {
        "name": _recorded(bg.name, "guard.name", fg),
        "version": _recorded(bg.version, "guard.version", fg),
        "wheel": describe_wheel(records.dist_dir, bg.wheel.filename, bg.wheel.sha256, fg, memo),
        "entry_points": _entry_points(bg),
        "reproducible": bg.reproducible,
    }


def _container(build_core: BuildRecord) -> dict[str, Any] | None:
    backend = build_core.backend
    if backend is None or backend.kind != "docker":
        return None
    base = backend.base_image
    return {
        "base_image": base,
        "base_digest": base.split("@", 1)[1] if base and "@" in base else None,
        "image_id": backend.image_id,
    }


def _environment(env: EnvRecord | None) -> dict[str, Any]:
    if env is None:
        return {"status": "absent", "runner": None, "lock_file": None, "lock_sha256": None}
    return {
        "status": "present",
        "runner": env.runner,
        "lock_file": env.lock_file,
        "lock_sha256": env.lock_sha256,
    }


def pairing_id_of(spec: Spec, core: BuildRecord, plugin: BuildRecord) -> str:
    """The pairing id `build_manifest` gives these records (and the spec's runtime pins,
    as `pins_from_spec` takes them), without reading the wheels (the scorecard names it
    before the manifest exists); BadInput naming the record's key that is missing."""
    fc, fp = BUILD_CORE, BUILD_PLUGIN
    source = _recorded(core.source, "core.source", fc)
    inputs = PairingInputs(
        core_name=_recorded(core.name, "core.name", fc),
        core_version=_recorded(core.version, "core.version", fc),
        target_device=_recorded(core.target_device, "core.target_device", fc),
        source=_source_pin(_core_source(dict(source), fc)),
        plugin_name=_recorded(plugin.name, "plugin.name", fp),
        plugin_commit=plugin.commit,
        runtime=_runtime_pins(dict(spec.runtime.raw) if spec.runtime else None),
        python=".".join(_recorded(core.python, "python", fc).split(".")[:2]),
    )
    return key_of(inputs.to_json())


def _source_pin(source: dict[str, Any]) -> SourcePin:
    """The pin of the manifest's `core.source` (a git commit or an sdist's sha256)."""
    return SourcePin(source.get("kind"), source.get("commit"), source.get("sha256"))


def _runtime_pins(pins: dict[str, Any] | None) -> RuntimePins | None:
    """The runtime pins a pairing id holds, read from the spec's `[runtime]` as written."""
    if not pins:
        return None
    return RuntimePins(
        pins.get("name"), pins.get("package"), pins.get("version"), pins.get("commit")
    )


def _pairing_inputs(
    core: dict[str, Any], plugin: dict[str, Any], runtime_pins: RuntimePins | None
) -> PairingInputs:
    """What identifies the pairing of the manifest's `core` and `plugin` sections."""
    return PairingInputs(
        core_name=core["name"],
        core_version=core["version"],
        target_device=core["target_device"],
        source=_source_pin(core["source"]),
        plugin_name=plugin["name"],
        plugin_commit=plugin["commit"],
        runtime=runtime_pins,
        python=".".join(core["python"].split(".")[:2]),
    )


_T = TypeVar("_T")


def _recorded(value: _T | None, dotted: str, file: str) -> _T:
    if value is None:
        raise problem(file, f"missing key {dotted!r}")
    return value


def build_manifest(
    pins: SpecPins,
    records: Records,
    *,
    pipeline_version: str | None = None,
    wheel_memo: Path | None = None,
) -> dict[str, Any]:
    """The manifest for one pairing, as plain data (validated against the schema).
    `wheel_memo`: where the wheels' file facts are kept by sha256 (`describe_wheel`)."""
    if pipeline_version is None:
        from vllm_plugin_release import __version__ as pipeline_version
    sde = records.build_core.source_date_epoch
    if sde is None:
        sde = pins.core.source_date_epoch
    core = _core(records, pins, wheel_memo)
    plugin = _plugin(records, wheel_memo)
    container = _container(records.build_core)
    environment = _environment(records.env)
    runtime_pins = None if pins.runtime is None else pins.runtime.pins
    inputs = _pairing_inputs(core, plugin, runtime_pins).to_json()
    approval = pins.api_approval
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "name": pins.name or records.dist_dir.name,
        "pairing_id": key_of(inputs),
        "pairing_inputs": inputs,
        # The vLLM source date (SOURCE_DATE_EPOCH), never the certification time: that is
        # not deterministic and lives in run.json and the store entry.
        "source_date": _iso(sde),
        "source_date_epoch": sde,
        "pipeline": {"name": "vllm-plugin-release", "version": pipeline_version},
        "core": core,
        "plugin": plugin,
        "runtime": _runtime(records.env, runtime_pins),
        "container": container,
        "environment": environment,
        "conformance": conformance(records.scorecard),
        "guard": _guard(records, wheel_memo),
        # the platform class vLLM resolved in the pairing environment (never the stand-in
        # overlay's, a test double's), and the runner; None without env.json
        "platform": None
        if records.env is None
        else {
            "resolved": records.env.platform,
            "runner": records.env.runner,
        },
        "api_approval": None if approval is None else approval.as_json(),
    }
    validate(manifest, str(records.dist_dir / MANIFEST_FILE))
    return manifest


# ---------------------------------------------------------------------------
# Writing dist/NAME/ (what `vpr manifest build` and the release pipeline call)


@dataclass(frozen=True)
class Built:
    manifest: Manifest  # as written (its `raw` is the object signed)
    manifest_path: Path
    statement_path: Path
    run_path: Path
    key_path: Path
    public_key_path: Path
    keyid: str
    key_created: bool


def dist_dir_for(spec: Spec, dist_root: Path | str = "dist") -> Path:
    """dist/NAME/ (the `--dist` root is relative to the working folder, as for build-core)."""
    return Path(dist_root) / spec.name


def _write_if_changed(path: Path, data: bytes) -> None:
    from vllm_plugin_release.core.cache import atomic_write_bytes

    if path.exists() and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def write_signed(
    dist_dir: Path, manifest: dict[str, Any], pins: SpecPins, key_path: Path
) -> tuple[Path, Path, str]:
    """Write manifest.json and the signed manifest.intoto.jsonl; returns (paths..., keyid)."""
    key = keys.load_private_key(key_path)
    manifest_path = dist_dir / MANIFEST_FILE
    statement_path = dist_dir / STATEMENT_FILE
    typed = parse(manifest, str(manifest_path))
    data = file_bytes(typed)
    signed = attest.sign_pairing(
        typed, data, pins, key, builder_id=keys.builder_id(), invocation_id=keys.invocation_id()
    )
    _write_if_changed(manifest_path, data)
    _write_if_changed(statement_path, signed)
    return manifest_path, statement_path, attest.keyid(key.public_key())


def update_run_record(dist_dir: Path, section: str, data: dict[str, Any]) -> Path:
    """Merge run-specific data (host, wall times) into dist/NAME/run.json under `section`."""
    from vllm_plugin_release.core.cache import write_json

    path = dist_dir / RUN_FILE
    kept = run_file(dist_dir)  # bounded; the other sections as written
    write_json(path, {**kept.raw, section: data})
    return path


def _run_facts(started: float, finished: float, signing_key: dict[str, str]) -> dict[str, Any]:
    """What run.json records about this run (host, wall times: never in the manifest)."""
    from vllm_plugin_release import __version__

    return {
        **runner.host_facts().to_json(),
        "started": _iso(int(started)),
        "finished": _iso(int(finished)),
        "seconds": round(finished - started, 3),
        "pipeline_version": __version__,
        "builder_id": keys.builder_id(),
        "signing_key": signing_key,
    }


def build_for_spec(
    spec: Spec,
    *,
    signing_key: str | Path | None = None,
    dist_root: Path | str = "dist",
    cache: Cache,
) -> Built:
    """Read dist/NAME/'s stage records, write manifest.json, the signed statement, run.json."""
    import time

    from vllm_plugin_release import __version__

    started = time.time()
    dist = dist_dir_for(spec, dist_root)
    key_path, origin = keys.resolve_key_path(
        signing_key, spec.publish.signing_key, root=spec.root, cache_root=cache.root
    )
    records = read_records(dist, str(spec.path))
    pins = pins_from_spec(spec)
    manifest = build_manifest(
        pins, records, pipeline_version=__version__, wheel_memo=cache.root / "stages" / WHEEL_FACTS
    )
    created = keys.ensure_key(key_path, origin)
    manifest_path, statement_path, kid = write_signed(dist, manifest, pins, key_path)
    finished = time.time()
    key_facts = {"path": str(key_path), "origin": origin, "keyid": kid}
    run_path = update_run_record(dist, "manifest", _run_facts(started, finished, key_facts))
    return Built(
        manifest=parse(manifest, str(manifest_path)),
        manifest_path=manifest_path,
        statement_path=statement_path,
        run_path=run_path,
        key_path=key_path,
        public_key_path=keys.public_path(key_path),
        keyid=kid,
        key_created=created,
    )
