"""The ledger, last-known-good pointers and nightly schedules in a manifest store (the files;
their content is `core.ledger`'s and `core.schedule`'s): a writer checks the ledger before
it appends, puts its file in place and signs the store's head last."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import bounded, progress, signed
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.ledger import (
    LEDGER_FILE,
    Draft,
    LedgerEntry,
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
from vllm_plugin_release.core.storeindex import store_path
from vllm_plugin_release.core.summary import LEDGER_SUMMARY_FILE
from vllm_plugin_release.edges.store import (
    DirStore,
    HttpStore,
    Store,
    append_locked,
    drifted,
    record_repairs,
    sign_head,
)
from vllm_plugin_release.edges.trust import Trusted

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from vllm_plugin_release.core.storehead import Head

LKG_DIR = "lkg"


def _writable(store: Store) -> DirStore:
    if isinstance(store, HttpStore):
        raise BadInput(
            f"{store.location}: an HTTP manifest store is read-only",
            hint="write the ledger to the folder that is served (--store PATH)",
        )
    return store


def read_ledger(store: Store, public_key: Ed25519PublicKey) -> list[LedgerEntry]:
    """Every ledger entry, verified through the store's signed head (`edges.trust`):
    GateFailed (exit 1) at the first bad line, or a ledger the head does not vouch for."""
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
    """Append each of `drafts` the ledger has not `recorded` yet, in one write and one signed head;
    the entries written (none: nothing is written)."""
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
    """`payload` signed (`core.signed`) into `relative`, then the store's head, under the
    lock."""
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


def sign_store(store: Store, key: Ed25519PrivateKey) -> Head:
    """`vpr manifest sign-store`: a new head over every file of a reviewed store folder, as
    it is now (a person vouches for it), after what can be checked with the key is: each
    ledger line (signature, chain), each pointer's and schedule's signature, the index."""
    from vllm_plugin_release.core.storeindex import INDEX_FILE, index_from
    from vllm_plugin_release.core.summary import SUMMARY_FILE
    from vllm_plugin_release.edges.store import vouched_files

    target = _writable(store)
    if not target.root.is_dir():
        raise BadInput(f"{target.root}: manifest store not found")
    public = key.public_key()
    with target.locked():
        for relative in vouched_files(target.root):
            data = bounded.read_file(target.root / relative, bounded.MAX_INDEX, "store file")
            where = str(target.root / relative)
            if relative in (SUMMARY_FILE, LEDGER_SUMMARY_FILE):
                continue  # made again from index.json and the ledger when the head is signed
            if relative == LEDGER_FILE:
                parse_ledger(data, public, where)
            elif relative == INDEX_FILE:
                index_from(data, where)
            else:
                kind = LKG_TYPE if relative.startswith(f"{LKG_DIR}/") else SCHEDULE_TYPE
                signed.check(data, kind, public, where, what="signed document", hint="")
        return sign_head(target.root, key, everything=True)
