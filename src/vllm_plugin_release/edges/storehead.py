"""Signing a folder store's head (`core.storehead`), the last file every writer changes: a
writer re-signs what it wrote and carries the rest over from a head that verifies."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import bounded, progress, signed
from vllm_plugin_release.core import storehead as sh
from vllm_plugin_release.core.attest import keyid
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.ledger import (
    LEDGER_FILE,
    Draft,
    LedgerEntry,
    Repair,
    chained,
    parse_ledger,
    repair_entry,
    sign_line,
)
from vllm_plugin_release.core.storeindex import INDEX_FILE
from vllm_plugin_release.core.summary import LEDGER_SUMMARY_DIR, LEDGER_SUMMARY_FILE, SUMMARY_FILE
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

SIGNED_FOLDERS = ("lkg", "nightly")  # one signed document per pairing name in each


def head_days() -> float:
    """How long a head is valid: $VPR_STORE_HEAD_DAYS (a positive number), else 30."""
    return settings.number("VPR_STORE_HEAD_DAYS")


def record(relative: str, data: bytes) -> sh.FileRecord:
    return sh.ledger_record(data) if relative == LEDGER_FILE else sh.file_record(data)


def vouched_files(root: Path) -> list[str]:
    """Every file of `root` a head vouches for, as store paths."""
    names = (INDEX_FILE, SUMMARY_FILE, LEDGER_FILE, LEDGER_SUMMARY_FILE)
    found = [name for name in names if (root / name).is_file()]
    for folder in SIGNED_FOLDERS:
        if (root / folder).is_dir():
            found += sorted(
                f"{folder}/{p.name}"
                for p in (root / folder).iterdir()
                if p.suffix == ".json" and not p.name.startswith(".") and p.is_file()
            )
    return found


def read_head(root: Path, public_key: Ed25519PublicKey, where: str) -> sh.Head | None:
    """The head of a folder store, its signature checked (None when there is none yet)."""
    try:
        data = bounded.read_file(root / sh.HEAD_FILE, sh.MAX_HEAD, "store head")
    except FileNotFoundError:
        return None
    payload = signed.verify(
        data, sh.PAYLOAD_TYPE, public_key, where, what="store head", hint=sh.HINT
    )
    return sh.parse(
        payload, keyid=keyid(public_key), digest=hashlib.sha256(data).hexdigest(), where=where
    )


def sign_head(
    root: Path,
    key: Ed25519PrivateKey,
    wrote: Iterable[str] = (),
    *,
    everything: bool = False,
    now: dt.datetime | None = None,
) -> sh.Head:
    """Sign a new head for the folder store at `root` (the caller holds the store's lock):
    the records of `wrote` made from the files now there, the others carried over (all
    files present when `everything` or when there is no head yet)."""
    where = str(root / sh.HEAD_FILE)
    public = key.public_key()
    try:
        previous = read_head(root, public, where)
    except GateFailed:
        if not everything:
            raise
        previous = None  # a person vouches for the store as it is: a new head from scratch
    files = dict(previous.files) if previous else {}
    keep = keep_ledger = None
    if everything:  # the summaries made again from index.json and the ledger as they are
        from vllm_plugin_release.edges import summary

        keep = summary.refresh(root)
        keep_ledger = summary.refresh_ledger(root, public)
    names = set(vouched_files(root)) | set(files) if everything or previous is None else wrote
    for relative in sorted(set(names)):
        try:
            data = bounded.read_file(root / relative, bounded.MAX_INDEX, "store file")
        except FileNotFoundError:
            files.pop(relative, None)
            continue
        if relative == LEDGER_FILE:  # each line verified before the head vouches for it all
            parse_ledger(data, public, str(root / relative))
        files[relative] = record(relative, data)
    now = now or dt.datetime.now(dt.timezone.utc)
    made = sh.body(files, previous=previous.version if previous else 0, now=now, days=head_days())
    data = signed.sign(made.payload(), sh.PAYLOAD_TYPE, key)
    atomic_write_bytes(root / sh.HEAD_FILE, data)
    if everything:
        from vllm_plugin_release.edges import summary

        summary.sweep(root, keep)
        summary.sweep(root, keep_ledger, LEDGER_SUMMARY_DIR)
    return made.as_head(keyid(public), hashlib.sha256(data).hexdigest())


def check_vouched(root: Path, public_key: Ed25519PublicKey, relative: str, data: bytes) -> None:
    """Before a writer extends `relative` (the ledger): it is the file the store's head
    vouches for (none at all when the head lists none), so a file cut short or swapped
    behind the writers' backs is never signed anew."""
    where = str(root / sh.HEAD_FILE)
    head = read_head(root, public_key, where)
    if head is None:
        return
    if relative in head.files:
        sh.check_file(head, relative, data, str(root / relative))
    elif data:
        raise GateFailed(
            f"{root / relative}: the store's signed head (version {head.version}) vouches "
            "for no such file: it was not written by the store's writers",
            hint=sh.HINT,
        )


def _said(record: sh.FileRecord) -> str:
    return f"sha256 {record.sha256[:16]}, {record.size} bytes"


def drifted(root: Path, public_key: Ed25519PublicKey, relatives: Iterable[str]) -> list[Repair]:
    """Which of `relatives` a writer is about to write are not the files the store's signed
    head vouches for (changed, cut, replaced, removed, or there while it vouches for none),
    each a Repair whose `restored` the writer fills in; none without a head yet (the caller
    holds the store's lock)."""
    head = read_head(root, public_key, str(root / sh.HEAD_FILE))
    if head is None:
        return []
    found: list[Repair] = []
    for relative in relatives:
        signed_record = head.files.get(relative)
        try:
            data = bounded.read_file(root / relative, bounded.MAX_INDEX, "store file")
        except FileNotFoundError:
            if signed_record is not None:
                found.append(Repair(relative, "missing", _said(signed_record), head.version, ""))
            continue
        except BadInput as exc:  # a folder, a fifo, larger than any index
            said = exc.message.split(": ", 1)[-1]
            signed_text = _said(signed_record) if signed_record else "no such file"
            found.append(Repair(relative, said, signed_text, head.version, ""))
            continue
        now = sh.file_record(data)
        if signed_record is None:
            found.append(Repair(relative, _said(now), "no such file", head.version, ""))
        elif not now.same_file(signed_record):
            found.append(Repair(relative, _said(now), _said(signed_record), head.version, ""))
    return found


# ---------------------------------------------------------------------------
# Ledger lines a writer appends under the store's lock, before the head it signs.


def append_locked(
    root: Path,
    location: str,
    drafts: list[Draft],
    key: Ed25519PrivateKey,
    recorded: Callable[[Draft, list[LedgerEntry]], bool] = lambda _draft, _entries: False,
) -> list[LedgerEntry]:
    """`append_new` for a writer that holds the store's lock already: each of `drafts` the
    ledger has not `recorded` yet, in order, then a repair entry for a ledger summary that
    is not the one the head vouches for (said, and made again), then the head. The entries
    written, drafts first (none: nothing is written, the head is not signed again)."""
    path = root / LEDGER_FILE
    try:
        old = bounded.read_file(path, bounded.MAX_INDEX, "ledger")
    except FileNotFoundError:
        old = b""
    entries = parse_ledger(old, key.public_key(), str(path))
    check_vouched(root, key.public_key(), LEDGER_FILE, old)
    fresh = [d for d in drafts if not recorded(d, entries)]
    if not fresh:
        return []
    summary = drifted(root, key.public_key(), (LEDGER_SUMMARY_FILE,))
    restored = "made again from the ledger, each line of it verified"
    new, written = old, []
    for draft in [*fresh, *repair_drafts(location, summary, restored)]:
        if draft in fresh and recorded(draft, written):
            continue
        last = new.splitlines(keepends=True)[-1] if new else None
        full = chained(draft, last, len(entries) + len(written))
        new += sign_line(full, key)
        written.append(full)
    path.parent.mkdir(parents=True, exist_ok=True)
    from vllm_plugin_release.edges.summary import sweep, write_ledger

    atomic_write_bytes(path, new)
    keep = write_ledger(root, [*entries, *written], new)  # before the head
    sign_head(root, key, (LEDGER_FILE, LEDGER_SUMMARY_FILE))
    sweep(root, keep, LEDGER_SUMMARY_DIR)
    return written


def repair_drafts(location: str, found: list[Repair], restored: str) -> list[Draft]:
    """Say each file found differing from the signed head and what was `restored` in its
    place (a warning naming the store, the file and the head's version); their ledger
    entries."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    drafts = []
    for repair in found:
        done = dataclasses.replace(repair, restored=repair.restored or restored)
        progress.warn(f"store {location}: {done.line()}; recorded in the ledger")
        drafts.append(repair_entry(done, now))
    return drafts


def record_repairs(root: Path, location: str, found: list[Repair], key: Ed25519PrivateKey) -> None:
    """For a writer holding the lock: each of `found` (its `restored` filled in) said and
    appended to the ledger."""
    if found:
        append_locked(root, location, repair_drafts(location, found, ""), key)
