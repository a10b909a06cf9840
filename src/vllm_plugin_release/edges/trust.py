"""The one consumer-side trust path over a manifest store (`Trusted`): the signed head first,
then each file it vouches for, bounded by its signed size and sha256, then parsed; the store's
summaries, ledger, last-known-good pointers and nightly schedules read through it (and written)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from vllm_plugin_release.core import bounded, progress, signed
from vllm_plugin_release.core import ledger as lg
from vllm_plugin_release.core import storehead as sh
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import summary as sm
from vllm_plugin_release.core.attest import keyid
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.ledger import (
    GENESIS,
    LEDGER_FILE,
    Draft,
    LedgerEntry,
    line_digest,
    parse_ledger,
)
from vllm_plugin_release.core.schedule import (
    LKG_TYPE,
    SCHEDULE_TYPE,
    Pointer,
    ScheduleState,
    parse_pointer,
    state_from,
)
from vllm_plugin_release.core.storeindex import (
    INDEX_FILE,
    Missing,
    StoreIndex,
    empty_index,
    index_from,
    store_path,
)
from vllm_plugin_release.edges.store import (
    DirStore,
    HttpStore,
    Store,
    append_locked,
    drifted,
    record_repairs,
    sign_head,
    vouched_files,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

TRUST_DIR = "trust"  # under the cache folder: the newest head seen per store and key


class Trusted:
    """A store read through its signed head. `memory`: where the newest head seen is kept (None:
    nowhere). `fresh`: refuse an expired head. `required`: refuse a store without a head (else it
    reads as empty)."""

    def __init__(
        self,
        store: Store,
        public_key: Ed25519PublicKey,
        *,
        memory: Path | None,
        fresh: bool = True,
        required: bool = True,
        now: dt.datetime | None = None,
    ) -> None:
        self.store = store
        self.location = store.location
        self.public_key = public_key
        self.keyid = keyid(public_key)
        self.memory = memory
        self.fresh = fresh
        self.required = required
        self.now = now or dt.datetime.now(dt.timezone.utc)
        self._head: sh.Head | None = None
        self._read_head = False

    def head(self) -> sh.Head | None:
        if not self._read_head:
            self._head = self._load_head()
            self._read_head = True
        return self._head

    def forget_head(self) -> None:
        """Read the head again on next use (a writer may have signed a new one)."""
        self._read_head = False

    def _load_head(self) -> sh.Head | None:
        where = self.store.where(sh.HEAD_FILE)
        try:
            data = self.store.read_bytes(sh.HEAD_FILE, sh.MAX_HEAD)
        except Missing as exc:
            if not self.required:
                return None
            if isinstance(self.store, DirStore) and not self.store.root.is_dir():
                raise BadInput(exc.message, hint=exc.hint)
            if not self._has(INDEX_FILE) and not self._has(LEDGER_FILE):
                raise BadInput(
                    f"{self.location}: not a manifest store (no head.json, index.json or "
                    "ledger there)",
                    hint="is this the manifest store's folder or base URL?",
                )
            raise GateFailed(
                f"{where}: the store has no signed head, so nothing in it can be trusted",
                hint="stores written before vpr signed them have none: their publisher "
                "signs one with `vpr manifest sign-store`",
            )
        payload = signed.verify(
            data, sh.PAYLOAD_TYPE, self.public_key, where, what="store head", hint=sh.HINT
        )
        head = sh.parse(
            payload, keyid=self.keyid, digest=hashlib.sha256(data).hexdigest(), where=where
        )
        if self.fresh:
            sh.check_fresh(head, self.now, where)
        sh.check_not_older(head, self._seen(), where)
        self._remember(head)
        return head

    def _has(self, relative: str) -> bool:
        try:
            self.store.read_bytes(relative, 0)
        except Missing:
            return False
        except BadInput:  # there, of any size
            return True
        return True

    def _memory_file(self) -> Path | None:
        if self.memory is None:
            return None
        where = (
            os.path.abspath(self.store.root) if isinstance(self.store, DirStore) else self.location
        )  # one record per store however its folder is named
        name = hashlib.sha256(f"{where}\0{self.keyid}".encode()).hexdigest()[:32]
        return self.memory / f"{name}.json"

    def _seen(self) -> sh.Seen | None:
        path = self._memory_file()
        if path is None:
            return None
        try:
            return sh.seen_from(bounded.read_file(path, sh.MAX_HEAD, "trust record"))
        except (FileNotFoundError, BadInput):
            return None  # no record (or a damaged one): nothing seen here yet

    def _remember(self, head: sh.Head) -> None:
        path = self._memory_file()
        seen = self._seen()
        if path is None or (seen is not None and seen.version == head.version):
            return
        record = {
            "location": self.location,
            "keyid": self.keyid,
            "version": head.version,
            "digest": head.digest,
            "time": head.time,
        }
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_bytes(path, (json.dumps(record, sort_keys=True) + "\n").encode())
        path.chmod(0o600)

    def read(self, relative: str) -> bytes | None:
        """The bytes of `relative` exactly as the head signs them; None when the head does
        not list it (or, for a reader that does not require one, there is no head)."""
        for again in (True, False):
            head = self.head()
            if head is None or relative not in head.files:
                return None
            data = self._bytes(relative, head.files[relative].size)
            if data is not None and sh.file_record(data).same_file(head.files[relative]):
                return data
            if again:  # a writer may have just moved on: once more, with its new head
                self._read_head = False
        where = self.store.where(relative)
        if data is None:
            raise GateFailed(
                f"{where}: larger than the {head.files[relative].size} bytes the store's "
                f"signed head (version {head.version}) vouches for",
                hint=sh.HINT,
            )
        sh.check_file(head, relative, data, where)
        return data

    def _bytes(self, relative: str, size: int) -> bytes | None:
        """The file, read with its signed size as the cap (None: it is larger)."""
        try:
            return self.store.read_bytes(relative, size)
        except bounded.TooLarge:
            return None
        except Missing:
            raise GateFailed(
                f"{self.store.where(relative)}: the store's signed head lists it, but it is "
                "missing",
                hint=sh.HINT,
            )

    def index(self) -> StoreIndex:
        """The store index the head vouches for, checked (an empty index when it has none)."""
        data = self.read(INDEX_FILE)
        if data is None:
            return empty_index()
        return index_from(data, self.store.where(INDEX_FILE))

    def ledger(self) -> list[LedgerEntry]:
        """Every ledger entry, verified line by line (naming the first bad line), then held
        to the head's signed count, last entry and digest: a ledger cut short, frozen or
        from another state of the store is refused."""
        where = self.store.where(LEDGER_FILE)
        for again in (True, False):
            head = self.head()
            record = head.files.get(LEDGER_FILE) if head else None
            data = self._bytes(LEDGER_FILE, record.size) if record else b""
            if data is None:  # larger than signed
                data = self.store.read_bytes(LEDGER_FILE, bounded.MAX_INDEX)
            vouched = record is not None and sh.file_record(data).same_file(record)
            try:
                entries = parse_ledger(data, self.public_key, where, vouched=vouched)
                if head is not None:
                    lines = data.splitlines(keepends=True)
                    last = line_digest(lines[-1]) if lines else GENESIS
                    sh.check_ledger(head, LEDGER_FILE, len(entries), last, where)
                    if record:
                        sh.check_file(head, LEDGER_FILE, data, where)
                return entries
            except GateFailed:
                if not again:
                    raise
                self._read_head = False  # a writer may have just moved on
        raise AssertionError("unreachable")

    def document(self, relative: str, payload_type: str, what: str, hint: str) -> bytes | None:
        """A signed document of the store (`core.signed`) the head vouches for: its payload
        (signature checked) for its parser, or None when the head lists none."""
        data = self.read(relative)
        if data is None:
            return None
        return signed.verify(
            data, payload_type, self.public_key, self.store.where(relative), what=what, hint=hint
        )


T = TypeVar("T")


def query(
    trusted: Trusted,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
) -> list[si.IndexEntry]:
    """`storeindex.query` over the store, reading only the summary's chunks that can hold a
    match (the whole index when the head lists no summary)."""

    def read() -> list[si.IndexEntry] | None:
        root = _summary(trusted, sm.STORE)
        if root is None:
            return None
        if core and root.count:
            si.core_matches("0", core)  # a --core that is not one: bad input, as for an index
        pairs: dict[str, si.IndexEntry] = {}
        where = trusted.store.where(sm.SUMMARY_FILE)
        for number in sm.chunks_for(root, core=core, plugin=plugin, verdict=verdict, where=where):
            rec = root.chunk(sm.STORE, number, where)
            relative = sm.STORE.chunk_path(rec.sha256)
            at = trusted.store.where(relative)
            entries = sm.chunk_entries(sm.STORE, read_file(trusted, relative, rec), rec.count, at)
            got = [(e.get("pairing_id") if isinstance(e, dict) else None, e) for e in entries]
            pairs.update(si.parse_entries(got, at))
        found = si.query(si.StoreIndex(pairs), core=core, plugin=plugin, verdict=verdict)
        sm.check_depth(found, trusted.store.where(sm.SUMMARY_DIR))
        return found

    found = again(trusted, read)
    if found is None:  # `Trusted.read` tries twice itself
        return si.query(trusted.index(), core=core, plugin=plugin, verdict=verdict)
    return found


def select(
    trusted: Trusted,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
) -> tuple[list[LedgerEntry], int]:
    """(`core.ledger.select` over the ledger, its count), reading only the chunks that can match."""
    filters = {"core": core, "plugin": plugin, "verdict": verdict, "kind": kind}

    def read() -> tuple[list[LedgerEntry], int] | None:
        root = _summary(trusted, sm.LEDGER)
        if root is None:
            return None
        where = trusted.store.where(sm.LEDGER_SUMMARY_FILE)
        found: list[LedgerEntry] = []
        for number in sm.ledger_chunks_for(root, **filters, where=where):
            rec = root.chunk(sm.LEDGER, number, where)
            relative = sm.LEDGER.chunk_path(rec.sha256)
            data = read_file(trusted, relative, rec, sm.LEDGER.hint)
            entries = sm.ledger_entries(data, rec, trusted.store.where(relative))
            found += lg.select(entries, **filters)
        return found, root.count

    got = again(trusted, read)
    if got is None:
        entries = trusted.ledger()
        return lg.select(entries, **filters), len(entries)
    return got


def matrix(trusted: Trusted, fmt: str, kind: sm.Kind = sm.STORE) -> tuple[str, int]:
    """(the compatibility matrix as `vpr manifest matrix` or `vpr manifest ledger --matrix` prints
    it in `fmt`, its count of pairings or entries), from one file."""

    def read() -> tuple[str, int] | None:
        root = _summary(trusted, kind)
        if root is None:
            return None
        rec = root.matrix[fmt]
        relative = kind.matrix_path(rec.sha256, fmt)
        data = read_file(trusted, relative, rec, kind.hint)
        try:
            return data.decode("utf-8"), root.count
        except UnicodeDecodeError as exc:
            where = trusted.store.where(relative)
            raise BadInput(f"{where}: not UTF-8 (byte {exc.start})", hint=kind.hint)

    got = again(trusted, read)
    if got is not None:
        return got
    if kind is sm.LEDGER:  # no summary: the whole ledger, or the whole index
        entries = trusted.ledger()
        return lg.matrix_text(lg.matrix(entries), fmt), len(entries)
    index = trusted.index()
    return si.render_matrix(si.matrix(index), fmt), len(index.pairings)


def again(trusted: Trusted, read: Callable[[], T]) -> T:
    """`read()`, once more with the store's new head if it fails to verify (a writer puts
    its files in place, signs its head, then removes the summary files of before)."""
    try:
        return read()
    except GateFailed:
        trusted.forget_head()
        return read()


def _summary(trusted: Trusted, kind: sm.Kind) -> sm.Root | None:
    """The summary.json of `kind` as the head vouches for it, made from the source file the
    head vouches for; None (with a note when the head lists that file) without one."""
    head = trusted.head()
    where = trusted.store.where(kind.file)
    if head is None or kind.file not in head.files:
        if head is not None and kind.source_file in head.files:
            progress.info(f"{where}: {kind.note}")
        return None
    data = trusted.read(kind.file)
    head = trusted.head()  # the head it verified against (a writer may have moved on)
    if data is None or head is None:  # that new head names no summary
        return None
    root = sm.parse_root(kind, data, where)
    sm.check_bound(kind, root, head.files.get(kind.source_file), where, f"version {head.version}")
    return root


def read_file(
    trusted: Trusted, relative: str, rec: sh.FileRecord | sm.ChunkRecord, hint: str = sm.STORE.hint
) -> bytes:
    """A file under a summary's folder, capped at the size its summary gives, of its sha256."""
    where = trusted.store.where(relative)
    try:
        data = trusted.store.read_bytes(relative, rec.size)
    except bounded.TooLarge:
        raise GateFailed(
            f"{where}: larger than the {rec.size} bytes the store's summary vouches for",
            hint=hint,
        )
    except Missing:
        raise GateFailed(f"{where}: the store's summary lists it, but it is missing", hint=hint)
    got = sh.file_record(data)
    if (got.sha256, got.size) != (rec.sha256, rec.size):
        raise GateFailed(
            f"{where}: not the file the store's summary vouches for: sha256 "
            f"{got.sha256[:16]}, {got.size} bytes; summary.json says "
            f"{rec.sha256[:16]}, {rec.size} bytes",
            hint=hint,
        )
    return data


# -- the ledger, last-known-good pointers and nightly schedules: a writer checks the ledger
# before it appends, puts its file in place and signs the store's head last

LKG_DIR = "lkg"


def _writable(store: Store) -> DirStore:
    if isinstance(store, HttpStore):
        raise BadInput(
            f"{store.location}: an HTTP manifest store is read-only",
            hint="write the ledger to the folder that is served (--store PATH)",
        )
    return store


def read_ledger(store: Store, public_key: Ed25519PublicKey) -> list[LedgerEntry]:
    """Every ledger entry, verified through the store's signed head (`Trusted.ledger`)."""
    return Trusted(store, public_key, memory=None).ledger()


def append(store: Store, entry: Draft, key: Ed25519PrivateKey) -> LedgerEntry:
    """Append `entry` (signed with `key`) to the store's ledger and sign the store's head;
    the entry as chained. The ledger there must verify line by line and be the one the
    head vouches for: a tampered or cut ledger is never extended."""
    return append_new(store, [entry], key, lambda _draft, _entries: False)[0]


def append_new(
    store: Store,
    drafts: list[Draft],
    key: Ed25519PrivateKey,
    recorded: Callable[[Draft, list[LedgerEntry]], bool],
) -> list[LedgerEntry]:
    """Append the `drafts` the ledger has not `recorded` yet, in one write and one signed head."""
    target = _writable(store)
    with target.locked():
        return append_locked(target.root, target.location, drafts, key, recorded)


def _name_path(folder: str, name: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise BadInput(f"pairing name {name!r} cannot name a file in {folder}/")
    return store_path(f"{folder}/{name}.json", f"pairing name {name!r}")


def _write_signed(
    store: Store, relative: str, payload: bytes, payload_type: str, key: Ed25519PrivateKey
) -> Path:
    """`payload` signed into `relative`, then the store's head, under the lock."""
    target = _writable(store)
    path = target.root / relative
    with target.locked():
        found = drifted(target.root, key.public_key(), (relative,))
        restored = "replaced by the document this run signs"
        done = [dataclasses.replace(r, restored=restored) for r in found]
        record_repairs(target.root, target.location, done, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, signed.sign(payload, payload_type, key))
        sign_head(target.root, key, (relative,))
    return path


LKG_HINT = "restore the pointer, or let the next passing nightly run write it again"
NIGHTLY_DIR = "nightly"


def write_lkg(store: Store, name: str, pointer: Pointer, key: Ed25519PrivateKey) -> Path:
    """Move the pairing's last-known-good pointer: the pointer signed (it names its pairing
    and time: `pointer_problem`), then the store's head."""
    return _write_signed(store, _name_path(LKG_DIR, name), pointer.payload(), LKG_TYPE, key)


def read_lkg(
    store: Store | Trusted, name: str, public_key: Ed25519PublicKey | None = None
) -> Pointer | None:
    """The pairing's last-known-good pointer: vouched for by the store's head, signed, and
    naming this pairing (None when the store has none). GateFailed otherwise."""
    trusted = _trusted(store, public_key)
    relative = _name_path(LKG_DIR, name)
    payload = trusted.document(relative, LKG_TYPE, "last-known-good pointer", LKG_HINT)
    if payload is None:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    return parse_pointer(payload, name, now, trusted.store.where(relative), LKG_HINT)


def write_state(store: Store, name: str, state: ScheduleState, key: Ed25519PrivateKey) -> None:
    """The nightly schedule's state for pairing `name`, signed, then the store's head."""
    _write_signed(store, _name_path(NIGHTLY_DIR, name), state.payload(), SCHEDULE_TYPE, key)


def read_state(
    store: Store | Trusted, name: str, public_key: Ed25519PublicKey | None = None
) -> ScheduleState | None:
    """The nightly schedule's state for pairing `name`, None before the first run or when it cannot
    be trusted or read: an untrusted schedule never delays a run, it only loses its backoff."""
    trusted = _trusted(store, public_key)
    relative = _name_path(NIGHTLY_DIR, name)
    try:
        payload = trusted.document(relative, SCHEDULE_TYPE, "nightly schedule", "")
        return None if payload is None else state_from(payload, trusted.store.where(relative))
    except GateFailed as exc:
        progress.warn(f"{exc.message.splitlines()[0]}; running as if there were no schedule")
        return None


def _trusted(store: Store | Trusted, public_key: Ed25519PublicKey | None) -> Trusted:
    if isinstance(store, Trusted):
        return store
    assert public_key is not None, "a store is read with its public key"
    return Trusted(store, public_key, memory=None, fresh=False, required=False)


def sign_store(store: Store, key: Ed25519PrivateKey) -> sh.Head:
    """`vpr manifest sign-store`: a new head over every file of a reviewed store folder, as
    it is now (a person vouches for it), after what can be checked with the key is: each
    ledger line (signature, chain), each pointer's and schedule's signature, the index."""
    target = _writable(store)
    if not target.root.is_dir():
        raise BadInput(f"{target.root}: manifest store not found")
    public = key.public_key()
    with target.locked():
        for relative in vouched_files(target.root):
            data = bounded.read_file(target.root / relative, bounded.MAX_INDEX, "store file")
            where = str(target.root / relative)
            if relative in (sm.SUMMARY_FILE, sm.LEDGER_SUMMARY_FILE):
                continue  # made again from index.json and the ledger when the head is signed
            if relative == LEDGER_FILE:
                parse_ledger(data, public, where)
            elif relative == INDEX_FILE:
                index_from(data, where)
            else:
                kind = LKG_TYPE if relative.startswith(f"{LKG_DIR}/") else SCHEDULE_TYPE
                signed.check(data, kind, public, where, what="signed document", hint="")
        return sign_head(target.root, key, everything=True)
