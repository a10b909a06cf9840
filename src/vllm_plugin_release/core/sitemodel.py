"""The compatibility site as data (pure): what `vpr manifest site` shows and writes to
`compat.json`, from a store read through its signed head.

Inputs: the store's index entries, each with its manifest as verified (signature, the
manifest its statement signs, the sha256 the index names) or the reason it is not; the
ledger's entries (each line verified, the whole vouched for by the head); the store's
public location. Nothing here reads a file or the clock: the same store gives the same
data, and `siterender` turns it into the same bytes.

Each pairing has a cell per site (cpu, hardware): the verdict of the newest signed record
for that site (a release entry of the ledger, else the manifest when its runner is that
site), its release lag in days, and what signed it. A site with no record says `not run`,
never a pass. Each plugin the ledger's matrix entries name has its matrix across every
core (`PluginMatrix`): per core column the newest signed entry's outcome.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core.columns import column_order
from vllm_plugin_release.core.storeindex import (
    VERDICT_ORDER,
    VERDICTS,
    IndexEntry,
    PluginRef,
    python_of,
    superseded,
    version_ranks,
)

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Approval, Manifest

KIND = "vllm-plugin-release/compat"
SCHEMA_VERSION = 1
SITES = ("cpu", "hardware")
PAGES = "pairings"
PLUGIN_PAGES = "plugins"
_PAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_LAG = re.compile(r"\blag (\d+) minor, (\d+) days\b")


@dataclass(frozen=True)
class Stored:
    """One index entry and its manifest as verified (`manifest` None: `problem` says why)."""

    entry: IndexEntry
    manifest: Manifest | None
    problem: str | None


class Cell(NamedTuple):
    """One site's verdict for a pairing: the verdict, its release lag in days, what signed
    it (None: the site has not run it, never a pass), whether that signature verified
    (None when not run) and when."""

    verdict: str | None
    lag_days: int | None
    signed_by: str | None
    verified: bool | None
    time: str | None

    def to_json(self) -> dict[str, str | int | bool | None]:
        """compat.json's cell object."""
        return {
            "verdict": self.verdict,
            "lag_days": self.lag_days,
            "signed_by": self.signed_by,
            "verified": self.verified,
            "time": self.time,
        }


NOT_RUN = Cell(None, None, None, None, None)


class Sites(NamedTuple):
    """A pairing's cell per site, in `SITES`' order (its fields are `SITES`)."""

    cpu: Cell
    hardware: Cell


class Signature(NamedTuple):
    """Whether the pairing's manifest verified, and why not."""

    verified: bool
    problem: str | None


class HistoryLine(NamedTuple):
    """One ledger entry of a pairing, as its page lists it."""

    seq: int
    kind: str
    time: str | None
    runner: str | None
    verdict: str | None
    manifest_sha256: str | None
    lag_days: int | None

    def to_json(self) -> dict[str, str | int | None]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "time": self.time,
            "runner": self.runner,
            "verdict": self.verdict,
            "manifest_sha256": self.manifest_sha256,
            "lag_days": self.lag_days,
        }


class CompatPairing(NamedTuple):
    """One pairing of compat.json: its index entry (the name, core version, plugin, manifest
    sha256 and the runtime object as the entry has it), its page, core name and Python, its
    signature, a cell per site, the API approval its manifest signs, whether it carries
    vpr-guard, its `vpr install` line and its ledger history. (A NamedTuple: a store holds
    up to 100,000 pairings.)"""

    entry: IndexEntry
    page: str
    core_name: str
    python: str
    signature: Signature
    sites: Sites
    api_approval: Approval | None
    guard: bool
    install: str
    history: tuple[HistoryLine, ...]

    @property
    def pairing_id(self) -> str:
        return self.entry.pairing_id

    @property
    def core_version(self) -> str:
        return self.entry.core.version

    @property
    def plugin(self) -> PluginRef:
        return self.entry.plugin

    def to_json(self) -> dict[str, Any]:
        """compat.json's pairing object."""
        entry, plugin, approval = self.entry, self.entry.plugin, self.api_approval
        cpu, hardware = self.sites
        return {
            "pairing_id": entry.pairing_id,
            "page": self.page,
            "name": entry.name,
            "core": {"name": self.core_name, "version": entry.core.version},
            "plugin": {"name": plugin.name, "version": plugin.version, "commit": plugin.commit},
            "python": self.python,
            "runtime": entry.raw.get("runtime"),  # as the entry has it
            "manifest_sha256": entry.manifest_sha256,
            "signature": {"verified": self.signature.verified, "problem": self.signature.problem},
            "sites": {"cpu": cpu.to_json(), "hardware": hardware.to_json()},
            "api_approval": None if approval is None else approval.as_json(),
            "guard": self.guard,
            "install": self.install,
            "history": [h.to_json() for h in self.history],
        }


class Behind(NamedTuple):
    """A plugin whose pairings do not cover the newest core: its newest core and the
    pairing (id, page) that has it."""

    plugin: str
    newest_core: str
    pairing_id: str
    page: str

    def to_json(self) -> dict[str, str]:
        return {
            "plugin": self.plugin,
            "newest_core": self.newest_core,
            "pairing_id": self.pairing_id,
            "page": self.page,
        }


@dataclass(frozen=True)
class NewestCore:
    """The newest core release (`source`: "index", the newest final release on the core's
    index; "given" to the site; "store", the newest the store or its ledger names), the
    pairings that cover it and the plugins that do not."""

    version: str
    source: str
    covered_by: tuple[str, ...]
    not_covered: tuple[Behind, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "covered_by": list(self.covered_by),
            "not_covered": [b.to_json() for b in self.not_covered],
        }


def _lag_days(entry: LedgerEntry | None, manifest: Manifest | None) -> int | None:
    """Release lag in days: the ledger entry's, else the cadence check's summary."""
    lag = entry.lag if entry is not None else None
    if lag is not None and lag.days is not None:
        return lag.days
    cadence = manifest.conformance.checks.get("cadence") if manifest is not None else None
    found = _LAG.search(cadence.summary) if cadence is not None else None
    return int(found.group(2)) if found else None


def _cell(site: str, stored: Stored, releases: list[LedgerEntry]) -> Cell:
    """The verdict of `site` for one pairing: the newest signed ledger release entry of that
    runner, else the manifest's own verdict when its runner is `site`, else not run."""
    newest = next((e for e in reversed(releases) if e.runner == site), None)
    manifest = stored.manifest
    if newest is not None:
        lag = _lag_days(newest, manifest)
        return Cell(newest.verdict, lag, f"ledger entry #{newest.seq}", True, newest.time)
    if manifest is not None:
        runner, verdict = manifest.conformance.runner, manifest.verdict
    else:  # the index's word only: shown, and marked not verified
        runner, verdict = stored.entry.runner, stored.entry.verdict
    if runner != site:
        return NOT_RUN
    lag = _lag_days(None, manifest)
    return Cell(verdict, lag, "manifest", manifest is not None, stored.entry.certified_at)


def _history(entries: list[LedgerEntry]) -> tuple[HistoryLine, ...]:
    return tuple(
        HistoryLine(
            e.seq, e.kind, e.time, e.runner, e.verdict, e.manifest_sha256, _lag_days(e, None)
        )
        for e in entries
    )


def install_line(pid: str, store: str, key: str) -> str:
    return shlex.join(["vpr", "install", pid[:16], "--store", store, "--key", key])


def _pairing(stored: Stored, entries: list[LedgerEntry], store: str, key: str) -> CompatPairing:
    """One pairing's data; `entries`: the ledger's entries for it, in ledger order."""
    entry, manifest = stored.entry, stored.manifest
    pid = entry.pairing_id
    problem = stored.problem
    if manifest is not None and problem is None:
        problem = superseded(entries, pid, entry.manifest_sha256)
    releases = [e for e in entries if e.kind == "release"]
    return CompatPairing(
        entry=entry,
        page=f"{PAGES}/{pid}.html",
        core_name=entry.core.name or "vllm",
        python=python_of(entry),
        signature=Signature(problem is None, problem),
        sites=Sites(*(_cell(site, stored, releases) for site in SITES)),
        api_approval=None if manifest is None else manifest.api_approval,
        guard=manifest is not None and manifest.guard is not None,
        install=install_line(pid, store, key),
        history=_history(entries),
    )


def _newest_core(
    pairings: list[CompatPairing], ledger: list[LedgerEntry], given: str | None, source: str
) -> NewestCore | None:
    """The newest core release (given: `source` says where from, "given" or "index"; else
    the newest the store or its ledger names) and the plugins whose pairings do not cover
    it yet (each with its newest core)."""
    versions = [p.core_version for p in pairings]
    versions += [  # a matrix column's core is a release too (core main's, REF@COMMIT, is not)
        str(e.core.version)
        for e in ledger
        if e.kind in ("release", "matrix") and e.core.version and "@" not in e.core.version
    ]
    if given:
        versions.append(given)
    if not versions:
        return None
    rank = version_ranks(versions)
    newest = given or max(versions, key=rank.__getitem__)
    by_plugin: dict[str, list[CompatPairing]] = {}
    for p in pairings:
        by_plugin.setdefault(p.plugin.name, []).append(p)
    behind = []
    for name, own in sorted(by_plugin.items()):
        if any(p.core_version == newest for p in own):
            continue
        latest = max(own, key=lambda p: (rank[p.core_version], p.pairing_id))
        behind.append(Behind(name, latest.core_version, latest.pairing_id, latest.page))
    covering = sorted(p.pairing_id for p in pairings if p.core_version == newest)
    return NewestCore(newest, source if given else "store", tuple(covering), tuple(behind))


class HeadStamp(NamedTuple):
    """The store's signed head as the site names it: its version and time."""

    version: int
    time: str

    def to_json(self) -> dict[str, int | str]:
        """compat.json's `head` object as it has always been written."""
        return {"version": self.version, "time": self.time}


@dataclass(frozen=True)
class Publisher:
    """Who the site speaks for: `store`/`key`, what the install lines name (the public store
    URL and the publisher's key file); `keyid`, the key's id; `head`, the store's signed
    head (None: no head)."""

    store: str
    key: str
    keyid: str
    head: HeadStamp | None


class Certified(NamedTuple):
    """A published pairing of the plugin on a core: its id, page, best verdict and the
    plugin commit it pairs (not always the matrix's)."""

    pairing_id: str
    page: str
    verdict: str | None
    commit: str | None

    def to_json(self) -> dict[str, str | None]:
        return {
            "pairing_id": self.pairing_id,
            "page": self.page,
            "verdict": self.verdict,
            "commit": self.commit,
        }


class MatrixCell(NamedTuple):
    """One core column of a plugin's version matrix: the newest signed ledger entry of
    kind matrix for that core and plugin commit (`column`: the entry's column object,
    its shape checked when the ledger was read: `core.ledger.column_problem`)."""

    core: str
    seq: int
    time: str | None
    python: str | None
    column: dict[str, Any]
    certified: tuple[Certified, ...]

    @property
    def outcome(self) -> str:
        return str(self.column["outcome"])

    def to_json(self) -> dict[str, Any]:
        return {
            "core": self.core,
            "seq": self.seq,
            "time": self.time,
            "python": self.python,
            "column": self.column,
            "certified": [c.to_json() for c in self.certified],
        }


class PluginRun(NamedTuple):
    """One plugin commit across the cores: its columns oldest first, the first core whose
    tests regressed (None: none did) and the newest entry's number."""

    commit: str | None
    version: str | None
    columns: tuple[MatrixCell, ...]
    first_breaking: str | None
    newest_seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "version": self.version,
            "first_breaking": self.first_breaking,
            "columns": [c.to_json() for c in self.columns],
        }


class PluginMatrix(NamedTuple):
    """A plugin across every core the ledger's matrix entries name: its page and a run
    per plugin commit, newest first."""

    name: str
    page: str
    runs: tuple[PluginRun, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "page": self.page, "runs": [r.to_json() for r in self.runs]}


def plugin_page(name: str) -> str:
    """The page of a plugin: its name where that is a safe file name, else a digest of it."""
    if _PAGE_NAME.match(name) and name not in (".", ".."):
        return f"{PLUGIN_PAGES}/{name}.html"
    return f"{PLUGIN_PAGES}/plugin-{hashlib.sha256(name.encode()).hexdigest()[:16]}.html"


def _best(p: CompatPairing) -> str | None:
    verdicts = [c.verdict for c in p.sites if c.signed_by is not None]
    return min(verdicts, key=lambda v: VERDICT_ORDER.get(v, 9)) if verdicts else None


def plugin_matrices(
    ledger: list[LedgerEntry], pairings: list[CompatPairing]
) -> tuple[PluginMatrix, ...]:
    """Every plugin the ledger's matrix entries name, by name: per plugin commit the newest
    entry of each core column, with the published pairings of the plugin on that core."""
    newest: dict[tuple[str, str | None], dict[str, LedgerEntry]] = {}
    for e in ledger:
        if e.kind == "matrix" and e.column is not None:
            run = (str(e.plugin.name or "unnamed plugin"), e.plugin.commit)
            newest.setdefault(run, {})[str(e.core.version)] = e  # later entries win
    certified: dict[tuple[str, str], list[Certified]] = {}
    for p in pairings:
        at = (p.plugin.name, p.core_version)
        pair = Certified(p.pairing_id, p.page, _best(p), p.plugin.commit)
        certified.setdefault(at, []).append(pair)
    by_name: dict[str, list[PluginRun]] = {}
    for (name, commit), cores in newest.items():
        cells = tuple(
            MatrixCell(
                core,
                e.seq,
                e.time,
                e.python,
                dict(e.column.raw) if e.column else {},
                tuple(certified.get((name, core), ())),
            )
            for core, e in sorted(cores.items(), key=lambda kv: column_order(kv[0]))
        )
        first = next((c.core for c in cells if c.outcome == "regressed"), None)
        version = max(cores.values(), key=lambda e: e.seq).plugin.version
        last = max(e.seq for e in cores.values())
        by_name.setdefault(name, []).append(PluginRun(commit, version, cells, first, last))
    return tuple(
        PluginMatrix(name, plugin_page(name), tuple(sorted(runs, key=lambda r: -r.newest_seq)))
        for name, runs in sorted(by_name.items())
    )


@dataclass(frozen=True)
class Compat:
    """compat.json: the store (its public location), the key's id and the signed head, the
    core versions (newest first), the newest core release and who does not cover it, and
    every pairing. Its kind, schema version, verdict legend and sites are this vpr's
    (`KIND`, `SCHEMA_VERSION`, `VERDICTS`, `SITES`); `to_json` is the object written."""

    store: str
    keyid: str
    head: HeadStamp | None
    cores: tuple[str, ...]
    newest_core: NewestCore | None
    pairings: tuple[CompatPairing, ...]
    plugins: tuple[PluginMatrix, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """compat.json's object as it has always been written."""
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "store": self.store,
            "keyid": self.keyid,
            "head": None if self.head is None else self.head.to_json(),
            "verdicts": VERDICTS,
            "sites": list(SITES),
            "cores": list(self.cores),
            "newest_core": None if self.newest_core is None else self.newest_core.to_json(),
            "pairings": [p.to_json() for p in self.pairings],
            "plugins": [m.to_json() for m in self.plugins],
        }


def build(
    stored: list[Stored],
    ledger: list[LedgerEntry],
    publisher: Publisher,
    *,
    newest_core: str | None = None,
    newest_source: str = "given",
) -> Compat:
    """compat.json: every pairing (newest core first, then plugin, best verdict), the cores,
    the newest core release and who does not cover it."""
    store, key = publisher.store, publisher.key
    by_pairing: dict[str, list[LedgerEntry]] = {}
    for e in ledger:
        by_pairing.setdefault(str(e.pairing_id), []).append(e)
    pairings = [_pairing(s, by_pairing.get(s.entry.pairing_id, []), store, key) for s in stored]
    rank = version_ranks(p.core_version for p in pairings)
    pairings.sort(
        key=lambda p: (
            -rank[p.core_version],
            p.plugin.name,
            str(p.plugin.commit),
            str(p.python),
            min(VERDICT_ORDER.get(c.verdict, 9) for c in p.sites),
            p.pairing_id,
        )
    )
    cores = sorted(rank, key=rank.__getitem__, reverse=True)
    return Compat(
        store=store,
        keyid=publisher.keyid,
        head=publisher.head,
        cores=tuple(cores),
        newest_core=_newest_core(pairings, ledger, newest_core, newest_source),
        pairings=tuple(pairings),
        plugins=plugin_matrices(ledger, pairings),
    )
