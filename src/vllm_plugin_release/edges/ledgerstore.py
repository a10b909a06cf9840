"""The ledger and last-known-good pointers in a manifest store (files; the content is
`core.ledger`'s).

  STORE/ledger/ledger.jsonl            the signed, chained pairing ledger (append-only)
  STORE/lkg/<pairing name>.json        last-known-good core commit of a nightly pairing,
                                       with its ed25519 signature by the manifest key
  STORE/nightly/<pairing name>.json    the nightly schedule's state (last run, failures)

Writers take the store's lock; the ledger is checked (every signature and link) before
an entry is appended, so a tampered ledger is never extended, and the new file is the old
bytes plus one line, renamed into place.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.attest import keyid
from vllm_plugin_release.core.cache import atomic_write_bytes, canonical_json
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.ledger import LEDGER_FILE, chained, parse_ledger, sign_line
from vllm_plugin_release.edges.store import DirStore, HttpStore, Missing, Store

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

LKG_DIR = "lkg"


def _writable(store: Store) -> DirStore:
    if isinstance(store, HttpStore):
        raise BadInput(
            f"{store.location}: an HTTP manifest store is read-only",
            hint="write the ledger to the folder that is served (--store PATH)",
        )
    return store


def read_bytes(store: Store, relative: str, limit: int = bounded.MAX_DOCUMENT) -> bytes:
    """A store file's bytes (bounded: `Store.read_bytes`); b"" when it does not exist yet."""
    try:
        return store.read_bytes(relative, limit)
    except Missing:  # none yet
        return b""


def read_ledger(store: Store, public_key: Ed25519PublicKey) -> list[dict[str, Any]]:
    """Every ledger entry, verified (GateFailed, exit 1, at the first bad line)."""
    data = read_bytes(store, LEDGER_FILE, bounded.MAX_INDEX)
    return parse_ledger(data, public_key, _where(store, LEDGER_FILE))


def _where(store: Store, relative: str) -> str:
    return f"{store.location.rstrip('/')}/{relative}"


@contextlib.contextmanager
def _locked(store: DirStore) -> Iterator[None]:
    from filelock import Timeout

    store.root.mkdir(parents=True, exist_ok=True)
    try:
        with store._lock():
            yield
    except Timeout:
        raise OutsideFailure(
            f"{store.root}: manifest store still locked after {store.lock_timeout:.0f} s",
            hint="another publisher holds it; the lock is released when that process ends",
        )


def append(store: Store, entry: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """Append `entry` (signed with `key`) to the store's ledger; the entry as chained."""
    target = _writable(store)
    path = target.root / LEDGER_FILE
    with _locked(target):
        old = path.read_bytes() if path.exists() else b""
        entries = parse_ledger(old, key.public_key(), str(path))
        last = old.splitlines(keepends=True)[-1] if old else None
        full = chained(entry, last, len(entries))
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, old + sign_line(full, key))
    return full


def _lkg_path(name: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise BadInput(f"pairing name {name!r} cannot name a last-known-good pointer")
    return f"{LKG_DIR}/{name}.json"


def write_lkg(store: Store, name: str, pointer: dict[str, Any], key: Ed25519PrivateKey) -> Path:
    """Move the pairing's last-known-good pointer: one file, the pointer and its signature
    (ed25519 over the pointer's canonical JSON), renamed into place."""
    target = _writable(store)
    signed = canonical_json(pointer).encode()
    doc = {
        "pointer": pointer,
        "keyid": keyid(key.public_key()),
        "sig": base64.b64encode(key.sign(signed)).decode(),
    }
    path = target.root / _lkg_path(name)
    with _locked(target):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, (canonical_json(doc) + "\n").encode())
    return path


def read_lkg(store: Store, name: str, public_key: Ed25519PublicKey) -> dict[str, Any] | None:
    """The pairing's last-known-good pointer, its signature checked; None when there is none."""
    from cryptography.exceptions import InvalidSignature

    relative = _lkg_path(name)
    data = read_bytes(store, relative)
    if not data:
        return None
    try:
        doc = json.loads(data)
        pointer = doc["pointer"]
        public_key.verify(
            base64.b64decode(doc["sig"], validate=True), canonical_json(pointer).encode()
        )
    except (InvalidSignature, ValueError, KeyError, TypeError):
        raise GateFailed(
            f"{_where(store, relative)}: the signature does not verify (altered, or another key)",
            hint="restore the pointer, or let the next passing nightly run write it again",
        )
    return pointer


NIGHTLY_DIR = "nightly"


def read_state(store: Store, name: str) -> dict[str, Any] | None:
    """The nightly schedule's state for pairing `name` (None before the first run)."""
    relative = f"{NIGHTLY_DIR}/{_lkg_path(name).split('/', 1)[1]}"
    data = read_bytes(store, relative)
    if not data:
        return None
    try:
        state = json.loads(data)
    except ValueError:
        return None  # unreadable: treated as no earlier run (it only delays or hastens a run)
    return state if isinstance(state, dict) else None


def write_state(store: Store, name: str, state: dict[str, Any]) -> None:
    target = _writable(store)
    path = target.root / NIGHTLY_DIR / _lkg_path(name).split("/", 1)[1]
    with _locked(target):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, (canonical_json(state) + "\n").encode())
