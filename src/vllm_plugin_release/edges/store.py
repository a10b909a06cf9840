"""The manifest store: one manifest per pairing plus `index.json`, the compatibility matrix.

Layout (a folder, or the same folder served as static files over HTTP):

  STORE/index.json                       {"schema_version", "kind", "pairings": {id: entry}}
  STORE/pairings/<pairing_id>.json       the manifest, byte for byte as built
  STORE/pairings/<pairing_id>.intoto.jsonl   its signed statement
  STORE/.lock                            the writers' file lock

Writers take the lock, write the pairing's files (temp file, fsync, rename), then
rebuild `index.json` from every manifest in `pairings/` and rename it into place.
The index is therefore a function of the manifests present: concurrent publishers
cannot lose an entry, and a publisher killed at any point leaves only complete
files (its dot-named temp file, if any, is removed by the next writer).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure

INDEX_FILE = "index.json"
INDEX_KIND = "vllm-plugin-release/manifest-index"
INDEX_SCHEMA_VERSION = 1
PAIRINGS = "pairings"
LOCK_FILE = ".lock"
LOCK_TIMEOUT = float(os.environ.get("VPR_STORE_LOCK_TIMEOUT", "120"))
HTTP_TIMEOUT = 30
VERDICT_ORDER = {"fleet": 0, "pilot": 1, "lab": 2, None: 3}


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))
    return url


def entry_for(
    manifest: dict[str, Any], manifest_sha256: str, has_statement: bool
) -> dict[str, Any]:
    """The index entry summarising one manifest (what query and matrix read)."""
    pid = manifest["pairing_id"]
    core, plugin, conf = manifest["core"], manifest["plugin"], manifest["conformance"]
    runtime = manifest.get("runtime") or {}
    return {
        "pairing_id": pid,
        "name": manifest["name"],
        "schema_version": manifest["schema_version"],
        "manifest": f"{PAIRINGS}/{pid}.json",
        "manifest_sha256": manifest_sha256,
        "statement": f"{PAIRINGS}/{pid}.intoto.jsonl" if has_statement else None,
        "created": manifest.get("created"),
        "python": core.get("python"),
        "core": {
            "name": core["name"],
            "version": core["version"],
            "wheel": core["wheel"]["filename"],
            "sha256": core["wheel"]["sha256"],
        },
        "plugin": {
            "name": plugin["name"],
            "version": plugin["version"],
            "commit": plugin.get("commit"),
            "wheel": plugin["wheel"]["filename"],
            "sha256": plugin["wheel"]["sha256"],
        },
        "runtime": {
            "name": runtime.get("name"),
            "status": runtime.get("status"),
            "version": runtime.get("version") or runtime.get("pinned_version"),
            "commit": runtime.get("commit") or runtime.get("pinned_commit"),
        },
        "verdict": conf.get("verdict"),
        "runner": conf.get("runner"),
    }


def _check_index(data: Any, where: str) -> dict[str, Any]:
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
    return data


def _parse_manifest(text: str, relative: str, location: str) -> dict[str, Any]:
    from vllm_plugin_release.stages import manifest as mf

    where = f"{location}/{relative}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}:{exc.lineno}: manifest is not valid JSON ({exc.msg})")
    mf.validate(data, where)
    return data


def empty_index() -> dict[str, Any]:
    return {"schema_version": INDEX_SCHEMA_VERSION, "kind": INDEX_KIND, "pairings": {}}


def index_bytes(index: dict[str, Any]) -> bytes:
    return (json.dumps(index, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


@dataclass(frozen=True)
class AddResult:
    status: str  # "added" | "unchanged" | "replaced"
    entry: dict[str, Any]
    previous: dict[str, Any] | None
    store: str


class DirStore:
    """A manifest store in a local folder (the only kind that can be written)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    # -- reading ------------------------------------------------------------
    def read_index(self) -> dict[str, Any]:
        path = self.root / INDEX_FILE
        if not self.root.is_dir():
            raise BadInput(
                f"{self.root}: manifest store not found",
                hint="publish to it first with `vpr publish --store PATH`",
            )
        if not path.exists():
            return empty_index()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"{path}:{exc.lineno}: index.json is not valid JSON ({exc.msg})",
                hint="a writer rebuilds it from pairings/ on its next publish",
            )
        return _check_index(data, str(path))

    def read_text(self, relative: str) -> str:
        path = self.root / relative
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"{path}: listed in {INDEX_FILE} but missing from the store")

    def read_manifest(self, entry: dict[str, Any]) -> dict[str, Any]:
        return _parse_manifest(self.read_text(entry["manifest"]), entry["manifest"], self.location)

    # -- writing ------------------------------------------------------------
    def _lock(self) -> Any:
        from filelock import FileLock

        return FileLock(str(self.root / LOCK_FILE), timeout=LOCK_TIMEOUT)

    def _remove_stale_temps(self) -> None:
        """Temp files left by a killed writer (only ever written under the lock we now hold)."""
        for folder in (self.root, self.root / PAIRINGS):
            if not folder.is_dir():
                continue
            for p in folder.iterdir():
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        p.unlink()

    def _rebuild(self, previous: dict[str, Any]) -> dict[str, Any]:
        """index.json from the manifests present (keeping entries we cannot read, e.g. newer)."""
        from vllm_plugin_release.stages import manifest as mf

        index = empty_index()
        folder = self.root / PAIRINGS
        old = previous.get("pairings", {})
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            pid = path.stem
            data = path.read_bytes()
            try:
                manifest = json.loads(data)
                version = manifest.get("schema_version")
                if isinstance(version, int) and version > mf.SCHEMA_VERSION and pid in old:
                    index["pairings"][pid] = old[pid]
                    continue
                has_statement = (folder / f"{pid}.intoto.jsonl").exists()
                entry = entry_for(manifest, hashlib.sha256(data).hexdigest(), has_statement)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                if pid in old:
                    index["pairings"][pid] = old[pid]
                continue
            index["pairings"][pid] = entry
        return index

    def _index_for_writing(self) -> dict[str, Any]:
        """The current index; an unreadable one counts as empty (it is rebuilt from the
        manifests), one from a newer schema is refused rather than downgraded."""
        path = self.root / INDEX_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return empty_index()
        if isinstance(data, dict) and isinstance(data.get("schema_version"), int):
            return _check_index(data, str(path))
        return empty_index()

    def add(self, manifest_path: Path, statement_path: Path | None = None) -> AddResult:
        """Add (or replace) the pairing's manifest and rebuild index.json, under the lock."""
        from filelock import Timeout

        from vllm_plugin_release.stages import manifest as mf

        manifest = mf.read_json(manifest_path, what="manifest")
        mf.validate(manifest, str(manifest_path))
        data = manifest_path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        statement = statement_path.read_bytes() if statement_path else None
        pid = manifest["pairing_id"]
        entry = entry_for(manifest, digest, statement is not None)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / PAIRINGS).mkdir(exist_ok=True)
        try:
            with self._lock():
                self._remove_stale_temps()
                current = self._index_for_writing()
                previous = current["pairings"].get(pid)
                target = self.root / PAIRINGS / f"{pid}.json"
                if previous is not None:
                    for part in ("core", "plugin"):
                        if previous[part]["sha256"] != entry[part]["sha256"]:
                            raise GateFailed(
                                f"{self.location}: pairing {pid[:16]} is already in the store "
                                f"with {part} wheel {previous[part]['wheel']} sha256 "
                                f"{previous[part]['sha256']}; this manifest has "
                                f"{entry[part]['sha256']}",
                                hint="a pairing's wheels never change once published; "
                                "check the build's reproducibility",
                            )
                unchanged = (
                    previous is not None
                    and previous.get("manifest_sha256") == digest
                    and target.exists()
                    and target.read_bytes() == data
                )
                if not unchanged:
                    if statement is not None:
                        atomic_write_bytes(self.root / PAIRINGS / f"{pid}.intoto.jsonl", statement)
                    atomic_write_bytes(target, data)
                index = self._rebuild(current)
                new_bytes = index_bytes(index)
                index_path = self.root / INDEX_FILE
                if not index_path.exists() or index_path.read_bytes() != new_bytes:
                    atomic_write_bytes(index_path, new_bytes)
        except Timeout:
            raise OutsideFailure(
                f"{self.root / LOCK_FILE}: manifest store still locked after {LOCK_TIMEOUT:.0f} s",
                hint="another publisher holds it; the lock is released when that process ends",
            )
        status = "unchanged" if unchanged else ("replaced" if previous else "added")
        return AddResult(
            status=status, entry=index["pairings"][pid], previous=previous, store=self.location
        )


class HttpStore:
    """A manifest store served as static files (read-only)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.location = _redact(self.url)

    def read_text(self, relative: str) -> str:
        url = urllib.parse.urljoin(self.url, relative)
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "vllm-plugin-release"})
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
                return response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise BadInput(
                    f"{_redact(url)}: not found (HTTP 404)",
                    hint="is this the manifest store's base URL?",
                )
            raise OutsideFailure(f"{_redact(url)}: manifest store answered HTTP {exc.code}")
        except (urllib.error.URLError, OSError) as exc:
            raise OutsideFailure(
                f"{_redact(url)}: manifest store unreachable ({getattr(exc, 'reason', exc)})"
            )

    def read_index(self) -> dict[str, Any]:
        text = self.read_text(INDEX_FILE)
        where = _redact(urllib.parse.urljoin(self.url, INDEX_FILE))
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{where}:{exc.lineno}: index.json is not valid JSON ({exc.msg})")
        return _check_index(data, where)

    def read_manifest(self, entry: dict[str, Any]) -> dict[str, Any]:
        return _parse_manifest(self.read_text(entry["manifest"]), entry["manifest"], self.location)

    def add(self, manifest_path: Path, statement_path: Path | None = None) -> AddResult:
        raise BadInput(
            f"{self.location}: an HTTP manifest store is read-only",
            hint="publish to the folder that is served (--store PATH)",
        )


Store = DirStore | HttpStore


def open_store(location: str | Path) -> Store:
    text = str(location)
    if text.startswith(("http://", "https://")):
        return HttpStore(text)
    if text.startswith("file://"):
        return DirStore(Path(urllib.parse.unquote(urllib.parse.urlsplit(text).path)))
    if "://" in text:
        raise BadInput(f"--store {text}: unsupported scheme", hint="use a folder or http(s)://")
    return DirStore(Path(text))


# ---------------------------------------------------------------------------
# Consumers


def _version_key(text: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(text))
    except InvalidVersion:
        return (0, text)


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _core_matches(version: str, wanted: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if wanted[:1] in "<>=!~":
        try:
            return Version(version) in SpecifierSet(wanted)
        except (InvalidSpecifier, InvalidVersion):
            raise BadInput(f"--core {wanted}: not a version or version specifier")
    try:
        return Version(version) == Version(wanted)
    except InvalidVersion:
        return version == wanted


def query(
    index: dict[str, Any],
    *,
    core: str | None = None,
    plugin: str | None = None,
    verdict: str | None = None,
) -> list[dict[str, Any]]:
    """Entries matching the filters, newest core first, best verdict first."""
    out = []
    for entry in index["pairings"].values():
        if core and not _core_matches(entry["core"]["version"], core):
            continue
        if plugin and _norm(entry["plugin"]["name"]) != _norm(plugin):
            continue
        if verdict and entry.get("verdict") != verdict:
            continue
        out.append(entry)
    out.sort(key=lambda e: (e["plugin"]["name"], e["pairing_id"]))
    out.sort(key=lambda e: VERDICT_ORDER.get(e.get("verdict"), 9))
    out.sort(key=lambda e: _version_key(e["core"]["version"]), reverse=True)
    return out


def _plugin_column(entry: dict[str, Any]) -> str:
    commit = entry["plugin"].get("commit")
    return f"{entry['plugin']['name']}@{commit[:12] if commit else entry['plugin']['version']}"


@dataclass(frozen=True)
class Matrix:
    cores: list[str]
    plugins: list[str]
    cells: dict[tuple[str, str], list[dict[str, Any]]]

    def cell_text(self, core: str, plugin: str) -> str:
        entries = self.cells.get((core, plugin), [])
        if not entries:
            return ""
        if len(entries) == 1:
            return entries[0].get("verdict") or "none"
        return ", ".join(f"{e.get('verdict') or 'none'} (py{e.get('python')})" for e in entries)


def matrix(index: dict[str, Any]) -> Matrix:
    """Core versions (rows, newest first) x plugin commits (columns) -> verdicts."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    cores: set[str] = set()
    plugins: set[str] = set()
    for entry in index["pairings"].values():
        core, column = entry["core"]["version"], _plugin_column(entry)
        cores.add(core)
        plugins.add(column)
        cells.setdefault((core, column), []).append(entry)
    for entries in cells.values():
        entries.sort(key=lambda e: (str(e.get("python")), e["pairing_id"]))
    return Matrix(
        cores=sorted(cores, key=_version_key, reverse=True),
        plugins=sorted(plugins),
        cells=cells,
    )


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
    return "\n".join([head, rule, *rows]) + "\n"


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
                css = entries[0].get("verdict") if len(entries) == 1 else ""
                cls = f' class="{e(css)}"' if css in ("fleet", "pilot", "lab") else ""
                parts.append(f"<td{cls}>{e(m.cell_text(c, p))}</td>")
            parts.append("</tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_table(m: Matrix) -> Any:
    """A rich Table for the terminal."""
    from rich.table import Table

    table = Table(title="vLLM core x plugin compatibility")
    table.add_column("vLLM core", style="bold")
    for p in m.plugins:
        table.add_column(p, justify="center")
    colours = {"fleet": "green", "pilot": "yellow", "lab": "red"}
    for c in m.cores:
        cells = []
        for p in m.plugins:
            text = m.cell_text(c, p)
            entries = m.cells.get((c, p), [])
            colour = colours.get(entries[0].get("verdict")) if len(entries) == 1 else None
            cells.append(f"[{colour}]{text}[/{colour}]" if colour else text)
        table.add_row(c, *cells)
    return table
