"""Reading the store summary (`core.storesummary`; written by `edges.summarywrite`, under
the store's lock, after index.json and before the head): `vpr manifest query` and `matrix`
read it through the store's signed head.

Reading, before anything of it is parsed: summary.json is read as every file the head
vouches for (`Trusted.read`: bounded by the signed size, the signed sha256) and must name
the index.json that head vouches for (a summary of another state is refused); each file
under summary/ is read with the size summary.json gives as its cap and must have its
sha256. A store whose head lists no summary (published before vpr wrote one) is read from
its whole index.json, with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import storesummary as ss
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.storetrust import Missing, core_matches

if TYPE_CHECKING:
    from vllm_plugin_release.edges.trust import Trusted

T = TypeVar("T")


# ---------------------------------------------------------------------------
# Reading


def query(
    trusted: Trusted,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
) -> list[si.IndexEntry]:
    """`storeindex.query` over the store, reading only the chunks that can hold a match."""

    def read() -> list[si.IndexEntry] | None:
        root = _root(trusted)
        if root is None:
            return None
        if core and root.pairings:
            core_matches("0", core)  # a --core that is not one: bad input, as for an index
        pairs: dict[str, si.IndexEntry] = {}
        where = trusted.store.where(ss.SUMMARY_FILE)
        for number in ss.chunks_for(root, core=core, plugin=plugin, verdict=verdict, where=where):
            pairs.update(_chunk(trusted, root.chunk(number, where)))
        found = si.query(si.StoreIndex(pairs), core=core, plugin=plugin, verdict=verdict)
        ss.check_depth(found, trusted.store.where(ss.SUMMARY_DIR))
        return found

    found = again(trusted, read)
    if found is None:  # no summary: the whole index (`Trusted.read` tries twice itself)
        return si.query(trusted.index(), core=core, plugin=plugin, verdict=verdict)
    return found


def matrix(trusted: Trusted, fmt: str) -> str:
    """The compatibility matrix as `vpr manifest matrix` prints it in `fmt`
    (`storesummary.FORMATS`): the summary's rendering, one file read."""

    def read() -> str | None:
        root = _root(trusted)
        if root is None:
            return None
        rec = root.matrix[fmt]
        relative = ss.matrix_path(rec.sha256, fmt)
        data = read_file(trusted, relative, rec)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{trusted.store.where(relative)}: not UTF-8 (byte {exc.start})")

    text = again(trusted, read)
    if text is None:  # no summary: the whole index
        from vllm_plugin_release.core.storeview import render_matrix

        return render_matrix(si.matrix(trusted.index()), fmt)
    return text


def again(trusted: Trusted, read: Callable[[], T]) -> T:
    """`read()`, once more with the store's new head if it fails to verify (a writer puts
    its files in place, signs its head, then removes the summary files of before)."""
    try:
        return read()
    except GateFailed:
        trusted.forget_head()
        return read()


def _root(trusted: Trusted) -> ss.SummaryRoot | None:
    """summary.json as the head vouches for it, naming the index.json the head vouches for;
    None (with a note) when the head lists no summary."""
    head = trusted.head()
    if head is None or ss.SUMMARY_FILE not in head.files:
        if head is not None and si.INDEX_FILE in head.files:
            from vllm_plugin_release.core import progress

            progress.info(
                f"{trusted.store.where(ss.SUMMARY_FILE)}: the store has no summary (it was "
                "published before vpr wrote one): reading all of index.json; its publisher "
                "writes one with the next `vpr publish` or with `vpr manifest sign-store`"
            )
        return None
    data = trusted.read(ss.SUMMARY_FILE)
    head = trusted.head()  # the head it verified against (a writer may have moved on)
    if data is None or head is None:  # that new head names no summary
        return None
    where = trusted.store.where(ss.SUMMARY_FILE)
    root = ss.parse_root(data, where)
    index = head.files[si.INDEX_FILE].to_json() if si.INDEX_FILE in head.files else {}
    if {k: index.get(k) for k in ("sha256", "size")} != root.index.to_json():
        raise GateFailed(
            f"{where}: made from index.json sha256 {root.index.sha256[:16]} "
            f"({root.index.size} bytes), not the index.json the store's signed head "
            f"(version {head.version}) vouches for (sha256 {str(index.get('sha256'))[:16]}, "
            f"{index.get('size')} bytes): a summary of another state of the store",
            hint=ss.HINT,
        )
    return root


def _chunk(trusted: Trusted, rec: ss.ChunkRecord) -> dict[str, si.IndexEntry]:
    """A chunk's entries by pairing id, each checked as an index entry is."""
    relative = ss.chunk_path(rec.sha256)
    where = trusted.store.where(relative)
    entries = ss.parse_chunk(read_file(trusted, relative, rec), rec.count, where)
    pairs = [(e.get("pairing_id") if isinstance(e, dict) else None, e) for e in entries]
    return si.parse_entries(pairs, where)


def blob(trusted: Trusted, relative: str, rec: dict[str, Any], hint: str = ss.HINT) -> bytes:
    """`read_file` for a summary's record as its JSON has it ({sha256, size}, checked)."""
    return read_file(trusted, relative, ss.FileRecord(rec["sha256"], rec["size"]), hint)


def read_file(
    trusted: Trusted, relative: str, rec: ss.FileRecord | ss.ChunkRecord, hint: str = ss.HINT
) -> bytes:
    """A file under summary/ (or ledger/summary/), read with the size its summary gives as
    the cap, of its sha256."""
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
    got = ss.file_record(data)
    if got != (rec.sha256, rec.size):
        raise GateFailed(
            f"{where}: not the file the store's summary vouches for: sha256 "
            f"{got.sha256[:16]}, {got.size} bytes; summary.json says "
            f"{rec.sha256[:16]}, {rec.size} bytes",
            hint=hint,
        )
    return data
