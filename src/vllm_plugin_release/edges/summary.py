"""The store's summaries as files (`core.summary`): written under the store's lock after
index.json or the ledger and before the head, read through the store's signed head (a
store whose head lists none is read from its whole index.json or ledger, with a note)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core import ledger as lg
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import summary as sm
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.storehead import FileRecord, file_record
from vllm_plugin_release.core.storeindex import Missing, core_matches

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from vllm_plugin_release.core.ledger import LedgerEntry

T = TypeVar("T")


class Trusted(Protocol):
    """What reading a summary uses of `edges.trust.Trusted` (not imported: it reads through
    `edges.store`, which writes the summaries with this module)."""

    store: Any

    def head(self) -> Any: ...
    def read(self, relative: str) -> bytes | None: ...
    def forget_head(self) -> None: ...
    def index(self) -> si.StoreIndex: ...
    def ledger(self) -> list[LedgerEntry]: ...


# Writing: the new files under the summary's folder (each named by its sha256), then
# summary.json; after the head, `sweep` removes files it does not name. A writer killed between


def write(root: Path, index: si.StoreIndex, index_data: bytes) -> set[str]:
    """The summary of `index` (whose file is `index_data`) into the store folder `root`;
    the store paths it names (keep them when sweeping)."""
    m = si.matrix(index)
    renders = {fmt: si.render_matrix(m, fmt) for fmt in sm.FORMATS}
    return _write(root, sm.STORE, *sm.build(si.query(index), index_data, renders))


def write_ledger(root: Path, entries: list[LedgerEntry], ledger_data: bytes) -> set[str]:
    """The ledger summary of `entries` (verified, oldest first: the ledger whose file is
    `ledger_data`) into the store folder `root`; the store paths it names."""
    from vllm_plugin_release.core.storehead import ledger_record

    return _write(root, sm.LEDGER, *sm.build_ledger(entries, ledger_record(ledger_data)))


def refresh(root: Path) -> set[str] | None:
    """The summary of the store's index.json as it is now; without a readable index.json, none
    (summary.json removed). The store paths the summary names, None when there is none."""
    path = root / si.INDEX_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "store index")
        index = si.index_from(data, str(path))
    except (FileNotFoundError, BadInput):
        return _drop(root, sm.STORE)
    return write(root, index, data)


def refresh_ledger(root: Path, public_key: Ed25519PublicKey) -> set[str] | None:
    """The ledger summary of the store's ledger as it is now, each line verified first; none without
    a ledger that verifies."""
    path = root / lg.LEDGER_FILE
    try:
        data = bounded.read_file(path, bounded.MAX_INDEX, "ledger")
        entries = lg.parse_ledger(data, public_key, str(path))
    except (FileNotFoundError, BadInput, GateFailed):
        return _drop(root, sm.LEDGER)
    return write_ledger(root, entries, data)


def sweep(root: Path, keep: set[str] | None, folder_name: str = sm.SUMMARY_DIR) -> None:
    """Remove the files under `folder_name` (summary/, ledger/summary/) that the current
    summary does not name."""
    folder = root / folder_name
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if f"{folder_name}/{path.name}" not in (keep or set()):
            with contextlib.suppress(OSError):
                path.unlink()


def _write(root: Path, kind: sm.Kind, top: bytes, files: dict[str, bytes]) -> set[str]:
    for relative, data in files.items():
        write_if_changed(root / relative, data)
    write_if_changed(root / kind.file, top)
    return set(files)


def _drop(root: Path, kind: sm.Kind) -> None:
    with contextlib.suppress(FileNotFoundError):
        (root / kind.file).unlink()


def write_if_changed(path: Path, data: bytes) -> None:
    if not path.is_file() or path.stat().st_size != len(data) or path.read_bytes() != data:
        atomic_write_bytes(path, data)


# Reading: a summary.json is read as every file the head vouches for (`Trusted.read`) and
# must name the source file that head vouches for; each file under its folder is read
# with the size summary.json gives as its cap and must have its sha256.


def query(
    trusted: Trusted,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
) -> list[si.IndexEntry]:
    """`storeindex.query` over the store, reading only the chunks that can hold a match."""

    def read() -> list[si.IndexEntry] | None:
        root = _root(trusted, sm.STORE)
        if root is None:
            return None
        if core and root.count:
            core_matches("0", core)  # a --core that is not one: bad input, as for an index
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
    if found is None:  # no summary: the whole index (`Trusted.read` tries twice itself)
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
    """(`core.ledger.select` over the store's ledger, its count of entries), reading only
    the chunks that can hold a match."""
    filters = {"core": core, "plugin": plugin, "verdict": verdict, "kind": kind}

    def read() -> tuple[list[LedgerEntry], int] | None:
        root = _root(trusted, sm.LEDGER)
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
        root = _root(trusted, kind)
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


def _root(trusted: Trusted, kind: sm.Kind) -> sm.Root | None:
    """The summary.json of `kind` as the head vouches for it, made from the source file the
    head vouches for; None (with a note when the head lists that file) without one."""
    head = trusted.head()
    where = trusted.store.where(kind.file)
    if head is None or kind.file not in head.files:
        if head is not None and kind.source_file in head.files:
            from vllm_plugin_release.core import progress

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
    trusted: Trusted, relative: str, rec: FileRecord | sm.ChunkRecord, hint: str = sm.STORE.hint
) -> bytes:
    """A file under a summary's folder, read with the size its summary gives as the cap,
    of its sha256."""
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
    got = file_record(data)
    if (got.sha256, got.size) != (rec.sha256, rec.size):
        raise GateFailed(
            f"{where}: not the file the store's summary vouches for: sha256 "
            f"{got.sha256[:16]}, {got.size} bytes; summary.json says "
            f"{rec.sha256[:16]}, {rec.size} bytes",
            hint=hint,
        )
    return data
