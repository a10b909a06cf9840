"""The version matrix's records: one column record per core (dist/NAME/matrix/CORE.json),
and matrix.json / matrix.md assembled from them, the same bytes wherever the columns ran."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.ledger import ColumnEntry

SCHEMA = 1
FOLDER = "matrix"  # dist/NAME/matrix/: the column records
REPORT_JSON = "matrix.json"
REPORT_MD = "matrix.md"
MAX_COLUMN = 16 * bounded.MiB
# A column's label names its record file: a release version, or REF@COMMIT for core main.
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}(@[0-9a-f]{7,40})?$")
COUNT_KEYS = ("passed", "failed", "error", "skipped", "deferred")
PLUGIN_KEYS = ("name", "version", "commit")


def record_path(folder: Path, label: str) -> Path:
    """The record file of the column `label`; BadInput for a label unfit for a file name."""
    if not _LABEL.match(label):
        raise BadInput(f"{label!r}: not a core version or REF@COMMIT", hint="check the column")
    return folder / f"{label}.json"


@dataclass(frozen=True, slots=True)
class PythonChoice:
    """The Python a column pairs on, and why (None: no Python fits both sides)."""

    python: str | None
    why: str


def choose_python(
    requires: str | None, preferred: str, candidates: Sequence[str], core: str
) -> PythonChoice:
    """The spec's own Python while the core's `Requires-Python` accepts it (columns stay
    comparable), else the newest of `candidates` it accepts; None when nothing fits."""
    ordered = sorted(set(candidates) | {preferred}, key=Version, reverse=True)
    try:
        spec = SpecifierSet(requires or "")
    except InvalidSpecifier:
        return PythonChoice(None, f"{core} declares an unreadable Requires-Python {requires!r}")
    said = f"Requires-Python {requires}" if requires else "no Requires-Python"
    if spec.contains(preferred + ".0", prereleases=True):
        return PythonChoice(preferred, f"the spec's Python; {core} ({said}) accepts it")
    fits = [py for py in ordered if spec.contains(py + ".0", prereleases=True)]
    offered = ", ".join(sorted(ordered, key=Version))
    if not fits:
        return PythonChoice(None, f"{core} ({said}) accepts none of {offered}")
    return PythonChoice(
        fits[0],
        f"{core} ({said}) refuses the spec's {preferred}: the newest of {offered} it accepts",
    )


class ChangeRef(NamedTuple):
    id: str
    detail: str


@dataclass(frozen=True, slots=True)
class Coupling:
    """A column's coupling report against the column before, as the record keeps it (the
    report's JSON with `against` and the tracer's `traced`, or an error with its `reason`)."""

    raw: Mapping[str, Any]

    @property
    def against(self) -> str | None:
        value = self.raw.get("against")
        return value if isinstance(value, str) else None

    @property
    def changes(self) -> list[ChangeRef]:
        found = self.raw.get("changes")
        items = found if isinstance(found, list) else []
        return [
            ChangeRef(str(c.get("id")), str(c.get("detail", "")))
            for c in items
            if isinstance(c, dict)
        ]

    @property
    def traced(self) -> dict[str, tuple[str, ...]]:
        """The tracer's answer: failing module or test -> the change ids that explain it."""
        found = self.raw.get("traced")
        if not isinstance(found, dict):
            return {}
        return {str(k): tuple(str(i) for i in v) for k, v in found.items() if isinstance(v, list)}


@dataclass(frozen=True, slots=True)
class Column:
    """One core of the matrix: what ran on it, or why nothing could."""

    core: str  # a version, or REF@COMMIT for core main
    role: str  # release | pinned | main (lowest: the first column, given when assembled)
    key: str  # the hash of every input: a re-run reuses a record with the same key
    python: str | None
    python_why: str
    status: str  # tested | not-run
    exit_class: int  # 0 tested; else the class of what stopped it (1, 2, 3)
    reason: str = ""  # not-run: what stopped it
    imports: Mapping[str, str] = field(default_factory=dict)  # failed module -> first line
    modules: int = 0  # the plugin's modules tried
    counts: Mapping[str, int] = field(default_factory=dict)
    outcomes: Mapping[str, str] = field(default_factory=dict)  # test id -> outcome
    errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    coupling: Coupling | None = None  # against the column before: the report
    plugin: Mapping[str, str | None] | None = None  # {name, version, commit} it tested

    @property
    def tested(self) -> bool:
        return self.status == "tested"

    @property
    def failing(self) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in ("failed", "error"))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "core": self.core,
            "role": self.role,
            "key": self.key,
            "python": self.python,
            "python_why": self.python_why,
            "status": self.status,
            "exit_class": self.exit_class,
            "reason": self.reason,
            "modules": self.modules,
            "imports": dict(sorted(self.imports.items())),
            "counts": {k: int(self.counts.get(k, 0)) for k in COUNT_KEYS},
            "outcomes": dict(sorted(self.outcomes.items())),
            "errors": {t: list(v) for t, v in sorted(self.errors.items())},
            # keys sorted at every level, as the record file has them: a column read back
            # from its record and one still in memory give matrix.json the same bytes
            "coupling": None
            if self.coupling is None
            else json.loads(json.dumps(self.coupling.raw, sort_keys=True)),
            "plugin": None if self.plugin is None else dict(self.plugin),
        }


def not_run(
    core: str, role: str, key: str, python: PythonChoice, exit_class: int, reason: str
) -> Column:
    return Column(core, role, key, python.python, python.why, "not-run", exit_class, reason=reason)


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where}: expected an object of text")
    return dict(value)


def parse_column(data: Any, path: Path) -> Column:
    """A column record read back (hostile until checked): BadInput naming the file and key."""
    try:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"schema: expected {SCHEMA}")
        text = {k: data.get(k) for k in ("core", "role", "key", "python_why", "status", "reason")}
        for k, v in text.items():
            if not isinstance(v, str):
                raise ValueError(f"{k}: expected text")
        if data.get("python") is not None and not isinstance(data["python"], str):
            raise ValueError("python: expected text or null")
        if text["status"] not in ("tested", "not-run"):
            raise ValueError("status: expected tested or not-run")
        if data.get("exit_class") not in (0, 1, 2, 3) or not isinstance(data["modules"], int):
            raise ValueError("exit_class, modules: expected 0-3 and a count")
        counts = data.get("counts")
        if not isinstance(counts, dict) or not all(
            isinstance(counts.get(k), int) for k in COUNT_KEYS
        ):
            raise ValueError("counts: expected a count for each of " + ", ".join(COUNT_KEYS))
        errors = data.get("errors")
        if not isinstance(errors, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in errors.values()
        ):
            raise ValueError("errors: expected an object of lists of text")
        coupling = data.get("coupling")
        if coupling is not None and not isinstance(coupling, dict):
            raise ValueError("coupling: expected an object or null")
        plugin = data.get("plugin")
        if plugin is not None and (
            not isinstance(plugin, dict)
            or set(plugin) != set(PLUGIN_KEYS)
            or not all(v is None or isinstance(v, str) for v in plugin.values())
        ):
            raise ValueError("plugin: expected null or {name, version, commit} of text")
        if path.stem != text["core"] or not _LABEL.match(text["core"]):
            raise ValueError(f"core: {text['core']!r} is not this file's column")
        return Column(
            **text,  # core, role, key, python_why, status, reason
            python=data.get("python"),
            exit_class=data["exit_class"],
            imports=_str_map(data.get("imports"), "imports"),
            modules=data["modules"],
            counts={k: counts[k] for k in COUNT_KEYS},
            outcomes=_str_map(data.get("outcomes"), "outcomes"),
            errors={t: tuple(v) for t, v in errors.items()},
            coupling=None if coupling is None else Coupling(coupling),
            plugin=plugin,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{path}: not a column record: {exc}", hint="delete it; it is re-run")


def read_column(path: Path) -> Column | None:
    """The column record at `path` (None: there is none); BadInput when it is not one."""
    try:
        data = bounded.loads(bounded.read_file(path, MAX_COLUMN, "column record"))
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{path}: not a column record ({exc})", hint="delete it; it is re-run")
    return parse_column(data, path)


def write_column(folder: Path, column: Column) -> Path:
    from vllm_plugin_release.core.cache import write_json

    path = record_path(folder, column.core)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(path, column.to_json())
    return path


def column_order(label: str) -> tuple[int, Version | str]:
    """Releases oldest first, then core main's columns."""
    try:
        return (0, Version(label))
    except InvalidVersion:
        return (1, label)


def read_folder(folder: Path) -> list[Column]:
    """Every column record in `folder`, in column order (the assembly of CI jobs' records)."""
    found = [read_column(p) for p in sorted(folder.glob("*.json"))]
    return sorted((c for c in found if c is not None), key=lambda c: column_order(c.core))


# Assembly: regressions between neighbouring columns and the coupling's accuracy.


@dataclass(frozen=True, slots=True)
class Assembled:
    """A column with what only its neighbours tell."""

    column: Column
    role: str
    against: str | None  # the tested column before it
    regressions: tuple[str, ...]  # tests that passed there and fail here
    import_regressions: tuple[str, ...]  # modules that imported there and fail here
    traced: Mapping[str, tuple[str, ...]]  # observed failure -> the change ids that explain it
    missed: tuple[str, ...]
    confirmed: tuple[str, ...]  # breaking change ids a failure confirms
    breaking: tuple[str, ...]  # every breaking change id reported for this column

    def to_json(self) -> dict[str, Any]:
        out = self.column.to_json()
        del out["schema"], out["key"], out["plugin"]  # the plugin: the ledger entry's
        out["role"] = self.role
        out["against"] = self.against
        out["regressions"] = list(self.regressions)
        out["import_regressions"] = list(self.import_regressions)
        out["accuracy"] = {
            "traced": {k: list(v) for k, v in sorted(self.traced.items())},
            "missed": list(self.missed),
            "confirmed": list(self.confirmed),
            "breaking": list(self.breaking),
        }
        return out


def breaking_ids(column: Column) -> tuple[str, ...]:
    changes = column.coupling.changes if column.coupling else []
    return tuple(sorted(c.id for c in changes))


def observed_failures(column: Column, regressions: Sequence[str]) -> dict[str, str]:
    """What a coupling report should explain on this column: every plugin module that does
    not import, and every test that regressed; each with its error text."""
    out = {f"import {m}": err for m, err in column.imports.items()}
    for test in regressions:
        out[f"test {test}"] = "\n".join(column.errors.get(test, ()))
    return out


def traced_failures(column: Column, observed: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The observed failures the tracer (run with the column) traced to change ids."""
    traced = column.coupling.traced if column.coupling else {}
    out: dict[str, tuple[str, ...]] = {}
    for key in observed:
        ids = traced.get(key.split(" ", 1)[1])
        if ids:
            out[key] = ids
    return out


def assemble(columns: Sequence[Column]) -> list[Assembled]:
    """The columns in order, each with its regressions against the tested column before
    it and which of its failures its coupling report explains."""
    out: list[Assembled] = []
    before: Column | None = None
    for i, col in enumerate(columns):
        role = "lowest" if i == 0 and col.role == "release" else col.role
        regressions: tuple[str, ...] = ()
        lost: tuple[str, ...] = ()
        if before is not None and col.tested:
            regressions = tuple(t for t in col.failing if before.outcomes.get(t) == "passed")
            lost = tuple(sorted(m for m in col.imports if m not in before.imports))
        observed = observed_failures(col, regressions) if col.tested else {}
        traced = traced_failures(col, observed)
        hit = {i for ids in traced.values() for i in ids}
        confirmed = tuple(i for i in breaking_ids(col) if i in hit)
        missed = tuple(sorted(k for k in observed if not traced.get(k)))
        out.append(
            Assembled(
                col,
                role,
                before.core if before is not None and col.tested else None,
                regressions,
                lost,
                {k: v for k, v in traced.items() if v},
                missed,
                tuple(sorted(confirmed)),
                breaking_ids(col),
            )
        )
        if col.tested:
            before = col
    return out


@dataclass(frozen=True, slots=True)
class Accuracy:
    """The coupling report's accuracy across the matrix: recall (observed failures traced to a
    reported change) and precision (breaking changes a failure confirms)."""

    observed: int
    traced: int
    recall: float | None
    breaking: int
    confirmed: int
    precision: float | None
    missed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "missed": list(self.missed)}


@dataclass(frozen=True, slots=True)
class Matrix:
    """matrix.json: the pairing across cores."""

    pairing: str
    core: str
    index: str
    columns: tuple[Assembled, ...]

    @property
    def regressed(self) -> bool:
        return any(a.regressions or a.import_regressions for a in self.columns)

    def accuracy(self) -> Accuracy:
        observed = sum(len(a.traced) + len(a.missed) for a in self.columns)
        traced = sum(len(a.traced) for a in self.columns)
        breaking = sum(len(a.breaking) for a in self.columns)
        confirmed = sum(len(a.confirmed) for a in self.columns)
        return Accuracy(
            observed=observed,
            traced=traced,
            recall=round(traced / observed, 4) if observed else None,
            breaking=breaking,
            confirmed=confirmed,
            precision=round(confirmed / breaking, 4) if breaking else None,
            missed=tuple(f"{a.column.core}: {m}" for a in self.columns for m in a.missed),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pairing": self.pairing,
            "core": self.core,
            "index": self.index,
            "accuracy": self.accuracy().to_json(),
            "columns": [a.to_json() for a in self.columns],
        }


def render_json(m: Matrix) -> str:
    return json.dumps(m.to_json(), indent=2, sort_keys=False) + "\n"


def _counts(col: Column) -> tuple[str, str, str]:
    if not col.tested:
        return ("-", "-", "-")
    c = col.counts
    return (str(c["passed"]), str(c["failed"] + c["error"]), str(c["deferred"]))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def render_markdown(m: Matrix) -> str:
    out = [
        f"### Version matrix: {m.pairing} ({m.core} from {m.index})",
        "",
        "| core | role | Python | imports failing | passed | failed | deferred "
        "| regressions | breaking changes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in m.columns:
        col = a.column
        if not col.tested:
            out.append(
                f"| {col.core} | {a.role} | {col.python or 'none'} | not run (exit "
                f"{col.exit_class}) | - | - | - | - | {len(a.breaking)} |"
            )
            continue
        lost = len(a.regressions) + len(a.import_regressions)
        mark = f"**{lost}**" if lost else "none"
        passed, failed, deferred = _counts(col)
        out.append(
            f"| {col.core} | {a.role} | {col.python} | {len(col.imports)} of {col.modules} "
            f"| {passed} | {failed} | {deferred} | {mark} | {len(a.breaking)} |"
        )
    acc = m.accuracy()
    out += [
        "",
        f"Coupling report accuracy: recall {_pct(acc.recall)} ({acc.traced} of "
        f"{acc.observed} observed failures traced to a reported change), precision "
        f"{_pct(acc.precision)} ({acc.confirmed} of {acc.breaking} breaking changes "
        "confirmed by a failing import or test).",
    ]
    for a in m.columns:
        out += _column_notes(a)
    return "\n".join(out) + "\n"


def _column_notes(a: Assembled) -> list[str]:
    col = a.column
    out: list[str] = []
    if not col.tested:
        return ["", f"**{col.core}** not run: {col.reason}", f"  Python: {col.python_why}"]
    if col.imports:
        out += ["", f"**{col.core}** modules that do not import (Python {col.python}):"]
        out += [f"- `{m}`: {err}" for m, err in sorted(col.imports.items())]
    if a.regressions or a.import_regressions:
        out += ["", f"**{col.core}** regressed against {a.against}:"]
        out += [f"- module `{m}` no longer imports" for m in a.import_regressions]
        for test in a.regressions:
            first = (col.errors.get(test) or ("",))[0]
            out.append(f"- `{test}` {first}".rstrip())
    if a.breaking:
        against = (col.coupling.against if col.coupling else None) or col.core
        out += ["", f"**{col.core}** breaking coupling changes against {against}:"]
        for change in col.coupling.changes if col.coupling else []:
            mark = " (confirmed)" if change.id in a.confirmed else ""
            out.append(f"- `{change.id}`{mark}: {change.detail}")
    if a.missed:
        out += ["", f"**{col.core}** failures no reported change explains:"]
        out += [f"- {m}" for m in a.missed]
    return out


# A column as the pairing ledger records it (kind "matrix": core.ledger).

BREAKING_SHOWN = 5  # the first breaking change ids an entry carries (with their total)


def record_sha256(column: Column) -> str:
    """The column record's digest: its content as canonical JSON (not the file's layout)."""
    data = json.dumps(column.to_json(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def outcome(a: Assembled) -> str:
    """not-run; regressed (a test or module that passed on the tested column before fails
    here); fail (failures, none new against the column before); pass (every test that ran
    passed and every module imports)."""
    col = a.column
    if not col.tested:
        return "not-run"
    if a.regressions or a.import_regressions:
        return "regressed"
    return "fail" if col.failing or col.imports else "pass"


def plugin_of(columns: Sequence[Column]) -> Mapping[str, str | None]:
    """The plugin every record tested; BadInput when a record names none (written before
    records said) or the records are of different plugin commits."""
    found = {(c.plugin or {}).get("commit"): c for c in columns}
    unnamed = [c.core for c in columns if c.plugin is None]
    if unnamed:
        raise BadInput(
            f"column records {', '.join(unnamed)}: they do not say which plugin they tested",
            hint="run those columns again (`vpr matrix run --only VERSION`)",
        )
    if len(found) > 1:
        named = ", ".join(f"{c.core}: {str(k)[:12]}" for k, c in sorted(found.items(), key=str))
        raise BadInput(
            f"the column records are of different plugin commits ({named})",
            hint="assemble the records of one plugin commit: delete the others and re-run",
        )
    return dict(columns[0].plugin or {})


def ledger_column(
    a: Assembled, digests: Mapping[str, str], bisect: Mapping[str, str] | None
) -> ColumnEntry:
    """The ledger entry's `column` object for one assembled column; its `key` (the records and
    bisect report it speaks of) makes recording again a no-op."""
    col = a.column
    against = a.against
    ids = {
        "record_sha256": digests[col.core],
        "against_sha256": digests.get(against) if against else None,
        "bisect": dict(bisect) if bisect else None,
    }
    key = hashlib.sha256(json.dumps(ids, sort_keys=True).encode()).hexdigest()
    return ColumnEntry(
        {
            "key": key,
            "record_sha256": ids["record_sha256"],
            "against": against,
            "against_sha256": ids["against_sha256"],
            "role": a.role,
            "outcome": outcome(a),
            "exit_class": col.exit_class,
            "reason": col.reason,
            "python_why": col.python_why,
            "counts": {k: int(col.counts.get(k, 0)) for k in COUNT_KEYS},
            "modules": col.modules,
            "imports_failing": len(col.imports),
            "regressions": len(a.regressions),
            "import_regressions": len(a.import_regressions),
            # the first breaking change ids, those a failure confirms first
            "breaking": sorted(a.breaking, key=lambda i: (i not in a.confirmed, i))[
                :BREAKING_SHOWN
            ],
            "breaking_total": len(a.breaking),
            "bisect": ids["bisect"],
        }
    )


def bisect_range(report: Any, a: Assembled) -> dict[str, str] | None:
    """What a bisect report from the tested column before (`--good`) to this one (`--bad`)
    found: the last good and first bad commit or version."""
    if report is None or a.against is None or outcome(a) != "regressed":
        return None
    good, bad = (str(x).removeprefix("v") for x in (report.good, report.bad))
    if (good, bad) != (a.against, a.column.core):
        return None
    first = report.first_bad
    return {
        "mode": report.mode,
        "source": report.source,
        "last_good": report.last_good,
        "first_bad": first.candidate,
        "subject": first.subject,
    }
