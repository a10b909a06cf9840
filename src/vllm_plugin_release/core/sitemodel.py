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
never a pass.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core.indexentry import IndexEntry, PluginRef
from vllm_plugin_release.core.storeindex import VERDICT_ORDER, VERDICTS, python_of, version_ranks
from vllm_plugin_release.core.storetrust import superseded

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Approval, Manifest

KIND = "vllm-plugin-release/compat"
SCHEMA_VERSION = 1
SITES = ("cpu", "hardware")
PAGES = "pairings"
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
    """The newest core release (`source`: "given" to the site, else "store", the newest
    the store or its ledger names), the pairings that cover it and the plugins that do not."""

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
    pairings: list[CompatPairing], ledger: list[LedgerEntry], given: str | None
) -> NewestCore | None:
    """The newest core release (given, else the newest the store or its ledger names) and
    the plugins whose pairings do not cover it yet (each with its newest core)."""
    versions = [p.core_version for p in pairings]
    versions += [str(e.core.version) for e in ledger if e.kind == "release" and e.core.version]
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
    return NewestCore(newest, "given" if given else "store", tuple(covering), tuple(behind))


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
        }


def build(
    stored: list[Stored],
    ledger: list[LedgerEntry],
    publisher: Publisher,
    *,
    newest_core: str | None = None,
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
        newest_core=_newest_core(pairings, ledger, newest_core),
        pairings=tuple(pairings),
    )
