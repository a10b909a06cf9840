"""Recording a verdict (from the pairing's signed manifest) or the version matrix's columns in
the store's ledger: signed, appended under the store's lock and read back verified."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import cardrecord, columns, ledger, progress, records
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import MANIFEST_FILE, load
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import open_store
from vllm_plugin_release.stages.publish import resolve_targets


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def signing_key(spec: Spec, cache: Cache, given: str | Path | None) -> Any:
    """The manifest key (as `vpr manifest build` resolves it)."""
    path, origin = keys.resolve_key_path(
        given, spec.publish.signing_key, root=spec.root, cache_root=cache.root
    )
    keys.ensure_key(path, origin)
    return keys.load_private_key(path)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def lag_from_scorecard(dist: Path) -> ledger.Lag | None:
    """The pairing's release lag as the cadence check measured it (scorecard.json), or None
    (no card, a card that does not read, no lag, or a lag that is not a count)."""
    try:
        card = cardrecord.read(dist)  # bounded and checked; absent is BadInput too
    except BadInput:
        return None
    cadence = [r for r in card.results if r.name == "cadence"]
    details = cadence[0].details if cadence else {}
    if "lag_minor" not in details:
        return None
    days, minor = details.get("lag_days"), details["lag_minor"]
    if not _count(minor) or not (days is None or _count(days)):
        progress.warn(f"{dist / records.SCORECARD}: the cadence check's lag is not a count")
        return None
    return ledger.Lag(days, minor)


@dataclass(frozen=True)
class Verdict:
    """What a ledger entry says beside its manifest: the site it ran on, the kind of run,
    and (a nightly's) its own outcome, pass|fail, in place of the manifest's verdict."""

    runner: str
    kind: str = "release"
    outcome: str | None = None


def record_verdict(
    spec: Spec,
    dist: Path,
    said: Verdict,
    *,
    cache: Cache,
    store: str | None,
    signing: str | Path | None,
) -> ledger.LedgerEntry:
    """Append the verdict of dist/NAME/manifest.json (or `said.outcome`) with its lag; the entry."""
    manifest_path = dist / MANIFEST_FILE
    manifest = load(manifest_path)
    digest = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    kind = said.kind
    entry = ledger.entry_from_manifest(
        manifest,
        manifest_sha256=digest,
        runner=said.runner,
        time=now_utc(),
        kind=kind,
        lag=lag_from_scorecard(dist),
    )
    if said.outcome is not None:
        entry = replace(entry, verdict=said.outcome)
    key = signing_key(spec, cache, signing)
    target = open_store(resolve_targets(spec, None, store, cache.root)[1])
    written = trust.append(target, entry, key)
    entries = trust.read_ledger(target, key.public_key())  # read back, verified
    if not entries or entries[-1] != written:
        raise GateFailed(f"{target.location}: the ledger entry just written does not read back")
    progress.info(f"ledger: entry #{written.seq} ({kind}, {written.verdict}) in {target.location}")
    return written


def record_columns(
    spec: Spec,
    m: columns.Matrix,
    dist: Path,
    *,
    cache: Cache,
    store: str | None,
    signing: str | Path | None,
) -> list[ledger.LedgerEntry]:
    """Append an entry of kind matrix per column of `m` that the ledger does not hold yet (the same
    column records give none); the entries written, read back verified."""
    from vllm_plugin_release.flows.bisect import read_report

    found = [a.column for a in m.columns]
    plugin = columns.plugin_of(found)
    digests = {c.core: columns.record_sha256(c) for c in found}
    report = read_report(dist)
    runtime = spec.runtime.name if spec.runtime else None
    when = now_utc()
    drafts = []
    for a in m.columns:
        col = a.column
        label = col.core
        core = ledger.Party(spec.core.name, label, label.split("@")[1] if "@" in label else None)
        drafts.append(
            ledger.entry_from_column(
                core,
                ledger.Party(plugin.get("name"), plugin.get("version"), plugin.get("commit")),
                python=col.python,
                runtime=runtime,
                time=when,
                column=columns.ledger_column(a, digests, columns.bisect_range(report, a)),
            )
        )
    key = signing_key(spec, cache, signing)
    target = open_store(resolve_targets(spec, None, store, cache.root)[1])
    written = trust.append_new(target, drafts, key, _recorded)
    entries = trust.read_ledger(target, key.public_key())  # read back, verified
    if written and entries[-len(written) :] != written:
        raise GateFailed(f"{target.location}: the ledger entries just written do not read back")
    kept = len(drafts) - len(written)
    seqs = f"#{written[0].seq}..#{written[-1].seq}" if written else "none"
    progress.info(
        f"ledger: {len(written)} matrix entr{'y' if len(written) == 1 else 'ies'} ({seqs}) in "
        f"{target.location}" + (f"; {kept} column(s) already recorded" if kept else "")
    )
    return written


def _recorded(draft: ledger.Draft, entries: list[ledger.LedgerEntry]) -> bool:
    """Whether the ledger holds an entry of this column record already (its key)."""
    key = (draft.column or {}).get("key")
    return any(e.kind == "matrix" and (e.column or {}).get("key") == key for e in entries)
