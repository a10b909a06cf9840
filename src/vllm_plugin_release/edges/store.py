"""The manifest store, a folder or the same served over HTTP: one manifest per pairing,
`index.json` rebuilt from them under the writers' lock, the certified wheels, run history,
and the signed head every writer re-signs (layout: docs/manifest.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded, progress, records, signed
from vllm_plugin_release.core import storehead as sh
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import summary as sm
from vllm_plugin_release.core.attest import keyid
from vllm_plugin_release.core.bounded import loads
from vllm_plugin_release.core.cache import atomic_write_bytes, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.errors import scrub as redact_url  # a URL without its user info
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
from vllm_plugin_release.core.manifestdoc import parse_document, validate
from vllm_plugin_release.core.storeindex import (
    INDEX_FILE,
    PAIRINGS,
    RUNS,
    WHEELS,
    EntryExtras,
    IndexEntry,
    Missing,
    PublishedAt,
    StoreIndex,
    check_index,
    check_lock,
    check_same_wheels,
    empty_index,
    entry_for,
    index_bytes,
    lock_path,
    parse_run,
    rebuild_index,
    run_file_name,
    run_record,
    store_path,
)
from vllm_plugin_release.core.summary import (
    LEDGER_SUMMARY_DIR,
    LEDGER_SUMMARY_FILE,
    SUMMARY_DIR,
    SUMMARY_FILE,
)
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from vllm_plugin_release.core.manifestmodel import Manifest

LOCK_FILE = ".lock"
WRITER_FOLDERS = ("ledger", "lkg", "nightly")  # the ledger's, lkg pointers', schedules' files


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Extras:
    """What a publish adds beside the manifest: the pairing's lock (bytes), the two wheels,
    and where they were published (`index`)."""

    lock: bytes | None = None
    wheels: tuple[Path, ...] = ()
    index: PublishedAt | None = None
    time: str | None = None  # the certification time; now when None


def wheels_page(entries: list[IndexEntry]) -> str:
    """The embedded index's find-links page: every stored wheel with its sha256."""
    import html

    files = sorted({(w.filename, w.sha256) for e in entries for w in e.stored_wheels})
    links = "".join(
        f'<a href="{html.escape(name)}#sha256={sha}">{html.escape(name)}</a><br>\n'
        for name, sha in files
    )
    return f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"


@dataclass(frozen=True)
class AddResult:
    status: str  # "added" | "unchanged" | "replaced"
    entry: IndexEntry
    previous: IndexEntry | None
    store: str


class DirStore:
    """A manifest store in a local folder (the only kind that can be written). `lock_timeout`:
    seconds a writer waits for the lock (None: $VPR_STORE_LOCK_TIMEOUT)."""

    def __init__(
        self,
        root: Path,
        *,
        lock_timeout: float | None = None,
        signer: Ed25519PrivateKey | None = None,
    ) -> None:
        self.root = Path(root)
        self.location = str(self.root)
        self.lock_timeout = (
            settings.number("VPR_STORE_LOCK_TIMEOUT") if lock_timeout is None else lock_timeout
        )
        self.signer = signer  # the manifest key: a writer with it signs the store's head

    def where(self, relative: str) -> str:
        return str(self.root / relative)

    def read_text(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> str:
        return _text(self.read_bytes(relative, limit), self.where(relative))

    def read_bytes(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> bytes:
        """A store file's bytes: a safe store path that stays inside the folder (no link out),
        a regular file of at most `limit` bytes; Missing when it is not there."""
        path = self.root / store_path(relative, str(self.root))
        if not self.root.is_dir():
            raise Missing(
                f"{self.root}: manifest store not found",
                hint="publish to it first with `vpr publish --store PATH`",
            )
        real, home = os.path.realpath(path), os.path.realpath(self.root)
        if os.path.lexists(path) and not real.startswith(home.rstrip("/") + "/"):
            raise BadInput(
                f"{path}: a link that leads outside the store (to {real})",
                hint="a store holds its files itself; nothing was read from there",
            )
        try:
            return bounded.read_file(path, limit, "store file")
        except FileNotFoundError:
            raise Missing(f"{path}: missing from the store")

    def find_links(self) -> str:
        return str(self.root / WHEELS)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The writers' lock (waiting up to `lock_timeout`, then exit 3); what a killed
        writer left (dot-named temp files) is swept first."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(self.root / LOCK_FILE), timeout=self.lock_timeout):
                self._remove_stale_temps()
                yield
        except Timeout:
            raise OutsideFailure(
                f"{self.root / LOCK_FILE}: manifest store still locked after "
                f"{self.lock_timeout:.0f} s",
                hint="another publisher holds it; the lock is released when that process ends",
            )

    def _remove_stale_temps(self) -> None:
        """Temp files a killed writer left (only ever written under the lock we now hold),
        in every folder a writer writes."""
        runs = self.root / RUNS
        folders = [
            self.root / name for name in ("", PAIRINGS, WHEELS, SUMMARY_DIR, *WRITER_FOLDERS)
        ]
        folders += [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
        for p in (p for folder in folders if folder.is_dir() for p in folder.iterdir()):
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    p.unlink()

    def _manifests(self) -> Iterator[tuple[str, bytes, bool]]:
        """(pairing id, manifest bytes, has a statement) for each manifest in pairings/."""
        folder = self.root / PAIRINGS
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            yield path.stem, path.read_bytes(), (folder / f"{path.stem}.intoto.jsonl").exists()

    def _index_for_writing(self) -> StoreIndex:
        """The current index; an unreadable one counts as empty (it is rebuilt from the
        manifests), one from a newer schema is refused rather than downgraded."""
        path = self.root / INDEX_FILE
        try:
            data = loads(bounded.read_file(path, bounded.MAX_INDEX, INDEX_FILE))
        except (OSError, BadInput, json.JSONDecodeError):
            return empty_index()
        if isinstance(data, dict) and isinstance(data.get("schema_version"), int):
            return check_index(data, str(path))
        return empty_index()

    def add(
        self, manifest_path: Path, statement_path: Path | None = None, extras: Extras | None = None
    ) -> AddResult:
        """Add (or replace) the pairing's manifest, its lock, wheels and a history line, and
        rebuild index.json, under the lock. The bytes stored are the bytes validated."""
        from vllm_plugin_release.core.manifestmodel import parse

        data = _document_bytes(manifest_path, "manifest")
        raw = parse_document(data, manifest_path, "manifest")
        validate(raw, str(manifest_path))
        manifest = parse(raw, str(manifest_path))
        statement = _document_bytes(statement_path, "statement") if statement_path else None
        entry = entry_for(manifest, hashlib.sha256(data).hexdigest(), statement is not None)
        extras = extras or Extras()
        if extras.lock is not None:  # the lock stored is the one the signed manifest names
            check_lock(
                manifest,
                extras.lock,
                f"{manifest_path}: the pairing lock to store",
                hint="the lock changed since `vpr env`; re-run the pairing (vpr release) first",
            )
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / PAIRINGS).mkdir(exist_ok=True)
        with self.locked():
            previous, unchanged, index = self._add_locked(entry, data, statement, manifest, extras)
        status = "unchanged" if unchanged else ("replaced" if previous else "added")
        return AddResult(status, index.pairings[entry.pairing_id], previous, self.location)

    def _add_locked(
        self,
        entry: IndexEntry,
        data: bytes,
        statement: bytes | None,
        manifest: Manifest,
        extras: Extras,
    ) -> tuple[IndexEntry | None, bool, StoreIndex]:
        """Write the pairing's files and index.json: (previous entry, unchanged?, new index)."""
        pid = entry.pairing_id
        for wheel in extras.wheels:  # refused before anything of this pairing is written
            self._check_wheel(wheel)
        repairs = self._drifted((INDEX_FILE, SUMMARY_FILE))
        # an index.json the head does not vouch for lends the new one nothing
        trusted = not any(r.file == INDEX_FILE for r in repairs)
        current = self._index_for_writing() if trusted else empty_index()
        previous = current.pairings.get(pid)
        target = self.root / PAIRINGS / f"{pid}.json"
        check_same_wheels(previous, entry, self.location)
        unchanged = (
            previous is not None
            and previous.manifest_sha256 == entry.manifest_sha256
            and target.exists()
            and target.read_bytes() == data
        )
        for wheel in extras.wheels:
            self._store_wheel(wheel)
        if extras.lock is not None:
            write_if_changed(self.root / lock_path(pid), extras.lock)
        if not unchanged:
            if statement is not None:
                atomic_write_bytes(self.root / PAIRINGS / f"{pid}.intoto.jsonl", statement)
            atomic_write_bytes(target, data)
        if extras.index is not None:
            self._record_run(manifest, entry.manifest_sha256, extras)
        index = rebuild_index(self._manifests(), current, self._extras_reader())
        data = index_bytes(index)
        write_if_changed(self.root / INDEX_FILE, data)
        page = wheels_page(list(index.pairings.values())).encode()
        write_if_changed(self.root / WHEELS / "index.html", page)
        keep = write_summary(self.root, index, data)  # before the head, as index.json
        self._record_repairs(repairs, len(index.pairings))
        if self.signer is not None:  # without the key the head is left: consumers then refuse
            sign_head(self.root, self.signer, (INDEX_FILE, SUMMARY_FILE))
        sweep_summary(self.root, keep)
        return previous, unchanged, index

    def _drifted(self, relatives: tuple[str, ...]) -> list[Repair]:
        """`drifted`, for a writer that holds the key (else none: it cannot check)."""
        if self.signer is None:
            return []
        return drifted(self.root, self.signer.public_key(), relatives)

    def _record_repairs(self, found: list[Repair], pairings: int) -> None:
        """Say what was restored in place of each file of `found`, and record it in the
        ledger (under the lock, before the head)."""
        if not found or self.signer is None:
            return
        restored = {
            INDEX_FILE: f"rebuilt from the {pairings} manifest(s) in {PAIRINGS}/, nothing "
            "taken from the file found",
            SUMMARY_FILE: f"made again from the {INDEX_FILE} this publish wrote",
        }
        done = [
            dataclasses.replace(r, restored=restored.get(r.file, "written again")) for r in found
        ]
        record_repairs(self.root, self.location, done, self.signer)

    def _check_wheel(self, wheel: Path) -> None:
        """A stored wheel is never replaced by another file of the same name."""
        sidecar = self.root / WHEELS / f"{wheel.name}.sha256"
        if sidecar.exists():
            have, new = _sidecar(sidecar), sha256_file(wheel)
            if have != new:
                raise GateFailed(
                    f"{self.root / WHEELS / wheel.name}: already in the store with sha256 "
                    f"{have}; this wheel is {new}",
                    hint="a stored wheel never changes; bump the version or fix reproducibility",
                )

    def _store_wheel(self, wheel: Path) -> None:
        folder = self.root / WHEELS
        sidecar = folder / f"{wheel.name}.sha256"
        if sidecar.exists():
            return
        data = wheel.read_bytes()
        atomic_write_bytes(folder / wheel.name, data)
        atomic_write_bytes(sidecar, hashlib.sha256(data).hexdigest().encode() + b"\n")

    def _record_run(self, manifest: Manifest, sha: str, extras: Extras) -> None:
        """One history line per certified manifest: a re-publish of the same bytes adds none."""
        folder = self.root / RUNS / manifest.pairing_id
        if folder.is_dir() and any(p.name.endswith(f"-{sha[:12]}.json") for p in folder.iterdir()):
            return
        assert extras.index is not None
        run = run_record(manifest, sha, extras.time or utc_now(), extras.index)
        text = json.dumps(run.to_json(), indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(folder / run_file_name(run), text.encode())

    def _extras_reader(self) -> Any:
        """extras(pairing_id) for `rebuild_index`: runs, stored wheels, lock."""
        folder = self.root / WHEELS
        stored = {
            p.name[: -len(".sha256")]: _sidecar(p)
            for p in (folder.glob("*.sha256") if folder.is_dir() else [])
        }

        def extras(pid: str) -> EntryExtras:
            runs = []
            for path in sorted((self.root / RUNS / pid).glob("*.json")):
                run = records.read_object(path, parse_run)  # bounded; an unusable one: None
                if run is not None:
                    runs.append(run)
            # the lock was checked against the signed lock_sha256 when it was written
            lock = (self.root / lock_path(pid)).is_file()
            return EntryExtras(tuple(runs), stored, lock)

        return extras


# -- the signed head: the last file every writer changes; a writer re-signs what it wrote
# and carries the rest over from a head that verifies (`core.storehead` holds its data)

SIGNED_FOLDERS = ("lkg", "nightly")  # one signed document per pairing name in each


def head_record(relative: str, data: bytes) -> sh.FileRecord:
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
    """Sign a new head for the folder store at `root` (under its lock): the records of `wrote`
    made anew, the others carried over (all files anew when `everything` or without a head)."""
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
        keep = refresh_summary(root)
        keep_ledger = refresh_ledger_summary(root, public)
    names = set(vouched_files(root)) | set(files) if everything or previous is None else wrote
    for relative in sorted(set(names)):
        try:
            data = bounded.read_file(root / relative, bounded.MAX_INDEX, "store file")
        except FileNotFoundError:
            files.pop(relative, None)
            continue
        if relative == LEDGER_FILE:  # each line verified before the head vouches for it all
            parse_ledger(data, public, str(root / relative))
        files[relative] = head_record(relative, data)
    now = now or dt.datetime.now(dt.timezone.utc)
    days = settings.number("VPR_STORE_HEAD_DAYS")
    made = sh.body(files, previous=previous.version if previous else 0, now=now, days=days)
    data = signed.sign(made.payload(), sh.PAYLOAD_TYPE, key)
    atomic_write_bytes(root / sh.HEAD_FILE, data)
    if everything:
        sweep_summary(root, keep)
        sweep_summary(root, keep_ledger, LEDGER_SUMMARY_DIR)
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
    """Which of `relatives` a writer is about to write are not the files the store's signed head
    vouches for, each a Repair whose `restored` the writer fills in; none without a head yet."""
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


# -- the summaries (`core.summary`): written under the lock after index.json or the ledger
# and before the head (each file named by its sha256, then summary.json); after the head,
# `sweep_summary` removes the files it does not name.


def write_summary(root: Path, index: StoreIndex, index_data: bytes) -> set[str]:
    """The summary of `index` (file `index_data`) into the store `root`; the paths it names."""
    renders = {fmt: si.render_matrix(si.matrix(index), fmt) for fmt in sm.FORMATS}
    return _write_summary(root, sm.STORE, *sm.build(si.query(index), index_data, renders))


def write_ledger_summary(root: Path, entries: list[LedgerEntry], ledger_data: bytes) -> set[str]:
    """The summary of the verified ledger `entries` (file `ledger_data`); the paths it names."""
    built = sm.build_ledger(entries, sh.ledger_record(ledger_data))
    return _write_summary(root, sm.LEDGER, *built)


def refresh_summary(root: Path) -> set[str] | None:
    """The summary of the store's index.json as it is now (None, and summary.json removed,
    without a readable one); the store paths it names."""
    path = root / INDEX_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "store index")
        index = si.index_from(data, str(path))
    except (FileNotFoundError, BadInput):
        return _drop_summary(root, sm.STORE)
    return write_summary(root, index, data)


def refresh_ledger_summary(root: Path, public_key: Ed25519PublicKey) -> set[str] | None:
    """The summary of the store's ledger as it is now, each line verified first; none without
    a ledger that verifies."""
    path = root / LEDGER_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "ledger")
        entries = parse_ledger(data, public_key, str(path))
    except (FileNotFoundError, BadInput, GateFailed):
        return _drop_summary(root, sm.LEDGER)
    return write_ledger_summary(root, entries, data)


def sweep_summary(root: Path, keep: set[str] | None, folder_name: str = SUMMARY_DIR) -> None:
    """Remove the files under `folder_name` that the current summary does not name."""
    folder = root / folder_name
    for path in folder.iterdir() if folder.is_dir() else ():
        if f"{folder_name}/{path.name}" not in (keep or set()):
            with contextlib.suppress(OSError):
                path.unlink()


def _write_summary(root: Path, kind: sm.Kind, top: bytes, files: dict[str, bytes]) -> set[str]:
    for relative, data in files.items():
        write_if_changed(root / relative, data)
    write_if_changed(root / kind.file, top)
    return set(files)


def _drop_summary(root: Path, kind: sm.Kind) -> None:
    with contextlib.suppress(FileNotFoundError):
        (root / kind.file).unlink()


def write_if_changed(path: Path, data: bytes) -> None:
    if not path.is_file() or path.stat().st_size != len(data) or path.read_bytes() != data:
        atomic_write_bytes(path, data)


# ---------------------------------------------------------------------------
# Ledger lines a writer appends under the store's lock, before the head it signs.


def append_locked(
    root: Path,
    location: str,
    drafts: list[Draft],
    key: Ed25519PrivateKey,
    recorded: Callable[[Draft, list[LedgerEntry]], bool] = lambda _draft, _entries: False,
) -> list[LedgerEntry]:
    """`append_new` for a writer that holds the store's lock: the `drafts` not `recorded` yet, a
    repair entry for a ledger summary the head does not vouch for, then the head; the entries
    written (none: nothing is written, the head is not signed again)."""
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
    stale = drifted(root, key.public_key(), (LEDGER_SUMMARY_FILE,))
    restored = "made again from the ledger, each line of it verified"
    new, written = old, []
    for draft in [*fresh, *repair_drafts(location, stale, restored)]:
        if draft in fresh and recorded(draft, written):
            continue
        last = new.splitlines(keepends=True)[-1] if new else None
        full = chained(draft, last, len(entries) + len(written))
        new += sign_line(full, key)
        written.append(full)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, new)
    keep = write_ledger_summary(root, [*entries, *written], new)  # before the head
    sign_head(root, key, (LEDGER_FILE, LEDGER_SUMMARY_FILE))
    sweep_summary(root, keep, LEDGER_SUMMARY_DIR)
    return written


def repair_drafts(location: str, found: list[Repair], restored: str) -> list[Draft]:
    """Warn of each file found differing from the signed head and what was `restored` in
    its place; their ledger entries."""
    now = utc_now()
    drafts = []
    for repair in found:
        done = dataclasses.replace(repair, restored=repair.restored or restored)
        progress.warn(f"store {location}: {done.line()}; recorded in the ledger")
        drafts.append(repair_entry(done, now))
    return drafts


def record_repairs(root: Path, location: str, found: list[Repair], key: Ed25519PrivateKey) -> None:
    """For a writer holding the lock: each of `found` said and appended to the ledger."""
    if found:
        append_locked(root, location, repair_drafts(location, found, ""), key)


def _document_bytes(path: Path, what: str) -> bytes:
    """A manifest or statement handed to the store, bounded (core.bounded.MAX_DOCUMENT)."""
    try:
        return bounded.read_file(path, bounded.MAX_DOCUMENT, what)
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found") from None


def _sidecar(path: Path) -> str:
    """A stored wheel's `.sha256` beside it: 64 hex digits and a newline, read bounded
    (at most 1 KiB; a larger one reads as empty: it matches no wheel)."""
    try:
        return bounded.read_file(path, 1024, "sha256 sidecar").decode("ascii").strip()
    except (OSError, ValueError, BadInput):
        return ""


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where}: not UTF-8 text (byte {exc.start})")


class HttpStore:
    """A manifest store served as static files (read-only). Every read is bounded: a safe store
    path under its URL, redirects within its origin, `limit` bytes, $VPR_STORE_TIMEOUT seconds."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.location = redact_url(self.url)

    def where(self, relative: str) -> str:
        return redact_url(self.url + relative)

    def read_text(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> str:
        return _text(self.read_bytes(relative, limit), self.where(relative))

    def find_links(self) -> str:
        return self.url + f"{WHEELS}/index.html"

    def read_bytes(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> bytes:
        from vllm_plugin_release.edges import httpio

        url = self.url + urllib.parse.quote(store_path(relative, self.location), safe="/")
        try:
            deadline = settings.number("VPR_STORE_TIMEOUT")
            return httpio.get(url, limit, deadline, what="manifest store")
        except httpio.NotFound:
            raise Missing(
                f"{redact_url(url)}: not found (HTTP 404)",
                hint="is this the manifest store's base URL?",
            )

    def add(
        self, manifest_path: Path, statement_path: Path | None = None, extras: Extras | None = None
    ) -> AddResult:
        raise BadInput(
            f"{self.location}: an HTTP manifest store is read-only",
            hint="publish to the folder that is served (--store PATH)",
        )


Store = DirStore | HttpStore


def open_store(location: str | Path) -> Store:
    text = str(location)
    if text.startswith(("http://", "https://")):
        _check_url(text)
        return HttpStore(text)
    if text.startswith("file://"):
        return DirStore(Path(urllib.parse.unquote(urllib.parse.urlsplit(text).path)))
    if "://" in text:
        raise BadInput(f"--store {text}: unsupported scheme", hint="use a folder or http(s)://")
    return DirStore(Path(text))


def _check_url(text: str) -> None:
    """An http(s) store URL that parses, with a host and a port that is a number."""
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise BadInput(
            f"--store {redact_url(text)}: not a valid URL ({exc})",
            hint="give the store's base URL, e.g. https://host/store/",
        )
    if not parts.hostname or parts.query or parts.fragment or any(c.isspace() for c in text):
        raise BadInput(
            f"--store {redact_url(text)}: not a store base URL (it needs a host, and no "
            "query, fragment or spaces)",
            hint="give the store's base URL, e.g. https://host/store/",
        )
