"""The pairing ledger (`STORE/ledger/ledger.jsonl`), pure: one signed, chained entry per verdict
(fields: docs/upstream.md); a read refuses it at its first bad line. Files: `edges.trust`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded, signed
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.storehead import count_ok

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from vllm_plugin_release.core.manifestmodel import Manifest

LEDGER_FILE = "ledger/ledger.jsonl"
PAYLOAD_TYPE = "application/vnd.vllm-plugin-release.ledger-entry+json"
GENESIS = "0" * 64
KINDS = ("release", "nightly")  # the kinds of a manifest's verdict (`entry_from_manifest`)
MATRIX = "matrix"  # a version matrix column's outcome (`entry_from_column`)
REPAIR = "repair"  # a store file restored by a writer: no verdict


def line_digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


@dataclass(frozen=True, slots=True)
class Party:
    """The core or the plugin an entry names."""

    name: str | None
    version: str | None
    commit: str | None

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Lag:
    """How far the pairing's core is behind the newest one, when known."""

    days: int | None
    minor_releases: int | None

    def to_json(self) -> dict[str, int | None]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Repair:
    """A store file a writer found differing from the store's signed head, and what it put in its
    place; `head_version`: the head that vouched for the signed one."""

    file: str
    found: str
    signed: str
    head_version: int
    restored: str

    def to_json(self) -> dict[str, str | int]:
        return asdict(self)

    def line(self) -> str:
        """The repair in one line, as a writer says it and the ledger's text shows it."""
        return (
            f"{self.file}: not the file the store's signed head (version {self.head_version}) "
            f"vouches for (found {self.found}; signed {self.signed}); restored: {self.restored}"
        )


@dataclass(frozen=True, slots=True)
class ColumnEntry:
    """A matrix entry's `column` as signed (`core.columns.ledger_column`; its shape checked by
    `column_problem` when read): the payload kept as written, read by key."""

    raw: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)


@dataclass(frozen=True, slots=True)
class Draft:
    """An entry before its place in the chain (`chained`): what a verdict says."""

    kind: str
    pairing_id: str | None
    core: Party
    plugin: Party
    runtime: tuple[str | None, str | None]  # (name, status)
    python: str | None
    verdict: str | None
    runner: str | None
    time: str | None
    manifest_sha256: str | None
    lag: Lag | None = None
    column: ColumnEntry | None = None  # a matrix column's (kind matrix)
    repair: Repair | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry's keys as written (without seq and prev), in the order written."""
        entry: dict[str, Any] = {
            "kind": self.kind,
            "pairing_id": self.pairing_id,
            "core": self.core.to_json(),
            "plugin": self.plugin.to_json(),
            "runtime": {"name": self.runtime[0], "status": self.runtime[1]},
            "python": self.python,
            "verdict": self.verdict,
            "runner": self.runner,
            "time": self.time,
            "manifest_sha256": self.manifest_sha256,
        }
        if self.lag is not None:
            entry["lag"] = self.lag.to_json()
        if self.column is not None:
            entry["column"] = dict(self.column.raw)
        if self.repair is not None:
            entry["repair"] = self.repair.to_json()
        return entry


def repair_entry(repair: Repair, time: str) -> Draft:
    """A ledger entry (without seq/prev) for a store file a writer restored: no verdict."""
    nobody = Party(None, None, None)
    return Draft(
        REPAIR, None, nobody, nobody, (None, None), None, None, None, time, None, repair=repair
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry(Draft):
    """One entry of the ledger as read, its shape checked, numbered by its place in the chain;
    `raw`: the signed payload as written."""

    seq: int
    raw: dict[str, Any]


def entry_from_manifest(
    manifest: Manifest,
    *,
    manifest_sha256: str,
    runner: str,
    time: str,
    kind: str = "release",
    lag: Lag | None = None,
) -> Draft:
    """A ledger entry (without seq/prev) for the verdict a manifest carries."""
    if kind not in KINDS:
        raise BadInput(f"ledger kind {kind!r}: expected one of {', '.join(KINDS)}")
    core, plugin, runtime = manifest.core, manifest.plugin, manifest.runtime
    return Draft(
        kind=kind,
        pairing_id=manifest.pairing_id,
        core=Party(core.name, core.version, core.commit),
        plugin=Party(plugin.name, plugin.version, plugin.commit),
        runtime=(runtime.name, runtime.status),
        python=".".join(str(core.python).split(".")[:2]),
        verdict=manifest.verdict,
        runner=runner,
        time=time,
        manifest_sha256=manifest_sha256,
        lag=lag,
    )


def entry_from_column(
    core: Party,
    plugin: Party,
    *,
    python: str | None,
    runtime: str | None,
    time: str,
    column: ColumnEntry,
) -> Draft:
    """A ledger entry (without seq/prev) for one version matrix column (the cpu runner's)."""
    return Draft(
        kind=MATRIX,
        pairing_id=None,
        core=core,
        plugin=plugin,
        runtime=(runtime, None),
        python=python,
        verdict=str(column["outcome"]),
        runner="cpu",
        time=time,
        manifest_sha256=None,
        column=column,
    )


def chained(entry: Draft, previous_line: bytes | None, count: int) -> LedgerEntry:
    """`entry` with its place in the chain: seq (1-based) and the previous line's digest."""
    prev = line_digest(previous_line) if previous_line else GENESIS
    raw = {"seq": count + 1, "prev": prev, **entry.to_json()}
    kept = {f.name: getattr(entry, f.name) for f in fields(Draft)}
    return LedgerEntry(seq=count + 1, raw=raw, **kept)


def sign_line(entry: LedgerEntry, key: Ed25519PrivateKey) -> bytes:
    return signed.sign(signed.payload_of(entry.raw), PAYLOAD_TYPE, key)


_NONE = bounded.NONE
# What select, matrix and the renderers read from an entry (seq and prev are checked apart).
_ENTRY_SHAPE = bounded.shape(
    (
        ("kind", (str,)),
        ("pairing_id", (str, _NONE)),
        ("core.name", (str, _NONE)),
        ("core.version", (str, _NONE)),
        ("core.commit", (str, _NONE)),
        ("plugin.name", (str, _NONE)),
        ("plugin.version", (str, _NONE)),
        ("plugin.commit", (str, _NONE)),
        ("python", (str, _NONE)),
        ("verdict", (str, _NONE)),
        ("runner", (str, _NONE)),
        ("time", (str, _NONE)),
        ("manifest_sha256", (str, _NONE)),
        ("lag", (dict, _NONE)),
        ("column", (dict, _NONE)),
    )
)
# What the site and `render_lines` read of a matrix entry's column (`core.columns`).
_COLUMN_SHAPE = bounded.shape(
    (
        ("key", (str,)),
        ("record_sha256", (str,)),
        ("against", (str, _NONE)),
        ("role", (str,)),
        ("outcome", (str,)),
        ("exit_class", (int,)),
        ("reason", (str,)),
        ("python_why", (str,)),
        ("counts", (dict,)),
        ("modules", (int,)),
        ("imports_failing", (int,)),
        ("regressions", (int,)),
        ("import_regressions", (int,)),
        ("breaking", (list,)),
        ("breaking_total", (int,)),
        ("bisect", (dict, _NONE)),
    )
)
OUTCOMES = ("pass", "fail", "regressed", "not-run")
_COUNTS = ("passed", "failed", "error", "skipped", "deferred")
_BISECT = ("mode", "source", "last_good", "first_bad", "subject")


def column_problem(column: Any) -> str | None:
    """Why a matrix entry's `column` is not one (what the site reads of it), else None."""
    problem = bounded.shape_problem(column, _COLUMN_SHAPE)
    if problem:
        return f"column: {problem}"
    if column["outcome"] not in OUTCOMES:
        return f"'column.outcome' is {bounded.shown(column['outcome'])}, expected one of " + (
            ", ".join(OUTCOMES)
        )
    counts = column["counts"]
    numbers = [column[k] for k in ("exit_class", "modules", "imports_failing", "regressions")]
    numbers += [column["import_regressions"], column["breaking_total"]]
    if not all(count_ok(n) for n in numbers) or not all(count_ok(counts.get(k)) for k in _COUNTS):
        return "'column' holds a count that is not one"
    if not all(isinstance(b, str) for b in column["breaking"]):
        return "'column.breaking' is not a list of text"
    bisect = column["bisect"]
    if bisect is not None and not all(isinstance(bisect.get(k), str) for k in _BISECT):
        return "'column.bisect' is not " + ", ".join(_BISECT) + " as text"
    return None


_REPAIR_SHAPE = bounded.shape(
    (
        ("repair.file", (str,)),
        ("repair.found", (str,)),
        ("repair.signed", (str,)),
        ("repair.head_version", (int,)),
        ("repair.restored", (str,)),
    )
)
_HINT = "the ledger is append-only: restore the store's ledger from its last good copy"


def entry_problem(entry: Any) -> str | None:
    """Why a signed payload is not a ledger entry (what select, matrix and the renderers read of
    it), else None; seq and prev are the chain's to check."""
    problem = bounded.shape_problem(entry, _ENTRY_SHAPE)
    if problem is None and entry.get("kind") == REPAIR:
        problem = bounded.shape_problem(entry, _REPAIR_SHAPE)
    lag = entry.get("lag") if problem is None else None
    if lag is not None:
        for name in ("days", "minor_releases"):
            value = lag.get(name)
            if not (value is None or (isinstance(value, int) and not isinstance(value, bool))):
                return f"'lag.{name}' is {bounded.shown(value)}, expected int or null"
    if problem is None and entry.get("kind") == MATRIX:
        return column_problem(entry.get("column"))
    return problem


def is_seq(value: Any, seq: int) -> bool:
    """Whether `value` is the number `seq` (JSON true is not 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value == seq


def _party(value: dict[str, Any]) -> Party:
    return Party(value.get("name"), value.get("version"), value.get("commit"))


def entry_from(raw: dict[str, Any], seq: int) -> LedgerEntry:
    """A payload `entry_problem` found no fault in, as the entry numbered `seq`."""
    lag, runtime = raw.get("lag"), raw.get("runtime")
    runtime = runtime if isinstance(runtime, dict) else {}  # not read before: its shape is free
    return LedgerEntry(
        seq=seq,
        kind=raw["kind"],
        pairing_id=raw.get("pairing_id"),
        core=_party(raw["core"]),
        plugin=_party(raw["plugin"]),
        runtime=(runtime.get("name"), runtime.get("status")),
        python=raw.get("python"),
        verdict=raw.get("verdict"),
        runner=raw.get("runner"),
        time=raw.get("time"),
        manifest_sha256=raw.get("manifest_sha256"),
        lag=Lag(lag.get("days"), lag.get("minor_releases")) if lag else None,  # {}: none
        raw=raw,
        column=ColumnEntry(raw["column"]) if raw["kind"] == MATRIX else None,
        repair=Repair(*(raw["repair"][f.name] for f in fields(Repair)))
        if raw["kind"] == REPAIR
        else None,
    )


def parse_ledger(
    data: bytes, public_key: Ed25519PublicKey, where: str, *, vouched: bool = False
) -> list[LedgerEntry]:
    """Every entry, oldest first, its signature, shape and chain link checked. `vouched`: a signed
    store head names `data` by sha256, so each line's own signature is not checked again."""
    entries: list[LedgerEntry] = []
    previous: bytes | None = None
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        here = f"{where}:{number}"
        if not line.endswith(b"\n"):
            raise GateFailed(f"{here}: the last line is cut short (a torn write)", hint=_HINT)
        if vouched:
            payload = signed.unverified(line, PAYLOAD_TYPE, here, what="ledger entry", hint=_HINT)
        else:
            payload = signed.verify(
                line, PAYLOAD_TYPE, public_key, here, what="ledger entry", hint=_HINT
            )
        entry = signed.body(payload, here, _HINT)
        problem = entry_problem(entry)
        if problem:
            raise BadInput(
                f"{here}: a signed entry that is not a ledger entry ({problem})",
                hint="the ledger was written by something other than vpr; restore it",
            )
        expected = line_digest(previous) if previous else GENESIS
        if not is_seq(entry.get("seq"), number) or entry.get("prev") != expected:
            raise GateFailed(
                f"{here}: the chain is broken (seq {entry.get('seq')}, expected {number}): "
                "an entry was removed, reordered or inserted",
                hint=_HINT,
            )
        entries.append(entry_from(entry, number))
        previous = line
    return entries


def select(
    entries: Iterable[LedgerEntry],
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
) -> list[LedgerEntry]:
    """The entries matching every filter given (core: version or commit prefix)."""
    out = []
    for e in entries:
        c = e.core
        if core and core != c.version and not str(c.commit or "").startswith(core):
            continue
        p = e.plugin
        if plugin and plugin != p.name and not str(p.commit or "").startswith(plugin):
            continue
        if verdict and e.verdict != verdict:
            continue
        if kind and e.kind != kind:
            continue
        out.append(e)
    return out


def _core_label(e: LedgerEntry) -> str:
    c = e.core
    if e.kind == "nightly" and c.commit:
        return f"{c.version}@{c.commit[:12]}"
    return str(c.version)


def _plugin_label(e: LedgerEntry) -> str:
    p = e.plugin
    return f"{p.name}@{(p.commit or 'no-commit')[:12]}"


@dataclass(frozen=True, slots=True)
class Matrix:
    """The compatibility matrix: the latest entry per (core, plugin) label."""

    cores: list[str]
    plugins: list[str]
    cells: dict[str, LedgerEntry]  # "CORE | PLUGIN" -> its latest entry

    def to_json(self) -> dict[str, Any]:
        return {
            "cores": self.cores,
            "plugins": self.plugins,
            "cells": {
                label: {
                    "verdict": e.verdict,
                    "seq": e.seq,
                    "kind": e.kind,
                    "lag": e.raw.get("lag"),
                }
                for label, e in self.cells.items()
            },
        }


def matrix(entries: Iterable[LedgerEntry]) -> Matrix:
    cells: dict[tuple[str, str], LedgerEntry] = {}
    for e in entries:
        if e.kind == REPAIR:  # no pairing, no verdict
            continue
        cells[(_core_label(e), _plugin_label(e))] = e  # later entries win
    return Matrix(
        cores=sorted({c for c, _ in cells}),
        plugins=sorted({p for _, p in cells}),
        cells={f"{c} | {p}": e for (c, p), e in sorted(cells.items())},
    )


def render_matrix_markdown(m: Matrix) -> str:
    lines = ["| core \\ plugin | " + " | ".join(m.plugins) + " |"]
    lines.append("|---" * (len(m.plugins) + 1) + "|")
    for core in m.cores:
        row = []
        for plugin in m.plugins:
            cell = m.cells.get(f"{core} | {plugin}")
            row.append(f"{cell.verdict} (#{cell.seq})" if cell else "")
        lines.append(f"| {core} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def matrix_text(m: Matrix, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(m.to_json(), indent=2, sort_keys=True) + "\n"
    return render_matrix_markdown(m)


def render_lines(entries: Iterable[LedgerEntry]) -> str:
    """One line per entry, for a terminal or a job summary."""
    out = []
    for e in entries:
        if e.repair is not None:
            out.append(f"#{e.seq} {e.time} {REPAIR:<7} {e.repair.line()}")
            continue
        lag = e.lag
        lag_text = f"  lag {lag.days} d / {lag.minor_releases} minor" if lag else ""
        col = e.column
        if col is not None:
            tail = f"  {_column_text(col)}  record sha256:{str(col['record_sha256'])[:16]}"
        else:
            tail = f"{lag_text}  manifest sha256:{str(e.manifest_sha256)[:16]}"
        out.append(
            f"#{e.seq} {e.time} {e.kind:<7} {_core_label(e)} + "
            f"{_plugin_label(e)}: {e.verdict} ({e.runner}, py{e.python}){tail}"
        )
    return "\n".join(out)


def _column_text(col: ColumnEntry) -> str:
    if col["outcome"] == "not-run":
        return f"exit {col['exit_class']}: {str(col['reason'])[:120]}"
    c = col["counts"]
    text = f"{c['passed']} passed, {c['failed'] + c['error']} failed, {c['deferred']} deferred"
    if col.get("against"):
        text += f" (against {col['against']})"
    if col["breaking"]:
        more = col["breaking_total"] - 1
        text += f"; breaking {col['breaking'][0]}" + (f" +{more}" if more else "")
    return text
