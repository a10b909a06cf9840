"""The store's chunked summaries of index.json and of the ledger as data (pure): what a query
reads instead of the whole file. `edges.store` writes them, `edges.trust` reads them."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core import ledger as lg
from vllm_plugin_release.core.cache import canonical_json
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.storehead import FileRecord, count_ok, file_record
from vllm_plugin_release.core.storeindex import IndexEntry, canonical_name

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry

SUMMARY_FILE = "summary.json"
SUMMARY_DIR = "summary"
LEDGER_SUMMARY_FILE = "ledger/summary.json"
LEDGER_SUMMARY_DIR = "ledger/summary"
CHUNK = 128  # index entries per chunk
LEDGER_CHUNK = 256  # ledger entries per chunk
PREFIX = 12  # commit characters a ledger chunk lists (a longer --core/--plugin: its first 12)
FORMATS = ("table", "markdown", "html", "json")
LEDGER_FORMATS = ("markdown", "json")
_SHA = re.compile(r"[0-9a-f]{64}")
_LISTS = ("cores", "plugins", "core_commits", "plugin_commits", "verdicts", "kinds")


class Kind(NamedTuple):
    """What tells one summary from the other: its files, the file it is made from (its
    `source`, a counted one for the ledger), its matrix formats and its messages."""

    file: str
    folder: str
    kind: str
    source_file: str
    source: str  # the key of the source's record in the summary
    count_key: str
    formats: tuple[str, ...]
    counted: bool  # the source's record has a count and a last line; a chunk its first seq
    names: tuple[str, str]  # what the summary is called, what it is
    chunk_name: str
    hint: str
    note: str  # when the head lists the source but no summary

    def chunk_path(self, sha256: str) -> str:
        return f"{self.folder}/{sha256}.json"

    def matrix_path(self, sha256: str, fmt: str) -> str:
        return f"{self.folder}/{sha256}.{fmt}.txt"


STORE = Kind(
    SUMMARY_FILE,
    SUMMARY_DIR,
    "vllm-plugin-release/store-summary",
    "index.json",
    "index",
    "pairings",
    FORMATS,
    False,
    ("summary.json", "a store summary"),
    "summary chunk",
    "the store's summary is damaged or from another state of the store; its publisher "
    "writes it again with the next `vpr publish` or with `vpr manifest sign-store`",
    "the store has no summary (it was published before vpr wrote one): reading all of "
    "index.json; its publisher writes one with the next `vpr publish` or with `vpr "
    "manifest sign-store`",
)
LEDGER = Kind(
    LEDGER_SUMMARY_FILE,
    LEDGER_SUMMARY_DIR,
    "vllm-plugin-release/ledger-summary",
    lg.LEDGER_FILE,
    "ledger",
    "entries",
    LEDGER_FORMATS,
    True,
    ("the ledger summary", "a ledger summary"),
    "ledger summary chunk",
    "the ledger's summary is damaged or from another state of the store; its writer "
    "writes it again with the next ledger entry or with `vpr manifest sign-store`",
    "the ledger has no summary (it was written before vpr wrote one): reading and checking "
    "every line of it; its writer writes one with the next ledger entry or with `vpr "
    "manifest sign-store`",
)
SCHEMA_VERSION = 1


class ChunkRecord(NamedTuple):
    """A chunk as reading it needs: its file, entry count and first seq (the ledger's)."""

    sha256: str
    size: int
    count: int
    first: int = 1


class ChunkBounds(NamedTuple):
    cores: tuple[str, str]
    plugins: tuple[str, ...]
    verdicts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Root:
    """A summary.json, read by `parse_root`: its top checked and typed; each chunk record
    is checked when it is used, so that a read of one chunk, or none, does not check all."""

    source: FileRecord  # the record of the file it was made from
    count: int  # pairings, entries
    matrix: dict[str, FileRecord]  # by format
    chunks: list[Any]  # the chunk records as read
    exact: bool = True  # its source record holds its keys and no other

    def __len__(self) -> int:
        return len(self.chunks)

    def chunk(self, kind: Kind, number: int, where: str) -> ChunkRecord:
        """Chunk record `number` with what reading the chunk needs checked."""
        chunk = self.chunks[number]
        ok = _record_ok(chunk) and count_ok(chunk.get("count"))
        if ok and kind.counted:
            ok = count_ok(chunk.get("first"))
        if not ok:
            shape = "a count and a first entry" if kind.counted else "a count of entries"
            raise BadInput(
                f"{where}: chunks[{number}]: not a sha256, a size and {shape}", hint=kind.hint
            )
        return ChunkRecord(chunk["sha256"], chunk["size"], chunk["count"], chunk.get("first", 1))


def _build(
    kind: Kind,
    entries: list[Any],
    size: int,
    describe: Callable[[int, list[Any]], dict[str, Any]],
    renders: dict[str, str],
    source: dict[str, Any],
) -> tuple[bytes, dict[str, bytes]]:
    """(summary.json's bytes, {store path: bytes} of its folder's files): `entries` in chunks of
    `size`, each described by `describe(start, part)`. Six parameters: what tells the two apart."""
    files: dict[str, bytes] = {}
    chunks = []
    for start in range(0, len(entries), size):
        part = entries[start : start + size]
        data = canonical_json([e.raw for e in part]).encode()  # the entries as written
        rec = file_record(data).to_json()
        files[kind.chunk_path(rec["sha256"])] = data
        chunks.append({**rec, "count": len(part), **describe(start, part)})
    matrix = {}
    for fmt in kind.formats:
        data = renders[fmt].encode()
        rec = file_record(data).to_json()
        files[kind.matrix_path(rec["sha256"], fmt)] = data
        matrix[fmt] = rec
    root = {
        "kind": kind.kind,
        "schema_version": SCHEMA_VERSION,
        kind.source: source,
        kind.count_key: len(entries),
        "chunks": chunks,
        "matrix": matrix,
    }
    return (json.dumps(root, indent=1, sort_keys=True) + "\n").encode(), files


def build(
    ordered: list[IndexEntry], index_data: bytes, renders: dict[str, str]
) -> tuple[bytes, dict[str, bytes]]:
    """The store summary of index.json's `index_data`: `ordered`, its entries in query order."""

    def describe(start: int, part: list[IndexEntry]) -> dict[str, Any]:
        return {
            "cores": [part[0].core.version, part[-1].core.version],
            "plugins": sorted({canonical_name(e.plugin.name) for e in part}),
            "verdicts": sorted({str(e.verdict) for e in part}),
        }

    return _build(STORE, ordered, CHUNK, describe, renders, file_record(index_data).to_json())


def build_ledger(
    entries: list[LedgerEntry], ledger_record: FileRecord
) -> tuple[bytes, dict[str, bytes]]:
    whole = lg.matrix(entries)
    renders = {fmt: lg.matrix_text(whole, fmt) for fmt in LEDGER_FORMATS}

    def describe(start: int, part: list[LedgerEntry]) -> dict[str, Any]:
        return {"first": start + 1, **_keys(part)}

    return _build(LEDGER, entries, LEDGER_CHUNK, describe, renders, ledger_record.to_json())


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


def parse_root(kind: Kind, data: bytes, where: str) -> Root:
    """A summary.json checked at its top (its values are read by key, so no depth walk)."""
    import orjson

    try:
        root = orjson.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: {kind.names[0]} is not valid JSON ({exc.msg})", hint=kind.hint)
    problem = _root_problem(kind, root)
    if problem:
        raise BadInput(f"{where}: not {kind.names[1]} ({problem})", hint=kind.hint)
    src, matrix = root[kind.source], root["matrix"]
    return Root(
        source=FileRecord(src["sha256"], src["size"], src.get("count"), src.get("last")),
        count=root[kind.count_key],
        matrix={f: FileRecord(matrix[f]["sha256"], matrix[f]["size"]) for f in kind.formats},
        chunks=root["chunks"],
        exact=not kind.counted or set(src) == {"sha256", "size", "count", "last"},
    )


def _root_problem(kind: Kind, root: Any) -> str | None:
    if not isinstance(root, dict) or root.get("kind") != kind.kind:
        return f"kind {kind.kind!r} expected"
    version = root.get("schema_version")
    if not isinstance(version, int) or version != SCHEMA_VERSION:
        return f"schema_version {bounded.shown(version)}, this vpr reads {SCHEMA_VERSION}"
    src = root.get(kind.source)
    if not kind.counted and not _record_ok(src):
        return f"{kind.source!r} is not a sha256 and a size"
    if kind.counted and not (
        _record_ok(src) and count_ok(src.get("count")) and isinstance(src.get("last"), str)
    ):
        return f"{kind.source!r} is not a sha256, a size, a count and a last entry"
    chunks, matrix, count = root.get("chunks"), root.get("matrix"), root.get(kind.count_key)
    if not isinstance(chunks, list) or not isinstance(matrix, dict):
        return "'chunks' is not a list or 'matrix' not an object"
    if not kind.counted and not count_ok(count):
        return f"{kind.count_key!r} is not a number"
    if kind.counted and (not count_ok(count) or count != src["count"]):
        return f"{kind.count_key!r} is not the ledger's count of entries"
    for fmt in kind.formats:
        if not _record_ok(matrix.get(fmt)):
            return f"matrix[{fmt!r}] is not a sha256 and a size"
    return None


def _record_ok(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    sha = rec.get("sha256")
    return isinstance(sha, str) and _SHA.fullmatch(sha) is not None and count_ok(rec.get("size"))


def check_bound(
    kind: Kind, root: Root, head_record: FileRecord | None, where: str, head: str
) -> None:
    """GateFailed unless the summary was made from the file the store's signed head records."""
    if head_record is not None and root.exact and root.source == head_record:
        return
    got = root.source
    sha = str(None if head_record is None else head_record.sha256)[:16]
    if kind.counted:
        count = None if head_record is None else head_record.count
        made = f"a ledger of {got.count} entries (sha256 {got.sha256[:16]})"
        noun, vouched = "ledger", f"({count} entries, sha256 {sha})"
    else:
        size = None if head_record is None else head_record.size
        made = f"index.json sha256 {got.sha256[:16]} ({got.size} bytes)"
        noun, vouched = "index.json", f"(sha256 {sha}, {size} bytes)"
    raise GateFailed(
        f"{where}: made from {made}, not the {noun} the store's signed head ({head}) vouches "
        f"for {vouched}: a summary of another state of the store",
        hint=kind.hint,
    )


def chunk_entries(kind: Kind, data: bytes, count: int, where: str) -> list[Any]:
    import orjson

    try:
        entries = orjson.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{where}: a {kind.chunk_name} that is not valid JSON ({exc.msg})", hint=kind.hint
        )
    if not isinstance(entries, list) or len(entries) != count:
        raise BadInput(f"{where}: not a {kind.chunk_name} of {count} entries", hint=kind.hint)
    return entries


def check_depth(entries: list[IndexEntry], where: str) -> None:
    for entry in entries:
        if bounded.deeper_than(entry.raw, bounded.MAX_DEPTH - 1):
            raise BadInput(
                f"{where}: pairing {bounded.shown(entry.pairing_id)} is nested deeper "
                f"than {bounded.MAX_DEPTH} levels",
                hint=STORE.hint,
            )


_BOUNDS_SHAPE = bounded.shape((("cores", (list,)), ("plugins", (list,)), ("verdicts", (list,))))


def bounds(root: Root, number: int, where: str) -> ChunkBounds:
    chunk = root.chunks[number]
    problem = bounded.shape_problem(chunk, _BOUNDS_SHAPE)
    cores = chunk["cores"] if problem is None else None
    if problem is None and not (len(cores) == 2 and all(isinstance(c, str) for c in cores)):
        problem = "'cores' is not two versions"
    if problem:
        raise BadInput(f"{where}: chunks[{number}]: {problem}", hint=STORE.hint)
    plugins = tuple(p for p in chunk["plugins"] if isinstance(p, str))  # what a name can match
    verdicts = tuple(v for v in chunk["verdicts"] if isinstance(v, str))
    return ChunkBounds((cores[0], cores[1]), plugins, verdicts)


def chunks_for(
    root: Root,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    where: str = SUMMARY_FILE,
) -> list[int]:
    """The index chunks that can hold an entry matching the filters, in order. Only a
    superset is promised: each entry of them is matched again (`storeindex.query`)."""
    picked = range(len(root))
    if core:
        picked = _core_range(root, core, where)
    if plugin:
        name = canonical_name(plugin)
        picked = [i for i in picked if name in bounds(root, i, where).plugins]
    if verdict:
        picked = [i for i in picked if verdict in bounds(root, i, where).verdicts]
    return list(picked)


def _core_range(root: Root, core: str, where: str) -> range:
    """The run of chunks whose core versions (newest first: each chunk from cores[0] down
    to cores[1]) can include a match for `core`: an exact version, or a specifier's lower
    and upper bounds (>=, >, ~=, ==; <=, <, ==), found by bisection. Any other specifier
    keeps every chunk."""
    from packaging.version import InvalidVersion, Version

    low, high = _bounds(core)
    n = len(root)

    def cores(i: int) -> tuple[str, str]:
        return bounds(root, i, where).cores

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


_PICK_SHAPE = bounded.shape(tuple((name, (list,)) for name in _LISTS))


def ledger_chunks_for(
    root: Root,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
    kind: str | None = None,
    where: str = LEDGER_SUMMARY_FILE,
) -> list[int]:
    """The ledger chunks that can hold an entry `core.ledger.select` keeps for the filters,
    in order. Only a superset is promised: each entry of them is selected again."""
    picked = []
    for number, chunk in enumerate(root.chunks):
        problem = bounded.shape_problem(chunk, _PICK_SHAPE)
        if problem is None and not all(all(isinstance(v, str) for v in chunk[n]) for n in _LISTS):
            problem = "a list of names that holds something else"
        if problem:
            raise BadInput(f"{where}: chunks[{number}]: {problem}", hint=LEDGER.hint)
        if core and core not in chunk["cores"] and not _prefixed(chunk["core_commits"], core):
            continue
        if (
            plugin
            and plugin not in chunk["plugins"]
            and not _prefixed(chunk["plugin_commits"], plugin)
        ):
            continue
        if verdict and verdict not in chunk["verdicts"]:
            continue
        if kind and kind not in chunk["kinds"]:
            continue
        picked.append(number)
    return picked


def _prefixed(sorted_prefixes: list[str], text: str) -> bool:
    """Whether a commit listed by its first `PREFIX` characters can start with `text`."""
    want = text[:PREFIX]
    at = bisect.bisect_left(sorted_prefixes, want)
    return at < len(sorted_prefixes) and sorted_prefixes[at].startswith(want)


def ledger_entries(data: bytes, rec: ChunkRecord, where: str) -> list[LedgerEntry]:
    """A ledger chunk's entries, checked, numbered from the chunk's first seq on."""
    out = []
    for offset, entry in enumerate(chunk_entries(LEDGER, data, rec.count, where)):
        seq = rec.first + offset
        problem = lg.entry_problem(entry)
        if problem is None and not lg.is_seq(entry.get("seq"), seq):
            problem = f"seq {bounded.shown(entry.get('seq'))}, expected {seq}"
        if problem is None and bounded.deeper_than(entry, bounded.MAX_DEPTH - 1):
            problem = f"nested deeper than {bounded.MAX_DEPTH} levels"
        if problem:
            raise BadInput(
                f"{where}: entry {offset + 1}: not ledger entry #{seq} ({problem})",
                hint=LEDGER.hint,
            )
        out.append(lg.entry_from(entry, seq))
    return out
