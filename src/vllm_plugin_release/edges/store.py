"""The manifest store, a folder or the same served over HTTP: one manifest per pairing,
`index.json` rebuilt from them under the writers' lock, the certified wheels, run history
(layout: docs/manifest.md). The index's content is `core.storeindex`'s."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded, records
from vllm_plugin_release.core.bounded import loads
from vllm_plugin_release.core.cache import atomic_write_bytes, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.errors import scrub as redact_url  # a URL without its user info
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
    index_from,
    lock_path,
    parse_manifest,
    parse_run,
    rebuild_index,
    run_file_name,
    run_record,
    store_path,
)
from vllm_plugin_release.core.summary import SUMMARY_DIR, SUMMARY_FILE
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from vllm_plugin_release.core.ledger import Repair
    from vllm_plugin_release.core.manifestmodel import Manifest

LOCK_FILE = ".lock"
WRITER_FOLDERS = ("ledger", "lkg", "nightly")  # the ledger's, lkg pointers', schedules' files


def utc_now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    """A manifest store in a local folder (the only kind that can be written).

    `lock_timeout`: seconds a writer waits for the lock; None reads
    $VPR_STORE_LOCK_TIMEOUT (default 120) when the store is opened.
    """

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

    def sign_head(self, wrote: tuple[str, ...]) -> None:
        """Under the lock, after `wrote` is in place: a new signed head (`edges.storehead`)
        when this writer holds the key; without it the head is left as it is (consumers
        then refuse the files it no longer vouches for)."""
        if self.signer is not None:
            from vllm_plugin_release.edges.storehead import sign_head

            sign_head(self.root, self.signer, wrote)

    # -- reading ------------------------------------------------------------
    def where(self, relative: str) -> str:
        return str(self.root / relative)

    def read_index(self) -> StoreIndex:
        """The index as the folder holds it, checked but not verified (what a writer reads;
        a consumer reads it through `edges.trust`)."""
        try:
            data = self.read_bytes(INDEX_FILE, bounded.MAX_INDEX)
        except Missing as exc:
            if not self.root.is_dir():
                raise BadInput(exc.message, hint=exc.hint)
            return empty_index()
        return index_from(data, self.where(INDEX_FILE))

    def read_text(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> str:
        return _text(self.read_bytes(relative, limit), self.where(relative))

    def read_manifest(self, entry: IndexEntry) -> Manifest:
        relative = _manifest_at(entry, self.where(INDEX_FILE))
        return parse_manifest(self.read_text(relative), relative, self.location)

    def read_bytes(self, relative: str, limit: int = bounded.MAX_DOCUMENT) -> bytes:
        """A store file's bytes: `relative` a safe store path (`storeindex.store_path`) that
        stays inside the folder (no link out of it), a regular file of at most `limit`
        bytes; Missing when it is not there, BadInput naming it for anything else."""
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
        """The embedded index, as a find-links location for pip or uv."""
        return str(self.root / WHEELS)

    # -- writing ------------------------------------------------------------
    def _lock(self) -> Any:
        from filelock import FileLock

        return FileLock(str(self.root / LOCK_FILE), timeout=self.lock_timeout)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The writers' lock (waiting up to `lock_timeout`, then exit 3); what a killed
        writer left (dot-named temp files) is swept first."""
        from filelock import Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock():
                self._remove_stale_temps()
                yield
        except Timeout:
            raise OutsideFailure(
                f"{self.root / LOCK_FILE}: manifest store still locked after "
                f"{self.lock_timeout:.0f} s",
                hint="another publisher holds it; the lock is released when that process ends",
            )

    def _remove_stale_temps(self) -> None:
        """Temp files left by a killed writer (only ever written under the lock we now hold),
        in every folder a writer writes: the store, pairings/, wheels/, runs/*/, ledger/,
        lkg/, nightly/."""
        runs = self.root / RUNS
        folders = [
            self.root / name for name in ("", PAIRINGS, WHEELS, SUMMARY_DIR, *WRITER_FOLDERS)
        ]
        folders += [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
        for folder in folders:
            if not folder.is_dir():
                continue
            for p in folder.iterdir():
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        p.unlink()

    def _manifests(self) -> Iterator[tuple[str, bytes, bool]]:
        """(pairing id, manifest bytes, has a statement) for each manifest in pairings/."""
        folder = self.root / PAIRINGS
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            pid = path.stem
            yield pid, path.read_bytes(), (folder / f"{pid}.intoto.jsonl").exists()

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
        rebuild index.json, under the lock."""
        from vllm_plugin_release.core.manifestmodel import parse

        # Read once, bounded: the bytes stored are the bytes validated and parsed.
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
        return AddResult(
            status=status,
            entry=index.pairings[entry.pairing_id],
            previous=previous,
            store=self.location,
        )

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
            _write_if_changed(self.root / lock_path(pid), extras.lock)
        if not unchanged:
            if statement is not None:
                atomic_write_bytes(self.root / PAIRINGS / f"{pid}.intoto.jsonl", statement)
            atomic_write_bytes(target, data)
        if extras.index is not None:
            self._record_run(manifest, entry.manifest_sha256, extras)
        index = rebuild_index(self._manifests(), current, self._extras_reader())
        data = index_bytes(index)
        _write_if_changed(self.root / INDEX_FILE, data)
        page = wheels_page(list(index.pairings.values())).encode()
        _write_if_changed(self.root / WHEELS / "index.html", page)
        from vllm_plugin_release.edges import summary

        keep = summary.write(self.root, index, data)  # before the head, as index.json
        self._record_repairs(repairs, len(index.pairings))
        self.sign_head((INDEX_FILE, SUMMARY_FILE))
        summary.sweep(self.root, keep)
        return previous, unchanged, index

    def _drifted(self, relatives: tuple[str, ...]) -> list[Repair]:
        """Which of `relatives` (files this writer rewrites) are not what the store's signed
        head vouches for; none when this writer cannot check (no key) or there is no head."""
        if self.signer is None:
            return []
        from vllm_plugin_release.edges.storehead import drifted

        return drifted(self.root, self.signer.public_key(), relatives)

    def _record_repairs(self, found: list[Repair], pairings: int) -> None:
        """Say what was restored in place of each file of `found`, and record it in the
        ledger (under the lock this writer holds; before the head it signs)."""
        if not found or self.signer is None:
            return
        from vllm_plugin_release.edges.storehead import record_repairs

        restored = {
            INDEX_FILE: f"rebuilt from the {pairings} manifest(s) in {PAIRINGS}/, nothing "
            "taken from the file found",
            SUMMARY_FILE: f"made again from the {INDEX_FILE} this publish wrote",
        }
        done = [
            dataclasses.replace(r, restored=restored.get(r.file, "written again")) for r in found
        ]
        record_repairs(self.root, self.location, done, self.signer)

    # -- the files beside the manifests ---------------------------------------
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


def _manifest_at(entry: IndexEntry, where: str) -> str:
    """The store path of an entry's manifest; BadInput when its `manifest` is not a string."""
    if entry.manifest is None:
        raise BadInput(
            f"{where}: pairings[{entry.pairing_id!r}]: 'manifest' is not a store path",
            hint="the store index is damaged; restore index.json from a backup or "
            "re-publish the pairing's manifest",
        )
    return entry.manifest


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


def _write_if_changed(path: Path, data: bytes) -> None:
    if not path.exists() or path.read_bytes() != data:
        atomic_write_bytes(path, data)


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where}: not UTF-8 text (byte {exc.start})")


def store_timeout() -> float:
    """Seconds one read from an HTTP store may take in all: $VPR_STORE_TIMEOUT, else 30."""
    return settings.number("VPR_STORE_TIMEOUT")


class HttpStore:
    """A manifest store served as static files (read-only). Every read is bounded: a safe
    store path under the store's URL (never a `file:`, absolute or other-origin URL),
    redirects only within the store's origin, at most `limit` bytes, and the whole answer
    (connecting, headers, body) within `store_timeout()` seconds (`edges.httpio`)."""

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
            return httpio.get(url, limit, store_timeout(), what="manifest store")
        except httpio.NotFound:
            raise Missing(
                f"{redact_url(url)}: not found (HTTP 404)",
                hint="is this the manifest store's base URL?",
            )

    def read_index(self) -> StoreIndex:
        try:
            data = self.read_bytes(INDEX_FILE, bounded.MAX_INDEX)
        except Missing as exc:
            raise BadInput(str(exc.message), hint=exc.hint)
        return index_from(data, self.where(INDEX_FILE))

    def read_manifest(self, entry: IndexEntry) -> Manifest:
        relative = _manifest_at(entry, self.where(INDEX_FILE))
        return parse_manifest(self.read_text(relative), relative, self.location)

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
