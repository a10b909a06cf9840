"""The manifest store's index (`index.json`) as data: typed entries, checked ids and store
paths, rebuilt, queried and drawn as the core x plugin matrix. The files: `edges.store`."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import SCHEMA_VERSION

if TYPE_CHECKING:  # imported where a manifest is read: not on the query and matrix paths
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Manifest

INDEX_FILE = "index.json"
INDEX_KIND = "vllm-plugin-release/manifest-index"
INDEX_SCHEMA_VERSION = 1
PAIRINGS = "pairings"
WHEELS = "wheels"  # the embedded index: the certified wheels and a find-links page
RUNS = "runs"  # runs/<pairing_id>/<time>-<runner>-<manifest sha>.json: verdict history
RUN_KIND = "vllm-plugin-release/store-run"
LOCK_SUFFIX = ".lock.txt"  # pairings/<id>.lock.txt: the pairing environment's hash lock
VERDICT_ORDER = {"fleet": 0, "pilot": 1, "lab": 2, None: 3}
VERDICTS = {
    "fleet": "all checks passed, the hardware part included",
    "pilot": "all CPU-runner checks passed; the hardware part has not passed yet",
    "lab": "a check failed",
    "none": "no conformance recorded",
}


# What a consumer may take from a store: ids and store paths checked before any use. A
# pairing id is a 64-hex sha256; a store path is relative, normalised and inside the store
# (no scheme, leading `/`, `..`, hidden segment, backslash or `%`).


class Missing(BadInput):
    """A store file that is not there (a folder store's missing file, HTTP 404)."""


_PID = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[-_.]+")
_SEGMENT = re.compile(r"[A-Za-z0-9_+!-][A-Za-z0-9._+!-]*")


def canonical_name(name: str) -> str:
    """PEP 503's comparable name (packaging's canonicalize_name, without importing it)."""
    return _NAME.sub("-", name).lower()


def check_pid(value: Any, where: str) -> str:
    if isinstance(value, str) and _PID.fullmatch(value):
        return value
    shown = repr(value)[:80] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: pairing id {shown} is not a sha256 (64 hexadecimal characters)",
        hint="the store index is damaged or hostile; nothing was read or written for it",
    )


def store_path(value: Any, where: str) -> str:
    """`value` when it is a safe store path (see above); BadInput naming it otherwise."""
    parts = value.split("/") if isinstance(value, str) and 0 < len(value) <= 512 else [""]
    if all(_SEGMENT.fullmatch(part) for part in parts):
        return value
    shown = repr(value)[:120] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: {shown} is not a path inside the store (a relative path of plain names, "
        "no '..', no scheme, no leading '/')",
        hint="a store names its files relative to itself; nothing was read for it",
    )


def request_problems(
    manifest: Manifest,
    entry: IndexEntry,
    *,
    pid: str,
    manifest_sha256: str,
    core: str | None = None,
    plugin: str | None = None,
) -> list[str]:
    """How a verified manifest differs from the entry picked and the request's core and plugin."""
    from packaging.utils import canonicalize_name

    problems = []
    if manifest.pairing_id != pid:
        problems.append(
            f"the manifest is pairing {manifest.pairing_id[:16]}, not {pid[:16]}: "
            "another pairing's files under this one's name"
        )
    if entry.manifest_sha256 != manifest_sha256:
        problems.append(
            f"the manifest's sha256 is {manifest_sha256[:16]}, the signed index names "
            f"{entry.manifest_sha256[:16]}"
        )
    have = (manifest.core.version, manifest.plugin.name, manifest.plugin.commit)
    said = (entry.core.version, entry.plugin.name, entry.plugin.commit)
    if have != said:
        problems.append(
            f"the manifest is {_pairing(*have)}, the index entry says {_pairing(*said)}"
        )
    if core and not core_matches(have[0], core):
        problems.append(f"the manifest's core is {have[0]}, asked for --core {core}")
    if plugin and canonicalize_name(have[1]) != canonicalize_name(plugin):
        problems.append(f"the manifest's plugin is {have[1]}, asked for --plugin {plugin}")
    return problems


def _pairing(core: str, plugin: str, commit: str | None) -> str:
    return f"core {core} + {plugin}@{(commit or 'no-commit')[:12]}"


def core_matches(version: str, wanted: str) -> bool:
    """`version` is `wanted` (PEP 440) or within it (a specifier); BadInput when neither."""
    from packaging.version import InvalidVersion, Version

    if wanted[:1] in "<>=!~":
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            specifier = SpecifierSet(wanted)
        except InvalidSpecifier:
            raise BadInput(f"--core {wanted}: not a version or version specifier")
        try:
            return Version(version) in specifier
        except InvalidVersion:  # the store's version, not the user's argument
            return False
    try:
        return Version(version) == Version(wanted)
    except InvalidVersion:
        return version == wanted


def superseded(entries: list[LedgerEntry], pid: str, manifest_sha256: str) -> str | None:
    """Why the manifest is not the pairing's current verdict (the ledger's newest release entry
    names another), else None."""
    newest = next(
        (e for e in reversed(entries) if e.kind == "release" and e.pairing_id == pid),
        None,
    )
    if newest is None or newest.manifest_sha256 == manifest_sha256:
        return None
    return (
        f"the ledger's newest verdict for pairing {pid[:16]} is entry #{newest.seq} "
        f"({newest.verdict}, {newest.time}, manifest sha256 "
        f"{str(newest.manifest_sha256)[:16]}); the store serves manifest "
        f"{manifest_sha256[:16]}: a superseded verdict"
    )


class CoreRef(NamedTuple):
    name: str | None  # "vllm" when the entry names none
    version: str
    wheel: str
    sha256: str


class PluginRef(NamedTuple):
    name: str
    version: str
    commit: str | None
    wheel: str
    sha256: str


class RuntimeRef(NamedTuple):
    """The entry's runtime (all None when it has none)."""

    name: str | None = None
    status: str | None = None
    version: str | None = None
    commit: str | None = None


class StoredWheel(NamedTuple):
    """A certified wheel the store's embedded index holds (wheels/<filename>)."""

    filename: str
    sha256: str


class IndexEntry(NamedTuple):
    """One pairing's index entry (a NamedTuple: an index holds many). `raw`: the entry as
    written, written again byte for byte by index.json and the summary's chunks."""

    raw: dict[str, Any]
    pairing_id: str
    name: str
    manifest_sha256: str
    manifest: str | None  # its store path (pairings/<id>.json); None when not a string
    python: str | None
    runner: str | None
    verdict: str | None
    certified_at: str | None
    runs: int  # the lines of its verdict history
    has_lock: bool  # its `requirements` name the pairing lock stored beside it
    core: CoreRef
    plugin: PluginRef
    runtime: RuntimeRef
    stored_wheels: tuple[StoredWheel, ...]


@dataclass(frozen=True, slots=True)
class StoreIndex:
    """index.json: the entries by pairing id (its kind and schema_version are this vpr's)."""

    pairings: dict[str, IndexEntry]


def entry_from(raw: dict[str, Any]) -> IndexEntry:
    """`raw`, an entry `check_entries` passed, typed."""
    core, plugin = raw["core"], raw["plugin"]
    rt = raw.get("runtime") or {}
    return IndexEntry(
        raw,
        raw["pairing_id"],
        raw["name"],
        raw["manifest_sha256"],
        _optional(raw.get("manifest")),
        raw.get("python"),
        raw.get("runner"),
        raw.get("verdict"),
        raw.get("certified_at"),
        len(raw.get("history") or ()),
        bool(raw.get("requirements")),
        CoreRef(core.get("name", "vllm"), core["version"], core["wheel"], core["sha256"]),
        PluginRef(
            plugin["name"],
            plugin["version"],
            plugin.get("commit"),
            plugin["wheel"],
            plugin["sha256"],
        ),
        RuntimeRef(rt.get("name"), rt.get("status"), rt.get("version"), rt.get("commit")),
        _stored_wheels(raw.get("wheels")),
    )


def _stored_wheels(wheels: Any) -> tuple[StoredWheel, ...]:
    """The wheels of an entry that the store's embedded index holds (a malformed one is
    left out: it names no file the find-links page can list)."""
    out = []
    for w in wheels if isinstance(wheels, list) else ():
        if isinstance(w, dict) and w.get("store_path"):
            name, sha = w.get("filename"), w.get("sha256")
            if isinstance(name, str) and isinstance(sha, str):
                out.append(StoredWheel(name, sha))
    return tuple(out)


def _optional(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class PublishedAt(NamedTuple):
    """Where a run published its wheels: kind local (the run's pypiserver) or remote."""

    kind: str
    simple_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One line of a pairing's verdict history (runs/<pairing_id>/<name>.json)."""

    pairing_id: str | None
    time: str
    runner: str | None
    verdict: str | None
    manifest_sha256: str
    index: PublishedAt | None

    def to_json(self) -> dict[str, Any]:
        out = {"kind": RUN_KIND, **asdict(self)}
        out["index"] = self.index.to_json() if self.index else None  # asdict keeps a NamedTuple
        return out


@dataclass(frozen=True, slots=True)
class EntryExtras:
    """What the store holds beside a manifest (see `entry_for`)."""

    runs: tuple[RunRecord, ...] = ()
    stored_wheels: dict[str, str] | None = None  # filename -> sha256 in wheels/
    lock: bool = False


def parse_run(data: Any) -> RunRecord | None:
    """A run record as read from its file; None for one that is malformed (left out)."""
    if not isinstance(data, dict) or data.get("kind") != RUN_KIND:
        return None
    time, sha = data.get("time"), data.get("manifest_sha256")
    runner, verdict, index = data.get("runner"), data.get("verdict"), data.get("index")
    if not (isinstance(time, str) and isinstance(sha, str)):
        return None
    if not all(v is None or isinstance(v, str) for v in (runner, verdict)):
        return None
    where = None
    if isinstance(index, dict) and isinstance(index.get("kind"), str):
        where = PublishedAt(index["kind"], _optional(index.get("simple_url")))
    return RunRecord(_optional(data.get("pairing_id")), time, runner, verdict, sha, where)


def lock_path(pid: str) -> str:
    return f"{PAIRINGS}/{pid}{LOCK_SUFFIX}"


def check_lock(manifest: Manifest, data: bytes, where: str, hint: str = "") -> str:
    """The pairing lock's text when its sha256 is the signed environment.lock_sha256;
    GateFailed naming both digests otherwise."""
    want = manifest.environment.lock_sha256
    have = hashlib.sha256(data).hexdigest()
    if want != have:
        raise GateFailed(
            f"{where}: sha256 {have} is not the pairing lock the manifest names "
            f"(environment.lock_sha256 {want})",
            hint=hint or "use the lock stored with the manifest (pairings/<id>.lock.txt)",
        )
    return data.decode("utf-8")


def run_record(
    manifest: Manifest, manifest_sha256: str, time: str, index: PublishedAt
) -> RunRecord:
    conf = manifest.conformance
    return RunRecord(manifest.pairing_id, time, conf.runner, conf.verdict, manifest_sha256, index)


def run_file_name(run: RunRecord) -> str:
    stamp = run.time.replace("-", "").replace(":", "")
    return f"{stamp}-{run.runner or 'none'}-{run.manifest_sha256[:12]}.json"


def history(runs: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """Run records as the history lines an entry holds, newest first."""
    out = [
        {
            "time": r.time,
            "runner": r.runner,
            "verdict": r.verdict,
            "manifest_sha256": r.manifest_sha256,
        }
        for r in runs
    ]
    return sorted(out, key=lambda r: (r["time"], str(r["manifest_sha256"])), reverse=True)


def _wheels(
    manifest: Manifest, stored: dict[str, str], newest: RunRecord | None
) -> list[dict[str, Any]]:
    """Where each certified wheel lives: the index the newest run published it to (None: the
    local pypiserver, gone after the run) and its copy in the store's embedded index."""
    index = newest.index if newest is not None else None
    url = index.simple_url if index is not None and index.kind == "remote" else None
    out = []
    for part in manifest.parts():
        name, sha = part.wheel.filename, part.wheel.sha256
        out.append(
            {
                "role": part.role,
                "filename": name,
                "sha256": sha,
                "index_url": url,
                "store_path": f"{WHEELS}/{name}" if stored.get(name) == sha else None,
            }
        )
    return out


def entry_for(
    manifest: Manifest,
    manifest_sha256: str,
    has_statement: bool,
    extras: EntryExtras | None = None,
) -> IndexEntry:
    """The index entry of one manifest; `extras`: what the store holds beside it."""
    return entry_from(_entry_json(manifest, manifest_sha256, has_statement, extras))


def _entry_json(
    manifest: Manifest, manifest_sha256: str, has_statement: bool, extras: EntryExtras | None
) -> dict[str, Any]:
    pid = manifest.pairing_id
    core, plugin, conf = manifest.core, manifest.plugin, manifest.conformance
    runtime = manifest.runtime
    extras = extras or EntryExtras()
    past = history(extras.runs)
    newest = max(extras.runs, key=lambda r: (r.time, str(r.manifest_sha256)), default=None)
    return {
        "pairing_id": pid,
        "name": manifest.name,
        "schema_version": manifest.schema_version,
        "manifest": f"{PAIRINGS}/{pid}.json",
        "manifest_sha256": manifest_sha256,
        "statement": f"{PAIRINGS}/{pid}.intoto.jsonl" if has_statement else None,
        "source_date": manifest.source_date,
        "certified_at": past[0]["time"] if past else None,
        "history": past,
        "wheels": _wheels(manifest, extras.stored_wheels or {}, newest),
        "requirements": {
            "path": lock_path(pid),
            "sha256": manifest.environment.lock_sha256,
        }
        if extras.lock
        else None,
        "python": core.python,
        "core": {
            "name": core.name,
            "version": core.version,
            "wheel": core.wheel.filename,
            "sha256": core.wheel.sha256,
        },
        "plugin": {
            "name": plugin.name,
            "version": plugin.version,
            "commit": plugin.commit,
            "wheel": plugin.wheel.filename,
            "sha256": plugin.wheel.sha256,
        },
        "runtime": {
            "name": runtime.name,
            "status": runtime.status,
            "version": runtime.version or runtime.pinned_version,
            "commit": runtime.commit or runtime.pinned_commit,
        },
        "verdict": conf.verdict,
        "runner": conf.runner,
    }


def check_index(data: Any, where: str) -> StoreIndex:
    if not isinstance(data, dict) or data.get("kind") != INDEX_KIND:
        raise BadInput(f"{where}: not a manifest store index (kind {INDEX_KIND!r} expected)")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > INDEX_SCHEMA_VERSION:
        raise BadInput(
            f"{where}: index schema_version {version!r} is newer than this vpr understands "
            f"({INDEX_SCHEMA_VERSION})",
            hint="upgrade vllm-plugin-release (pip install -U vllm-plugin-release)",
        )
    if not isinstance(data.get("pairings"), dict):
        raise BadInput(f"{where}: key 'pairings' must be an object")
    return StoreIndex(parse_entries(data["pairings"].items(), where))


def parse_entries(entries: Iterable[tuple[Any, Any]], where: str) -> dict[str, IndexEntry]:
    """The (key, entry) pairs of an index or a summary chunk, checked and typed, by id."""
    import gc

    pairs = list(entries)
    check_entries(pairs, where)
    # The collector would walk index.json's objects again and again while these tuples are made.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return {pid: entry_from(entry) for pid, entry in pairs}
    finally:
        if enabled:
            gc.enable()


def check_entries(entries: Iterable[tuple[Any, Any]], where: str) -> None:
    """BadInput naming the first (key, entry) query, matrix, install and publish cannot read."""
    for pid, entry in entries:
        problem = _entry_problem(pid, entry)
        if problem:
            raise BadInput(
                f"{where}: pairings[{pid!r}]: {problem}",
                hint="the store index is damaged; restore index.json from a backup or "
                "re-publish the pairing's manifest",
            )


# What query, matrix, install and publish read from an entry: (dotted key, allowed types);
# bounded.NONE allows the key to be null or absent.
_NONE = bounded.NONE
_ENTRY_SHAPE = bounded.shape(
    (
        ("pairing_id", (str,)),
        ("name", (str,)),
        ("manifest_sha256", (str,)),
        ("python", (str, _NONE)),
        ("runner", (str, _NONE)),
        ("verdict", (str, _NONE)),
        ("certified_at", (str, _NONE)),
        ("history", (list, _NONE)),
        ("requirements", (dict, _NONE)),
        ("runtime", (dict, _NONE)),
        ("core.name", (str, _NONE)),
        ("core.version", (str,)),
        ("core.wheel", (str,)),
        ("core.sha256", (str,)),
        ("plugin.name", (str,)),
        ("plugin.version", (str,)),
        ("plugin.commit", (str, _NONE)),
        ("plugin.wheel", (str,)),
        ("plugin.sha256", (str,)),
    )
)


# The runtime's keys, when it is an object (the renderers print and compare them).
_RUNTIME_SHAPE = bounded.shape(
    (
        ("name", (str, _NONE)),
        ("status", (str, _NONE)),
        ("version", (str, _NONE)),
        ("commit", (str, _NONE)),
    )
)


def _entry_problem(key: Any, entry: Any) -> str | None:
    problem = bounded.shape_problem(entry, _ENTRY_SHAPE)
    if problem is None and isinstance(entry.get("runtime"), dict):
        inner = bounded.shape_problem(entry["runtime"], _RUNTIME_SHAPE)
        problem = f"'runtime.{inner[1:]}" if inner else None
    if problem is None and not _is_version(entry["core"]["version"]):
        problem = (
            f"'core.version' is {bounded.shown(entry['core']['version'])}, not a PEP 440 version"
        )
    if problem is None and (not isinstance(key, str) or not _PID.fullmatch(key)):
        problem = "the key is not a pairing id (a sha256: 64 hexadecimal characters)"
    if problem is None and entry.get("pairing_id") != key:
        problem = "its pairing_id is not its key"
    return problem


@functools.lru_cache(maxsize=4096)
def _is_version(text: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def empty_index() -> StoreIndex:
    return StoreIndex({})


def index_bytes(index: StoreIndex) -> bytes:
    data = {
        "schema_version": INDEX_SCHEMA_VERSION,
        "kind": INDEX_KIND,
        "pairings": {pid: entry.raw for pid, entry in index.pairings.items()},
    }
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def rebuild_index(
    manifests: Iterable[tuple[str, bytes, bool]],
    previous: StoreIndex,
    extras: Callable[[str], EntryExtras] | None = None,
) -> StoreIndex:
    """The index of the manifests present, given as (pairing id, file bytes, has statement). A
    manifest that cannot be read here keeps its entry from `previous`, else is left out."""
    from vllm_plugin_release.core.manifestmodel import parse

    index = empty_index()
    old = previous.pairings
    for pid, data, has_statement in manifests:
        try:
            manifest = json.loads(data)
            version = manifest.get("schema_version")
            if isinstance(version, int) and version > SCHEMA_VERSION and pid in old:
                index.pairings[pid] = old[pid]
                continue
            more = extras(pid) if extras else None
            typed = parse(manifest, f"{PAIRINGS}/{pid}.json")
            entry = entry_for(typed, hashlib.sha256(data).hexdigest(), has_statement, more)
        except (json.JSONDecodeError, BadInput, KeyError, TypeError, AttributeError):
            if pid in old:
                index.pairings[pid] = old[pid]
            continue
        index.pairings[pid] = entry
    return index


def check_same_wheels(previous: IndexEntry | None, entry: IndexEntry, location: str) -> None:
    """A pairing's wheels never change once published: GateFailed if `entry` differs."""
    if previous is None:
        return
    pid = entry.pairing_id
    for part, was, now in (
        ("core", previous.core, entry.core),
        ("plugin", previous.plugin, entry.plugin),
    ):
        if was.sha256 != now.sha256:
            raise GateFailed(
                f"{location}: pairing {pid[:16]} is already in the store with {part} wheel "
                f"{was.wheel} sha256 {was.sha256}; this manifest has {now.sha256}",
                hint="a pairing's wheels never change once published; "
                "check the build's reproducibility",
            )


def version_ranks(versions: Iterable[str]) -> dict[str, int]:
    """Each distinct version's rank (0 oldest): a store repeats a few hundred versions over
    thousands of entries, so each is parsed and compared once."""
    return {v: i for i, v in enumerate(sorted(set(versions), key=_rank_key))}


def _rank_key(text: str) -> Any:
    """Versions in PEP 440 order; two spellings of one version (1.0, 1.0.0) by their text,
    so that an order, and a summary written in it, never depends on a set's."""
    from packaging.version import InvalidVersion, Version

    try:
        return ((1, Version(text)), text)
    except InvalidVersion:
        return ((0, text), text)


def query(
    index: StoreIndex,
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
) -> list[IndexEntry]:
    out = []
    for entry in index.pairings.values():
        if core and not core_matches(entry.core.version, core):
            continue
        if plugin and canonical_name(entry.plugin.name) != canonical_name(plugin):
            continue
        if verdict and entry.verdict != verdict:
            continue
        out.append(entry)
    rank = version_ranks(e.core.version for e in out)
    out.sort(
        key=lambda e: (
            -rank[e.core.version],
            VERDICT_ORDER.get(e.verdict, 9),
            e.plugin.name,
            e.pairing_id,
        )
    )
    return out


@dataclass(frozen=True)
class Matrix:
    cores: list[str]
    plugins: list[str]
    cells: dict[tuple[str, str], list[IndexEntry]]

    def cell_text(self, core: str, plugin: str) -> str:
        entries = self.cells.get((core, plugin), [])
        return ", ".join(f"{e.verdict or 'none'} (py{python_of(e)})" for e in entries)


def matrix(index: StoreIndex) -> Matrix:
    cells: dict[tuple[str, str], list[IndexEntry]] = {}
    cores: set[str] = set()
    plugins: set[str] = set()
    for entry in index.pairings.values():
        plugin = entry.plugin
        core = entry.core.version
        column = f"{plugin.name}@{plugin.commit[:12] if plugin.commit else plugin.version}"
        cores.add(core)
        plugins.add(column)
        cells.setdefault((core, column), []).append(entry)
    for entries in cells.values():
        entries.sort(key=lambda e: (str(e.python), e.pairing_id))
    rank = version_ranks(cores)
    return Matrix(
        cores=sorted(cores, key=rank.__getitem__, reverse=True),
        plugins=sorted(plugins),
        cells=cells,
    )


def runtime_text(entry: IndexEntry) -> str:
    rt = entry.runtime
    if not rt.name:
        return "no runtime"
    version = f" {rt.version}" if rt.version else ""
    return f"{rt.name}{version}: {rt.status or 'unknown'}"


def python_of(entry: IndexEntry) -> str:
    return ".".join(str(entry.python or "?").split(".")[:2])


def legend_rows(m: Matrix) -> list[tuple[str, str, list[str]]]:
    """(column, runtimes, manifest paths) per plugin column, for every renderer's legend."""
    runtimes: dict[str, set[str]] = {c: set() for c in m.plugins}
    paths: dict[str, list[str]] = {c: [] for c in m.plugins}
    seen: dict[tuple[Any, ...], str] = {}
    for (_, column), entries in sorted(m.cells.items()):
        for e in entries:
            ident = (e.runtime.name, e.runtime.version, e.runtime.status)
            if ident not in seen:
                seen[ident] = runtime_text(e)
            runtimes[column].add(seen[ident])
            paths[column].append(str(e.raw.get("manifest")))  # as written, whatever it is
    return [(c, ", ".join(sorted(runtimes[c])), paths[c]) for c in m.plugins]


def render_markdown(m: Matrix) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    head = "| vLLM core | " + " | ".join(esc(p) for p in m.plugins) + " |"
    rule = "|---|" + "---|" * len(m.plugins)
    rows = [
        f"| {esc(c)} | " + " | ".join(esc(m.cell_text(c, p)) or " " for p in m.plugins) + " |"
        for c in m.cores
    ]
    if not m.cores:
        return "_No pairings in the manifest store._\n"
    legend = ["", "| plugin column | runtime | manifests |", "|---|---|---|"]
    legend += [
        f"| {esc(c)} | {esc(rt)} | " + ", ".join(f"[{p}]({p})" for p in paths) + " |"
        for c, rt, paths in legend_rows(m)
    ]
    legend += ["", "Verdicts: " + "; ".join(f"**{v}**: {t}" for v, t in VERDICTS.items())]
    return "\n".join([head, rule, *rows, *legend]) + "\n"


def render_html(m: Matrix, *, title: str = "vLLM core x plugin compatibility") -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 8px;text-align:center}"
        ".fleet{background:#c8f0c8}.pilot{background:#fff2b3}.lab{background:#f5c2c2}"
        "</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    if not m.cores:
        parts.append("<p>No pairings in the manifest store.</p>")
    else:
        parts.append("<table><thead><tr><th>vLLM core</th>")
        parts.extend(f"<th>{e(p)}</th>" for p in m.plugins)
        parts.append("</tr></thead><tbody>")
        for c in m.cores:
            parts.append(f"<tr><th>{e(c)}</th>")
            for p in m.plugins:
                entries = m.cells.get((c, p), [])
                css = entries[0].verdict if len(entries) == 1 else ""
                cls = f' class="{e(css)}"' if css in ("fleet", "pilot", "lab") else ""
                parts.append(f"<td{cls}>{e(m.cell_text(c, p))}</td>")
            parts.append("</tr>")
        parts.append("</tbody></table>")
        parts.append("<h2>Legend</h2><table><tr><th>plugin column</th><th>runtime</th>")
        parts.append("<th>manifests</th></tr>")
        for column, runtimes, paths in legend_rows(m):
            links = ", ".join(f'<a href="{e(p)}">{e(p)}</a>' for p in paths)
            parts.append(f"<tr><td>{e(column)}</td><td>{e(runtimes)}</td><td>{links}</td></tr>")
        parts.append("</table><ul>")
        parts.extend(f'<li class="{v}">{e(v)}: {e(t)}</li>' for v, t in VERDICTS.items())
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def index_from(data: bytes, where: str) -> StoreIndex:
    try:
        index = bounded.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{where}:{exc.lineno}: index.json is not valid JSON ({exc.msg})",
            hint="a writer rebuilds it from pairings/ on its next publish",
        )
    return check_index(index, where)


# Query and matrix as text for an 80-column log, and as JSON: nothing is cut (a long name
# wraps), each plugin column has a short key explained in a legend, and the matrix splits
# into tables when its columns do not fit.


WIDTH = 80
LIST_IDS = 40  # the matrix legend lists each cell's pairing id up to this many pairings


def _wrapper(width: int, indent: str) -> Any:
    """wrap(text) -> lines: textwrap only for a line that does not fit (most do)."""
    wrapper = textwrap.TextWrapper(width=width, subsequent_indent=indent, break_on_hyphens=False)

    def wrap(text: str) -> list[str]:
        return [text] if len(text) <= width else wrapper.wrap(text)

    return wrap


def query_text(entries: list[IndexEntry], location: str, width: int = WIDTH) -> str:
    wrap = _wrapper(width, "    ")
    lines = [*wrap(f"{len(entries)} pairing(s) in {location}"), ""]
    for e in entries:
        p = e.plugin
        head = (
            f"{e.core.name} {e.core.version} + "
            f"{p.name} {p.version}: {e.verdict or 'none'} "
            f"({e.runner or '?'} runner)"
        )
        commit = (p.commit or "no commit")[:12]
        detail = [
            f"id {e.pairing_id[:16]}  python {python_of(e)}  commit {commit}",
            f"runtime {runtime_text(e)}",
        ]
        if e.certified_at:
            detail.append(f"certified {e.certified_at}; {e.runs} run(s) in its history")
        lines += wrap(head)
        for text in detail:
            lines += wrap("  " + text)
    return "\n".join(lines) + "\n"


def _keys(n: int) -> list[str]:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = []
    for i in range(n):
        key = ""
        i += 1
        while i:
            i, r = divmod(i - 1, 26)
            key = letters[r] + key
        out.append(key)
    return out


def matrix_text(m: Matrix, width: int = WIDTH) -> str:
    if not m.cores:
        return "No pairings in the manifest store.\n"
    keys = dict(zip(m.plugins, _keys(len(m.plugins))))
    lines = {
        where: [f"{e.verdict or 'none'} py{python_of(e)}" for e in entries] or ["-"]
        for where, entries in m.cells.items()
    }
    first = max(9, *(len(c) for c in m.cores)) + 2
    cell = max(
        12,
        *(len(line) + 2 for cell_lines in lines.values() for line in cell_lines),
        *(len(k) + 4 for k in keys.values()),
    )
    empty = ["-"]
    per_table = max(1, (width - first) // cell)
    out: list[str] = []
    for start in range(0, len(m.plugins), per_table):
        columns = m.plugins[start : start + per_table]
        head = "vLLM core".ljust(first) + "".join(f"[{keys[c]}]".ljust(cell) for c in columns)
        out.append(head.rstrip())
        for core in m.cores:
            cells = [lines.get((core, c), empty) for c in columns]
            for row in range(max(len(x) for x in cells)):
                label = core if row == 0 else ""
                out.append(
                    (
                        label.ljust(first)
                        + "".join((x[row] if row < len(x) else "").ljust(cell) for x in cells)
                    ).rstrip()
                )
        out.append("")
    out += _legend(m, keys, width)
    return "\n".join(out) + "\n"


def _legend(m: Matrix, keys: dict[str, str], width: int) -> list[str]:
    wrap = _wrapper(width, "      ")
    out = ["plugins:"]
    for column, runtimes, _ in legend_rows(m):
        out += wrap(f"  [{keys[column]}] {column}; runtime {runtimes}")
    pairings = sum(len(es) for es in m.cells.values())
    if pairings > LIST_IDS:
        out += wrap(
            f"manifests: STORE/pairings/<pairing id>.json; {pairings} pairings (ids: "
            "vpr manifest query --core VERSION --plugin NAME, or matrix --json)"
        )
    else:
        out.append("manifests: STORE/pairings/<pairing id>.json, per cell:")
        for core in m.cores:
            for column in m.plugins:
                key = keys[column]
                out += [
                    f"  {core} [{key}] py{python_of(e)}: {e.pairing_id[:16]}"[:width]
                    for e in m.cells.get((core, column), ())
                ]
    out.append("verdicts:")
    out += [line for v, text in VERDICTS.items() for line in wrap(f"  {v}: {text}")]
    return out


def matrix_json(m: Matrix) -> dict[str, Any]:
    keys = dict(zip(m.plugins, _keys(len(m.plugins))))
    return {
        "cores": m.cores,
        "plugins": [{"key": keys[p], "column": p} for p in m.plugins],
        "cells": [
            {
                "core": core,
                "plugin": column,
                "pairings": [
                    {  # the runtime and manifest path as the entry has them
                        "pairing_id": e.pairing_id,
                        "verdict": e.verdict,
                        "runner": e.runner,
                        "python": e.python,
                        "runtime": e.raw.get("runtime"),
                        "manifest": e.raw.get("manifest"),
                    }
                    for e in entries
                ],
            }
            for (core, column), entries in sorted(m.cells.items())
        ],
        "legend": VERDICTS,
    }


def render_matrix(m: Matrix, fmt: str) -> str:
    """The matrix as `vpr manifest matrix` prints it and a store summary holds it."""
    if fmt == "json":
        return json.dumps(matrix_json(m), indent=2, sort_keys=True) + "\n"
    if fmt == "table":
        return matrix_text(m)
    return render_markdown(m) if fmt == "markdown" else render_html(m)
