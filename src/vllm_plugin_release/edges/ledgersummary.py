"""Reading the ledger summary (`core.ledgersummary`; written by `edges.summarywrite` under
the store's lock, after the ledger and before the head): `vpr manifest ledger` reads it
through the store's signed head.

Reading, before anything of it is parsed: ledger/summary.json is read as every file the
head vouches for (`Trusted.read`: bounded by the signed size, the signed sha256) and must
name the ledger the head records (sha256, size, entry count, last line: a summary of
another state is refused); each file under ledger/summary/ is read with the size
summary.json gives as its cap and must have its sha256; each entry of a chunk read must be
a ledger entry numbered in its place. A store whose head lists a ledger but no ledger
summary (written before vpr wrote one) is read from its whole ledger, with a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_plugin_release.core import ledger as lg
from vllm_plugin_release.core import ledgersummary as ls
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.storesummary import again, blob

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.edges.trust import Trusted


def select(
    trusted: Trusted,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
) -> tuple[list[LedgerEntry], int]:
    """(`core.ledger.select` over the store's ledger, its count of entries), reading only
    the chunks that can hold a match (without a ledger summary: the whole ledger)."""

    def read() -> tuple[list[LedgerEntry], int] | None:
        root = _root(trusted)
        if root is None:
            return None
        where = trusted.store.where(ls.LEDGER_SUMMARY_FILE)
        found: list[LedgerEntry] = []
        picked = ls.chunks_for(
            root, core=core, plugin=plugin, verdict=verdict, kind=kind, where=where
        )
        for number in picked:
            rec = ls.chunk_record(root, number, where)
            relative = ls.chunk_path(rec.sha256)
            data = blob(trusted, relative, {"sha256": rec.sha256, "size": rec.size}, ls.HINT)
            entries = ls.parse_chunk(data, rec, trusted.store.where(relative))
            found += lg.select(entries, core=core, plugin=plugin, verdict=verdict, kind=kind)
        return found, root.entries

    got = again(trusted, read)
    if got is None:
        entries = trusted.ledger()
        return lg.select(entries, core=core, plugin=plugin, verdict=verdict, kind=kind), len(
            entries
        )
    return got


def matrix(trusted: Trusted, fmt: str) -> tuple[str, int]:
    """(the compatibility matrix of every ledger entry as `vpr manifest ledger --matrix FMT`
    prints it, the count of entries): the summary's rendering, one file read."""

    def read() -> tuple[str, int] | None:
        root = _root(trusted)
        if root is None:
            return None
        rec = root.matrix[fmt]
        relative = ls.matrix_path(rec.sha256, fmt)
        data = blob(trusted, relative, rec.to_json(), ls.HINT)
        try:
            return data.decode("utf-8"), root.entries
        except UnicodeDecodeError as exc:
            raise BadInput(
                f"{trusted.store.where(relative)}: not UTF-8 (byte {exc.start})", hint=ls.HINT
            )

    got = again(trusted, read)
    if got is None:
        entries = trusted.ledger()
        return lg.matrix_text(lg.matrix(entries), fmt), len(entries)
    return got


def _root(trusted: Trusted) -> ls.Summary | None:
    """ledger/summary.json as the head vouches for it, made from the ledger the head
    records; None when the head lists no ledger summary (with a note when it lists a
    ledger)."""
    head = trusted.head()
    if head is None or ls.LEDGER_SUMMARY_FILE not in head.files:
        if head is not None and lg.LEDGER_FILE in head.files:
            from vllm_plugin_release.core import progress

            progress.info(
                f"{trusted.store.where(ls.LEDGER_SUMMARY_FILE)}: the ledger has no summary (it "
                "was written before vpr wrote one): reading and checking every line of it; "
                "its writer writes one with the next ledger entry or with `vpr manifest "
                "sign-store`"
            )
        return None
    data = trusted.read(ls.LEDGER_SUMMARY_FILE)
    head = trusted.head()  # the head it verified against (a writer may have moved on)
    if data is None or head is None:  # that new head names no ledger summary
        return None
    where = trusted.store.where(ls.LEDGER_SUMMARY_FILE)
    root = ls.parse_root(data, where)
    ls.check_bound(root, head.files.get(lg.LEDGER_FILE), where, f"version {head.version}")
    return root
