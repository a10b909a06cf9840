"""Writing the store summary (`core.storesummary`; read by `edges.storesummary`) and the
ledger summary (`core.ledgersummary`; read by `edges.ledgersummary`): every writer of
index.json or of the ledger calls it under the store's lock, after index.json or the
ledger and before the head.

The files under summary/ (ledger/summary/) that are new (each named by its sha256, so an
existing name already holds those bytes unless it was tampered with, which is then
rewritten), then
summary.json (ledger/summary.json), renamed into place; after the head, the files there
that the new summary does not name are removed (`sweep`). A publisher killed in between leaves
complete files, which the old head does not vouch for; the next writer sweeps them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import storesummary as ss
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from vllm_plugin_release.core.ledger import LedgerEntry


def write(root: Path, index: si.StoreIndex, index_data: bytes) -> set[str]:
    """The summary of `index` (whose file is `index_data`) into the store folder `root`;
    the store paths it names (keep them when sweeping)."""
    from vllm_plugin_release.core.storeview import render_matrix

    m = si.matrix(index)
    renders = {fmt: render_matrix(m, fmt) for fmt in ss.FORMATS}
    top, files = ss.build(si.query(index), index_data, renders)
    for relative, data in files.items():
        _write_if_changed(root / relative, data)
    _write_if_changed(root / ss.SUMMARY_FILE, top)
    return set(files)


def refresh(root: Path) -> set[str] | None:
    """The summary of the store's index.json as it is now (for a head signed over every
    file, `vpr manifest sign-store`); without a readable index.json, no summary at all
    (summary.json removed: consumers then read index.json and say what is wrong with
    it). The store paths the summary names, None when there is none."""
    path = root / si.INDEX_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "store index")
        index = si.index_from(data, str(path))
    except (FileNotFoundError, BadInput):
        with contextlib.suppress(FileNotFoundError):
            (root / ss.SUMMARY_FILE).unlink()
        return None
    return write(root, index, data)


def write_ledger(root: Path, entries: list[LedgerEntry], ledger_data: bytes) -> set[str]:
    """The ledger summary of `entries` (verified, oldest first: the ledger whose file is
    `ledger_data`) into the store folder `root`; the store paths it names."""
    from vllm_plugin_release.core import ledgersummary as ls
    from vllm_plugin_release.core.storehead import ledger_record

    top, files = ls.build(entries, ledger_record(ledger_data))
    for relative, data in files.items():
        _write_if_changed(root / relative, data)
    _write_if_changed(root / ls.LEDGER_SUMMARY_FILE, top)
    return set(files)


def refresh_ledger(root: Path, public_key: Ed25519PublicKey) -> set[str] | None:
    """The ledger summary of the store's ledger as it is now (for a head signed over every
    file), each line of it verified first; without a ledger that verifies, no ledger
    summary at all (the head's own check of the ledger then says what is wrong with it).
    The store paths the summary names, None when there is none."""
    from vllm_plugin_release.core.ledger import LEDGER_FILE, parse_ledger
    from vllm_plugin_release.core.ledgersummary import LEDGER_SUMMARY_FILE

    path = root / LEDGER_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "ledger")
        entries = parse_ledger(data, public_key, str(path))
    except (FileNotFoundError, BadInput, GateFailed):
        with contextlib.suppress(FileNotFoundError):
            (root / LEDGER_SUMMARY_FILE).unlink()
        return None
    return write_ledger(root, entries, data)


def sweep(root: Path, keep: set[str] | None, folder_name: str = ss.SUMMARY_DIR) -> None:
    """Remove the files under `folder_name` (summary/, ledger/summary/) that the current
    summary does not name."""
    folder = root / folder_name
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if f"{folder_name}/{path.name}" not in (keep or set()):
            with contextlib.suppress(OSError):
                path.unlink()


def _write_if_changed(path: Path, data: bytes) -> None:
    if not path.is_file() or path.stat().st_size != len(data) or path.read_bytes() != data:
        atomic_write_bytes(path, data)
