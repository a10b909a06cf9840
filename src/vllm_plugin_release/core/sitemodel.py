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

from vllm_plugin_release.core.storeindex import (
    VERDICT_ORDER,
    VERDICTS,
    IndexEntry,
    python_of,
    version_ranks,
)
from vllm_plugin_release.core.storetrust import superseded

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Manifest

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


def _lag_days(entry: LedgerEntry | None, manifest: Manifest | None) -> int | None:
    """Release lag in days: the ledger entry's, else the cadence check's summary."""
    lag = entry.lag if entry is not None else None
    if lag is not None and lag.days is not None:
        return lag.days
    cadence = manifest.conformance.checks.get("cadence") if manifest is not None else None
    found = _LAG.search(cadence.summary) if cadence is not None else None
    return int(found.group(2)) if found else None


def _cell(site: str, pid: str, stored: Stored, releases: list[LedgerEntry]) -> dict[str, Any]:
    """The verdict of `site` for one pairing: the newest signed ledger release entry of that
    runner, else the manifest's own verdict when its runner is `site`, else not run."""
    newest = next((e for e in reversed(releases) if e.runner == site), None)
    manifest = stored.manifest
    if newest is not None:
        return {
            "verdict": newest.verdict,
            "lag_days": _lag_days(newest, manifest),
            "signed_by": f"ledger entry #{newest.seq}",
            "verified": True,
            "time": newest.time,
        }
    if manifest is not None:
        runner, verdict = manifest.conformance.runner, manifest.verdict
    else:  # the index's word only: shown, and marked not verified
        runner, verdict = stored.entry.runner, stored.entry.verdict
    if runner != site:
        return {
            "verdict": None,
            "lag_days": None,
            "signed_by": None,
            "verified": None,
            "time": None,
        }
    return {
        "verdict": verdict,
        "lag_days": _lag_days(None, manifest),
        "signed_by": "manifest",
        "verified": manifest is not None,
        "time": stored.entry.certified_at,
    }


def _history(entries: list[LedgerEntry]) -> list[dict[str, Any]]:
    return [
        {
            "seq": e.seq,
            "kind": e.kind,
            "time": e.time,
            "runner": e.runner,
            "verdict": e.verdict,
            "manifest_sha256": e.manifest_sha256,
            "lag_days": _lag_days(e, None),
        }
        for e in entries
    ]


def _approval(manifest: Manifest | None) -> dict[str, Any] | None:
    if manifest is None or manifest.api_approval is None:
        return None
    return manifest.api_approval.as_json()


def install_line(pid: str, store: str, key: str) -> str:
    return shlex.join(["vpr", "install", pid[:16], "--store", store, "--key", key])


def _pairing(stored: Stored, entries: list[LedgerEntry], store: str, key: str) -> dict[str, Any]:
    """One pairing's data; `entries`: the ledger's entries for it, in ledger order."""
    entry, manifest = stored.entry, stored.manifest
    pid = entry.pairing_id
    problem = stored.problem
    if manifest is not None and problem is None:
        problem = superseded(entries, pid, entry.manifest_sha256)
    releases = [e for e in entries if e.kind == "release"]
    plugin = entry.plugin
    return {
        "pairing_id": pid,
        "page": f"{PAGES}/{pid}.html",
        "name": entry.name,
        "core": {"name": entry.core.name or "vllm", "version": entry.core.version},
        "plugin": {
            "name": plugin.name,
            "version": plugin.version,
            "commit": plugin.commit,
        },
        "python": python_of(entry),
        "runtime": entry.raw.get("runtime"),  # as the entry has it
        "manifest_sha256": entry.manifest_sha256,
        "signature": {"verified": problem is None, "problem": problem},
        "sites": {site: _cell(site, pid, stored, releases) for site in SITES},
        "api_approval": _approval(manifest),
        "guard": manifest is not None and manifest.guard is not None,
        "install": install_line(pid, store, key),
        "history": _history(entries),
    }


def _newest_core(
    pairings: list[dict[str, Any]], ledger: list[LedgerEntry], given: str | None
) -> dict[str, Any] | None:
    """The newest core release (given, else the newest the store or its ledger names) and
    the plugins whose pairings do not cover it yet (each with its newest core)."""
    versions = [p["core"]["version"] for p in pairings]
    versions += [str(e.core.version) for e in ledger if e.kind == "release" and e.core.version]
    if given:
        versions.append(given)
    if not versions:
        return None
    rank = version_ranks(versions)
    newest = given or max(versions, key=rank.__getitem__)
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for p in pairings:
        by_plugin.setdefault(p["plugin"]["name"], []).append(p)
    behind = []
    for name, own in sorted(by_plugin.items()):
        if any(p["core"]["version"] == newest for p in own):
            continue
        latest = max(own, key=lambda p: (rank[p["core"]["version"]], p["pairing_id"]))
        behind.append(
            {
                "plugin": name,
                "newest_core": latest["core"]["version"],
                "pairing_id": latest["pairing_id"],
                "page": latest["page"],
            }
        )
    covering = sorted(p["pairing_id"] for p in pairings if p["core"]["version"] == newest)
    return {
        "version": newest,
        "source": "given" if given else "store",
        "covered_by": covering,
        "not_covered": behind,
    }


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


def build(
    stored: list[Stored],
    ledger: list[LedgerEntry],
    publisher: Publisher,
    *,
    newest_core: str | None = None,
) -> dict[str, Any]:
    """compat.json: every pairing (newest core first, then plugin, best verdict), the cores,
    the newest core release and who does not cover it."""
    store, key = publisher.store, publisher.key
    by_pairing: dict[str, list[LedgerEntry]] = {}
    for e in ledger:
        by_pairing.setdefault(str(e.pairing_id), []).append(e)
    pairings = [_pairing(s, by_pairing.get(s.entry.pairing_id, []), store, key) for s in stored]
    rank = version_ranks(p["core"]["version"] for p in pairings)
    pairings.sort(
        key=lambda p: (
            -rank[p["core"]["version"]],
            p["plugin"]["name"],
            str(p["plugin"]["commit"]),
            str(p["python"]),
            min(VERDICT_ORDER.get(c["verdict"], 9) for c in p["sites"].values()),
            p["pairing_id"],
        )
    )
    cores = sorted(rank, key=rank.__getitem__, reverse=True)
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "store": store,
        "keyid": publisher.keyid,
        "head": None if publisher.head is None else publisher.head.to_json(),
        "verdicts": VERDICTS,
        "sites": list(SITES),
        "cores": cores,
        "newest_core": _newest_core(pairings, ledger, newest_core),
        "pairings": pairings,
    }
