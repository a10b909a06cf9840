"""The ledger summary (`STORE/ledger/summary.json` and `STORE/ledger/summary/`) as data:
what `vpr manifest ledger` reads instead of the whole ledger (pure; the files are
`edges.ledgersummary`'s and `edges.summarywrite`'s).

A writer of the ledger derives it from the ledger it has just verified line by line and
written, and the store's signed head vouches for `ledger/summary.json` (sha256, size) as
for every other file:

  ledger/summary.json   kind, schema_version; `ledger`: the sha256, size, entry count and
                        last line's sha256 of the ledger.jsonl it was made from (the head's
                        record of it: a summary of another state of the store is refused);
                        `entries`: how many; `chunks`: the entries (the signed payloads,
                        oldest first) cut into runs of `CHUNK`, each with its sha256, size,
                        count, the seq of its first entry, and what the filters of
                        `core.ledger.select` match: the core versions, plugin names,
                        verdicts and kinds in it and the first `PREFIX` characters of its
                        core and plugin commits; `matrix`: the sha256 and size of the
                        compatibility matrix of every entry in each of `MATRIX_FORMATS`
  ledger/summary/<sha256>.json              one chunk: a JSON array of entries, canonical
  ledger/summary/<sha256>.FORMAT.txt        the matrix as `vpr manifest ledger --matrix
                                            FORMAT` prints it

Files under ledger/summary/ are named by their sha256, so a reader holding a verified
summary.json checks each one it reads against the digest it asked for; a filtered read
opens summary.json and only the chunks that can hold its answer, the whole matrix one
file. Every byte is a function of the ledger's entries.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core import ledger as lg
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.ledger import LedgerEntry
from vllm_plugin_release.core.storehead import FileRecord
from vllm_plugin_release.core.storesummary import checked_root, record

LEDGER_SUMMARY_FILE = "ledger/summary.json"
LEDGER_SUMMARY_DIR = "ledger/summary"
LEDGER_SUMMARY_KIND = "vllm-plugin-release/ledger-summary"
LEDGER_SUMMARY_SCHEMA_VERSION = 1
CHUNK = 256  # entries per chunk: ~0.1 MB
PREFIX = 12  # commit characters a chunk lists (a longer --core/--plugin prefix: its first 12)
MATRIX_FORMATS = ("markdown", "json")
HINT = (
    "the ledger's summary is damaged or from another state of the store; its writer "
    "writes it again with the next ledger entry or with `vpr manifest sign-store`"
)
_LISTS = ("cores", "plugins", "core_commits", "plugin_commits", "verdicts", "kinds")
_PICK_SHAPE = bounded.shape(tuple((name, (list,)) for name in _LISTS))
_LEDGER_KEYS = ("sha256", "size", "count", "last")


def chunk_path(sha256: str) -> str:
    return f"{LEDGER_SUMMARY_DIR}/{sha256}.json"


def matrix_path(sha256: str, fmt: str) -> str:
    return f"{LEDGER_SUMMARY_DIR}/{sha256}.{fmt}.txt"


# ---------------------------------------------------------------------------
# Writing


def build(entries: list[LedgerEntry], ledger_record: FileRecord) -> tuple[bytes, dict[str, bytes]]:
    """(ledger/summary.json's bytes, {store path: bytes} of the files under ledger/summary/)
    for a ledger whose verified entries are `entries` (oldest first) and whose head record
    (`core.storehead.ledger_record`) is `ledger_record`."""
    files: dict[str, bytes] = {}
    chunks = []
    for start in range(0, len(entries), CHUNK):
        part = entries[start : start + CHUNK]
        raws = [e.raw for e in part]  # the signed payloads, as written
        data = json.dumps(raws, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        rec = record(data.encode())
        files[chunk_path(rec["sha256"])] = data.encode()
        chunks.append({**rec, "count": len(part), "first": start + 1, **_keys(part)})
    matrix = {}
    whole = lg.matrix(entries)
    for fmt in MATRIX_FORMATS:
        data_bytes = lg.matrix_text(whole, fmt).encode()
        rec = record(data_bytes)
        files[matrix_path(rec["sha256"], fmt)] = data_bytes
        matrix[fmt] = rec
    root = {
        "kind": LEDGER_SUMMARY_KIND,
        "schema_version": LEDGER_SUMMARY_SCHEMA_VERSION,
        "ledger": ledger_record.to_json(),
        "entries": len(entries),
        "chunks": chunks,
        "matrix": matrix,
    }
    return (json.dumps(root, indent=1, sort_keys=True) + "\n").encode(), files


def _keys(part: list[LedgerEntry]) -> dict[str, list[str]]:
    """What `core.ledger.select`'s filters compare, of the entries of one chunk."""
    found: dict[str, set[str]] = {name: set() for name in _LISTS}
    for e in part:
        core, plugin = e.core, e.plugin
        for name, value in (
            ("cores", core.version),
            ("plugins", plugin.name),
            ("core_commits", (core.commit or "")[:PREFIX]),
            ("plugin_commits", (plugin.commit or "")[:PREFIX]),
            ("verdicts", e.verdict),
            ("kinds", e.kind),
        ):
            if value:
                found[name].add(str(value))
    return {name: sorted(values) for name, values in found.items()}


# ---------------------------------------------------------------------------
# Reading (ledger/summary.json verified against the store's head before it is parsed here)


@dataclass(frozen=True, slots=True)
class Pick:
    """What a chunk lists for `chunks_for`: the values `core.ledger.select` compares."""

    cores: list[str]
    plugins: list[str]
    core_commits: list[str]
    plugin_commits: list[str]
    verdicts: list[str]
    kinds: list[str]


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """What reading a chunk needs: its sha256, size, count of entries and first seq."""

    sha256: str
    size: int
    count: int
    first: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of ledger/summary.json; each half checked when it is used (as before:
    a filter reads every chunk's `pick`, a read only the chunks it opens' `record`):
    None, with the fault, when malformed."""

    pick: Pick | None
    pick_problem: str | None
    record: ChunkRecord | None


@dataclass(frozen=True, slots=True)
class Summary:
    """ledger/summary.json as read (`parse_root`)."""

    ledger: FileRecord  # the head's record of the ledger it was made from
    ledger_exact: bool  # its `ledger` holds those keys and no other
    entries: int
    chunks: list[Chunk]
    matrix: dict[str, FileRecord]  # for each of MATRIX_FORMATS


def parse_root(data: bytes, where: str) -> Summary:
    """ledger/summary.json checked at its top: BadInput naming what is malformed (a chunk's
    record is checked when it is used: `chunks_for`, `chunk_record`)."""
    names = ("the ledger summary", "a ledger summary")
    root = checked_root(data, where, names, _root_problem, HINT)
    led, matrix = root["ledger"], root["matrix"]
    return Summary(
        ledger=FileRecord(led["sha256"], led["size"], led["count"], led["last"]),
        ledger_exact=set(led) == set(_LEDGER_KEYS),
        entries=root["entries"],
        chunks=[_chunk(c) for c in root["chunks"]],
        matrix={f: FileRecord(matrix[f]["sha256"], matrix[f]["size"]) for f in MATRIX_FORMATS},
    )


def _chunk(chunk: Any) -> Chunk:
    problem = bounded.shape_problem(chunk, _PICK_SHAPE)
    if problem is None and not all(all(isinstance(v, str) for v in chunk[n]) for n in _LISTS):
        problem = "a list of names that holds something else"
    pick = None if problem else Pick(*(chunk[name] for name in _LISTS))
    record = None
    if _record_ok(chunk) and _count_ok(chunk.get("count")) and _count_ok(chunk.get("first")):
        record = ChunkRecord(chunk["sha256"], chunk["size"], chunk["count"], chunk["first"])
    return Chunk(pick, problem, record)


def _root_problem(root: Any) -> str | None:
    if not isinstance(root, dict) or root.get("kind") != LEDGER_SUMMARY_KIND:
        return f"kind {LEDGER_SUMMARY_KIND!r} expected"
    version = root.get("schema_version")
    if not isinstance(version, int) or version != LEDGER_SUMMARY_SCHEMA_VERSION:
        return (
            f"schema_version {bounded.shown(version)}, this vpr reads "
            f"{LEDGER_SUMMARY_SCHEMA_VERSION}"
        )
    led = root.get("ledger")
    if (
        not _record_ok(led)
        or not _count_ok(led.get("count"))
        or not isinstance(led.get("last"), str)
    ):
        return "'ledger' is not a sha256, a size, a count and a last entry"
    chunks, matrix = root.get("chunks"), root.get("matrix")
    if not isinstance(chunks, list) or not isinstance(matrix, dict):
        return "'chunks' is not a list or 'matrix' not an object"
    if not _count_ok(root.get("entries")) or root["entries"] != led["count"]:
        return "'entries' is not the ledger's count of entries"
    for fmt in MATRIX_FORMATS:
        if not _record_ok(matrix.get(fmt)):
            return f"matrix[{fmt!r}] is not a sha256 and a size"
    return None


def _count_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record_ok(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    sha = rec.get("sha256")
    return isinstance(sha, str) and len(sha) == 64 and _count_ok(rec.get("size"))


def check_bound(root: Summary, head_record: FileRecord | None, where: str, head: str) -> None:
    """GateFailed unless the summary was made from the ledger the store's signed head
    (`head`: its description) records as `head_record`."""
    got = root.ledger
    if head_record is None or not root.ledger_exact or got != head_record:
        count = None if head_record is None else head_record.count
        sha = None if head_record is None else head_record.sha256
        raise GateFailed(
            f"{where}: made from a ledger of {got.count} entries (sha256 "
            f"{got.sha256[:16]}), not the ledger the store's signed head ({head}) vouches "
            f"for ({count} entries, sha256 {str(sha)[:16]}): a summary of "
            "another state of the store",
            hint=HINT,
        )


def chunks_for(
    root: Summary,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
    where: str = LEDGER_SUMMARY_FILE,
) -> list[int]:
    """The chunks that can hold an entry `core.ledger.select` keeps for the filters, in
    order. Only a superset is promised: each entry of them is selected again."""
    picked = []
    for number, chunk in enumerate(root.chunks):
        pick = chunk.pick
        if pick is None:
            raise BadInput(f"{where}: chunks[{number}]: {chunk.pick_problem}", hint=HINT)
        if core and core not in pick.cores and not _prefixed(pick.core_commits, core):
            continue
        if plugin and plugin not in pick.plugins and not _prefixed(pick.plugin_commits, plugin):
            continue
        if verdict and verdict not in pick.verdicts:
            continue
        if kind and kind not in pick.kinds:
            continue
        picked.append(number)
    return picked


def _prefixed(sorted_prefixes: list[str], text: str) -> bool:
    """Whether a commit listed by its first `PREFIX` characters (sorted) can start with
    `text`."""
    want = text[:PREFIX]
    at = bisect.bisect_left(sorted_prefixes, want)
    return at < len(sorted_prefixes) and sorted_prefixes[at].startswith(want)


def chunk_record(root: Summary, number: int, where: str) -> ChunkRecord:
    """Chunk record `number` with what reading the chunk needs checked (sha256, size,
    count, first)."""
    rec = root.chunks[number].record
    if rec is None:
        raise BadInput(
            f"{where}: chunks[{number}]: not a sha256, a size, a count and a first entry",
            hint=HINT,
        )
    return rec


def parse_chunk(data: bytes, rec: ChunkRecord, where: str) -> list[LedgerEntry]:
    """A chunk's entries, each of a ledger entry's shape, numbered from the chunk's first
    seq on, and no deeper than `bounded.MAX_DEPTH`."""
    import orjson

    try:
        entries = orjson.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{where}: a ledger summary chunk that is not valid JSON ({exc.msg})", hint=HINT
        )
    if not isinstance(entries, list) or len(entries) != rec.count:
        raise BadInput(f"{where}: not a ledger summary chunk of {rec.count} entries", hint=HINT)
    out = []
    for offset, entry in enumerate(entries):
        seq = rec.first + offset
        problem = lg.entry_problem(entry)
        if problem is None and not lg.is_seq(entry.get("seq"), seq):
            problem = f"seq {bounded.shown(entry.get('seq'))}, expected {seq}"
        if problem is None and bounded.deeper_than(entry, bounded.MAX_DEPTH - 1):
            problem = f"nested deeper than {bounded.MAX_DEPTH} levels"
        if problem:
            raise BadInput(
                f"{where}: entry {offset + 1}: not ledger entry #{seq} ({problem})", hint=HINT
            )
        out.append(lg.entry_from(entry, seq))
    return out
