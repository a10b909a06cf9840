"""`vpr manifest site`: the compatibility site of a store read through its signed head; every
pairing is checked one by one and one that fails is listed as not verified, with the reason;
the site is written beside `--out` and moved into place whole."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core import attest, bounded, records
from vllm_plugin_release.core import site as sm
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import storeindex as trust
from vllm_plugin_release.core.bounded import MAX_DOCUMENT
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import MANIFEST_FILE
from vllm_plugin_release.core.manifestmodel import Manifest, parse
from vllm_plugin_release.core.site import render
from vllm_plugin_release.core.storeindex import Missing
from vllm_plugin_release.edges.trust import Trusted


def verified(trusted: Trusted, entry: si.IndexEntry) -> sm.Stored:
    """The entry's manifest, verified as `vpr install` verifies it (without the schema),
    or the reason it is not."""
    store = trusted.store
    pid = entry.pairing_id
    manifest_at, statement_at = f"{si.PAIRINGS}/{pid}.json", f"{si.PAIRINGS}/{pid}.intoto.jsonl"
    try:
        data = store.read_bytes(manifest_at, MAX_DOCUMENT)
        envelope = store.read_bytes(statement_at, MAX_DOCUMENT)
        where = store.where(statement_at)
        statement = attest.read_signed(envelope, trusted.public_key, where)
        names, problems = attest.subject_digests(statement)
        digest = hashlib.sha256(data).hexdigest()
        if names.get(MANIFEST_FILE) != digest:
            raise GateFailed(f"{store.where(manifest_at)}: not the manifest its statement signs")
        manifest = parse(bounded.loads(data), store.where(manifest_at))
        problems += attest.unsigned_wheels(manifest, store.where(manifest_at), names)
        problems += trust.request_problems(manifest, entry, pid=pid, manifest_sha256=digest)
    except Missing as exc:
        return sm.Stored(entry, None, exc.message)
    except (GateFailed, BadInput) as exc:
        return sm.Stored(entry, None, exc.message.splitlines()[-1].strip())
    except json.JSONDecodeError as exc:
        return sm.Stored(entry, None, f"{store.where(manifest_at)}: not JSON ({exc.msg})")
    if problems:
        return sm.Stored(entry, None, problems[0])
    return sm.Stored(entry, manifest, None)


def newest_release(index: str, project: str) -> str | None:
    """The newest final release of `project` on the simple API at `index` (yanked files
    left out); None when it lists none."""
    from packaging.version import Version

    from vllm_plugin_release.edges.fetch import index_files
    from vllm_plugin_release.flows.upstream import releases_from_files

    found = releases_from_files(project, index_files(index.rstrip("/"), project))
    finals = [r.version for r in found if not r.prerelease]
    return max(finals, key=Version) if finals else None


def build(
    trusted: Trusted,
    *,
    store_url: str | None = None,
    key_name: str = "publisher.pub",
    newest_core: str | None = None,
    core_index: str | None = None,
) -> tuple[sm.Compat, dict[str, Manifest | None]]:
    """(compat.json's model, {pairing id: verified manifest or None}). The newest core
    release: `newest_core` when given, else the newest final release on `index` (the
    simple API of the core's index: `core_index`), else the newest the store names."""
    index = trusted.index()
    ledger = trusted.ledger()
    head = trusted.head()
    where = trusted.store.where(si.INDEX_FILE)
    stored = [
        verified(trusted, entry)
        for pid, entry in sorted(index.pairings.items())
        if trust.check_pid(pid, where)
    ]
    publisher = sm.Publisher(
        store=store_url or trusted.location,
        key=key_name,
        keyid=trusted.keyid,
        head=sm.HeadStamp(head.version, head.time) if head else None,
    )
    source = "given"
    if newest_core is None and core_index is not None:
        # the core the store pairs plugins with (vllm when it names none)
        names = {s.entry.core.name for s in stored} | {e.core.name for e in ledger}
        name = min(names - {None, ""}, default="vllm")
        newest_core, source = newest_release(core_index, name), "index"
        if newest_core is None:
            raise BadInput(
                f"--index {core_index}: no final release of {name} listed",
                hint="pass --core-release VERSION, or --newest-from store",
            )
    compat = sm.build(stored, ledger, publisher, newest_core=newest_core, newest_source=source)
    return compat, {s.entry.pairing_id: s.manifest for s in stored}


def _site_kind(data: Any) -> str | None:
    """compat.json's `kind` (what wrote the folder), when it names one as text."""
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def _refuse_foreign(out: Path) -> None:
    """`out` may be absent, empty, or a site vpr wrote (its compat.json says so)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise BadInput(f"--out {out}: not a folder")
    if not any(out.iterdir()):
        return
    kind = records.read_object(out / "compat.json", _site_kind)  # bounded; None: unusable
    if kind != sm.KIND:
        raise BadInput(
            f"--out {out}: the folder holds files that are not a site vpr wrote",
            hint="name an empty or new folder (the site replaces the folder's contents)",
        )


def write(out: Path, files: dict[str, bytes]) -> None:
    """The site's files in a fresh folder beside `out`, then moved into place whole."""
    _refuse_foreign(out)
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for relative, data in sorted(files.items()):
            path = fresh / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
        fresh.chmod(0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "site")
        os.replace(fresh, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


class SiteSummary(NamedTuple):
    """What `vpr manifest site` wrote: pairings listed, core versions, and the pairings
    whose signature did not verify (listed, marked, without a scorecard)."""

    pairings: int
    cores: int
    unverified: int
    plugins: int = 0  # plugins with a page across every core (the ledger's matrix entries)
    newest: str | None = None  # the newest core release and where it came from


def site(trusted: Trusted, out: Path, **options: Any) -> SiteSummary:
    """Build (`build`'s options) and write the site, compat.json and the pages; what it holds."""
    compat, manifests = build(trusted, **options)
    write(out, render(compat, manifests))
    pairings = compat.pairings
    bad = sum(not p.signature.verified for p in pairings)
    newest = compat.newest_core
    said = None if newest is None else f"{newest.version} (from the {newest.source})"
    return SiteSummary(len(pairings), len(compat.cores), bad, len(compat.plugins), said)
