"""A manifest store index's entry as a typed record (`IndexEntry`), and the index
(`StoreIndex`): what query, matrix, install, publish and the site read. `core.storeindex`
checks an entry (`check_entries`) and then types it here (`entry_from`), and writes the
index back from each entry's `raw`, the entry as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


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
    """One pairing's index entry, read after `check_entries` (`entry_from`). `raw`: the
    entry as written: index.json and the summary's chunks re-write it byte for byte, and
    `vpr manifest query --json` prints it. (A NamedTuple: an index holds up to a few
    hundred thousand, made several times faster than a frozen dataclass's.)"""

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
    """The typed entry of `raw`, an entry `check_entries` has passed."""
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
