"""The store summary (`STORE/summary.json` and `STORE/summary/`) as data: what `vpr manifest
query` and `matrix` read instead of the whole `index.json` (pure; the files are
`edges.storesummary`'s).

A publisher derives it from the index it has just written, and the store's signed head
vouches for `summary.json` (sha256, size) as for every other file:

  summary.json          kind, schema_version; `index`: the sha256 and size of the index.json
                        it was made from (a summary of another state of the store is
                        refused); `pairings`: how many; `chunks`: the index's entries in
                        query order (newest core first, best verdict, plugin, pairing id)
                        cut into runs of `CHUNK`, each with its sha256, size, count, the
                        core versions of its first and last entry and the plugins (their
                        canonical names) and verdicts in it; `matrix`: the sha256 and size
                        of the compatibility matrix rendered in each format
  summary/<sha256>.json         one chunk: a JSON array of index entries, byte for byte
                                canonical JSON
  summary/<sha256>.FORMAT.txt   the matrix as `vpr manifest matrix --format FORMAT` prints
                                it (`json`: as `--json` does)

Files under summary/ are named by their sha256, so a reader holding a verified
summary.json checks each one it reads against the digest it asked for; a query reads
summary.json and only the chunks that can hold its answer (the core versions bound a
chunk, the plugins and verdicts listed skip it), a matrix one file. Every byte is a
function of the index: the same index gives the same summary.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:  # the entries' type only
    from vllm_plugin_release.core.indexentry import IndexEntry

SUMMARY_FILE = "summary.json"
SUMMARY_DIR = "summary"
SUMMARY_KIND = "vllm-plugin-release/store-summary"
SUMMARY_SCHEMA_VERSION = 1
CHUNK = 128  # entries per chunk: ~0.25 MB; 100,000 pairings make a 0.3 MB summary.json
FORMATS = ("table", "markdown", "html", "json")
HINT = (
    "the store's summary is damaged or from another state of the store; its publisher "
    "writes it again with the next `vpr publish` or with `vpr manifest sign-store`"
)
_NAME = re.compile(r"[-_.]+")
_SHA = re.compile(r"[0-9a-f]{64}")


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares them (packaging's canonicalize_name)."""
    return _NAME.sub("-", name).lower()


def chunk_path(sha256: str) -> str:
    return f"{SUMMARY_DIR}/{sha256}.json"


def matrix_path(sha256: str, fmt: str) -> str:
    return f"{SUMMARY_DIR}/{sha256}.{fmt}.txt"


def record(data: bytes) -> dict[str, Any]:
    """`file_record(data)` as its JSON (what summary.json and the ledger summary write)."""
    return file_record(data).to_json()


class FileRecord(NamedTuple):
    """A file a summary names: its sha256 and size."""

    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size}


def file_record(data: bytes) -> FileRecord:
    return FileRecord(hashlib.sha256(data).hexdigest(), len(data))


class ChunkRecord(NamedTuple):
    """A chunk summary.json names, as reading it needs: its file and how many entries."""

    sha256: str
    size: int
    count: int


class ChunkBounds(NamedTuple):
    """What picking a chunk reads of its record: its first and last entry's core versions,
    the plugins (canonical names) and verdicts in it."""

    cores: tuple[str, str]
    plugins: tuple[str, ...]
    verdicts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SummaryRoot:
    """summary.json, read by `parse_root`: its top checked and typed; each chunk record is
    checked when it is used (`chunk`, `bounds`), so that a read that needs one chunk, or
    none, does not check them all."""

    index: FileRecord
    pairings: int
    matrix: dict[str, FileRecord]  # by format (`FORMATS`)
    _chunks: list[Any]  # the chunk records as read: see `chunk` and `bounds`

    def __len__(self) -> int:
        return len(self._chunks)

    def chunk(self, number: int, where: str) -> ChunkRecord:
        return chunk_record(self, number, where)

    def bounds(self, number: int, where: str) -> ChunkBounds:
        return pick(self._chunks, number, where)


# ---------------------------------------------------------------------------
# Writing


def build(
    ordered: list[IndexEntry], index_data: bytes, renders: dict[str, str]
) -> tuple[bytes, dict[str, bytes]]:
    """(summary.json's bytes, {store path: bytes} of the files under summary/) for the
    index whose file is `index_data`: `ordered` its entries in query order, `renders` its
    matrix in each of `FORMATS`."""
    files: dict[str, bytes] = {}
    chunks = []
    for start in range(0, len(ordered), CHUNK):
        part = ordered[start : start + CHUNK]
        data = _canonical([e.raw for e in part]).encode()  # the entries as written
        rec = record(data)
        files[chunk_path(rec["sha256"])] = data
        chunks.append(
            {
                **rec,
                "count": len(part),
                "cores": [part[0].core.version, part[-1].core.version],
                "plugins": sorted({canonical_name(e.plugin.name) for e in part}),
                "verdicts": sorted({str(e.verdict) for e in part}),
            }
        )
    matrix = {}
    for fmt in FORMATS:
        data = renders[fmt].encode()
        rec = record(data)
        files[matrix_path(rec["sha256"], fmt)] = data
        matrix[fmt] = rec
    root = {
        "kind": SUMMARY_KIND,
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "index": record(index_data),
        "pairings": len(ordered),
        "chunks": chunks,
        "matrix": matrix,
    }
    return (json.dumps(root, indent=1, sort_keys=True) + "\n").encode(), files


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------
# Reading (summary.json verified against the store's head before it is parsed here)


def parse_root(data: bytes, where: str) -> SummaryRoot:
    """summary.json checked at its top: BadInput naming what is malformed. A chunk's record
    is checked when it is used (`pick`, `chunk_record`), so that a read that needs one
    chunk, or none (the matrix), does not check them all; nothing of it is walked whole
    (its values are read by their keys), so its depth needs no walk either."""
    root = checked_root(data, where, ("summary.json", "a store summary"), _root_problem, HINT)
    index, matrix = root["index"], root["matrix"]
    return SummaryRoot(
        index=FileRecord(index["sha256"], index["size"]),
        pairings=root["pairings"],
        matrix={f: FileRecord(matrix[f]["sha256"], matrix[f]["size"]) for f in FORMATS},
        _chunks=root["chunks"],
    )


def checked_root(
    data: bytes,
    where: str,
    names: tuple[str, str],
    problem_of: Callable[[Any], str | None],
    hint: str,
) -> dict[str, Any]:
    """A summary's top (`names`: what it is called, what it is) parsed and checked by
    `problem_of`; BadInput naming what is malformed."""
    import orjson

    try:
        root = orjson.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: {names[0]} is not valid JSON ({exc.msg})", hint=hint)
    problem = problem_of(root)
    if problem:
        raise BadInput(f"{where}: not {names[1]} ({problem})", hint=hint)
    return root


def _root_problem(root: Any) -> str | None:
    if not isinstance(root, dict) or root.get("kind") != SUMMARY_KIND:
        return f"kind {SUMMARY_KIND!r} expected"
    version = root.get("schema_version")
    if not isinstance(version, int) or version != SUMMARY_SCHEMA_VERSION:
        return f"schema_version {bounded.shown(version)}, this vpr reads {SUMMARY_SCHEMA_VERSION}"
    if not _record_ok(root.get("index")):
        return "'index' is not a sha256 and a size"
    chunks, matrix, pairings = root.get("chunks"), root.get("matrix"), root.get("pairings")
    if not isinstance(chunks, list) or not isinstance(matrix, dict):
        return "'chunks' is not a list or 'matrix' not an object"
    if not isinstance(pairings, int) or isinstance(pairings, bool):
        return "'pairings' is not a number"
    for fmt in FORMATS:
        if not _record_ok(matrix.get(fmt)):
            return f"matrix[{fmt!r}] is not a sha256 and a size"
    return None


_PICK_SHAPE = bounded.shape((("cores", (list,)), ("plugins", (list,)), ("verdicts", (list,))))


def pick(chunks: list[Any], number: int, where: str) -> ChunkBounds:
    """Chunk record `number` with what `chunks_for` reads of it checked."""
    chunk = chunks[number]
    problem = bounded.shape_problem(chunk, _PICK_SHAPE)
    cores = chunk["cores"] if problem is None else None
    if problem is None and not (len(cores) == 2 and all(isinstance(c, str) for c in cores)):
        problem = "'cores' is not two versions"
    if problem:
        raise BadInput(f"{where}: chunks[{number}]: {problem}", hint=HINT)
    plugins = tuple(p for p in chunk["plugins"] if isinstance(p, str))  # what a name can match
    verdicts = tuple(v for v in chunk["verdicts"] if isinstance(v, str))
    return ChunkBounds((cores[0], cores[1]), plugins, verdicts)


def chunk_record(root: SummaryRoot, number: int, where: str) -> ChunkRecord:
    """Chunk record `number` with what reading the chunk needs checked (sha256, size,
    count)."""
    chunk = root._chunks[number]
    count = chunk.get("count") if isinstance(chunk, dict) else None
    if not _record_ok(chunk) or not isinstance(count, int) or isinstance(count, bool):
        raise BadInput(
            f"{where}: chunks[{number}]: not a sha256, a size and a count of entries", hint=HINT
        )
    return ChunkRecord(chunk["sha256"], chunk["size"], count)


def _record_ok(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    sha, size = rec.get("sha256"), rec.get("size")
    return (
        isinstance(sha, str)
        and _SHA.fullmatch(sha) is not None
        and isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
    )


def parse_chunk(data: bytes, count: int, where: str) -> list[Any]:
    """A chunk's entries, not yet checked: each is checked (`storeindex.check_entries`)
    before any key of it is read, and for depth (`check_depth`) before it is printed,
    so that a query walks only its answer whole."""
    import orjson

    try:
        entries = orjson.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: a summary chunk that is not valid JSON ({exc.msg})", hint=HINT)
    if not isinstance(entries, list) or len(entries) != count:
        raise BadInput(f"{where}: not a summary chunk of {count} entries", hint=HINT)
    return entries


def check_depth(entries: list[IndexEntry], where: str) -> None:
    """BadInput when an entry nests deeper than `bounded.MAX_DEPTH` (before it is printed)."""
    for entry in entries:
        if bounded.deeper_than(entry.raw, bounded.MAX_DEPTH - 1):
            raise BadInput(
                f"{where}: pairing {bounded.shown(entry.pairing_id)} is nested deeper "
                f"than {bounded.MAX_DEPTH} levels",
                hint=HINT,
            )


def chunks_for(
    root: SummaryRoot,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    where: str = SUMMARY_FILE,
) -> list[int]:
    """The chunks that can hold an entry matching the filters, in order. Only a superset
    is promised: each entry of them is matched again (`storeindex.query`)."""
    picked = range(len(root))
    if core:
        picked = _core_range(root, core, where)
    if plugin:
        name = canonical_name(plugin)
        picked = [i for i in picked if name in root.bounds(i, where).plugins]
    if verdict:
        picked = [i for i in picked if verdict in root.bounds(i, where).verdicts]
    return list(picked)


def _core_range(root: SummaryRoot, core: str, where: str) -> range:
    """The run of chunks whose core versions (newest first: each chunk from cores[0] down
    to cores[1]) can include a match for `core`: an exact version, or a specifier's lower
    and upper bounds (>=, >, ~=, ==; <=, <, ==), found by bisection. Any other specifier
    keeps every chunk."""
    from packaging.version import InvalidVersion, Version

    low, high = _bounds(core)
    n = len(root)

    def cores(i: int) -> tuple[str, str]:
        return root.bounds(i, where).cores

    try:  # from the first chunk whose oldest core (public part) is at or under `high`...
        start = 0 if high is None else _first(n, lambda i: _public(cores(i)[1]) <= high)
        # ...up to the first whose newest core is under `low` (none from there on matches)
        end = n if low is None else _first(n, lambda i: Version(cores(i)[0]) < low)
    except InvalidVersion:
        return range(n)
    return range(start, max(start, end))


def _public(text: str) -> Any:
    from packaging.version import Version

    return Version(Version(text).public)


def _first(n: int, test: Callable[[int], bool]) -> int:
    """The first i in 0..n where `test` holds (it is false, then true, over the range)."""
    return bisect.bisect_left(range(n), True, key=test)


def _bounds(core: str) -> tuple[Any, Any]:
    """(lowest, highest) public version a match for `core` can have; None: unbounded.
    A version's local part (1.0+cpu) is at or above its public version, which is what
    specifiers compare, so the bounds only ever keep more chunks than match."""
    from packaging.version import InvalidVersion, Version

    if core[:1] not in "<>=!~":
        try:
            exact = Version(core)
        except InvalidVersion:
            return None, None
        return exact, Version(exact.public)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specs = SpecifierSet(core)
    except InvalidSpecifier:
        return None, None  # `storeindex.query` says what is wrong with it
    low = high = None
    for spec in specs:
        if spec.version.endswith(".*") or spec.operator in ("!=", "==="):
            continue
        try:
            v = Version(Version(spec.version).public)
        except InvalidVersion:
            continue
        if spec.operator in (">=", ">", "~=", "=="):
            low = v if low is None or v > low else low
        if spec.operator in ("<=", "<", "=="):
            high = v if high is None or v < high else high
    return low, high
