"""What is installed, read the fast way (a few milliseconds for 150 distributions).

Distributions are found as Python finds them, on `sys.path`, first one wins; each one's
name and version come from its `.dist-info` folder name (`name-version.dist-info`, as
installers write it), read from METADATA only when the name does not carry the version.
A distribution's build is the sha256 of its RECORD (two wheels of one version list
different file hashes). The files of the core, the plugin and the guard are compared by
size and modification time (hashing vLLM's 30 MB at every start would cost ~0.1 s); their
RECORD gives `files_sha256` as the manifest signs it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import sys
from collections.abc import Collection

_SEPARATORS = re.compile(r"[-_.]+")
MAX_METADATA = 1024 * 1024  # a METADATA inside a zip, a .pth file: read up to this size


def canonical(name: str) -> str:
    """PEP 503 normalised name."""
    return _SEPARATORS.sub("-", name).lower()


def _metadata(folder: str, field: str) -> str | None:
    """A header of the folder's METADATA (or an egg's PKG-INFO), None when absent."""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith(f"{field}:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
        except OSError:
            continue
    return None


def _parse(entry: str, folder: str) -> tuple[str, str] | None:
    """(name, version) of a .dist-info or .egg-info folder; None when it names neither."""
    stem, _, kind = entry.rpartition(".")
    if kind not in ("dist-info", "egg-info") or not stem:
        return None
    name, _, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if kind == "egg-info" else rest
    if not version:
        version = _metadata(folder, "Version") or ""
    if not name:
        name = _metadata(folder, "Name") or ""
    return (name, version) if name else None


def _vendored_folders(owner: dict[str, str] | None) -> set[str]:
    """The .dist-info/.egg-info folders (site-relative, '/'-separated) that `owner`'s RECORD
    lists as its own files: a wheel's vendored distributions (setuptools/_vendor/...)."""
    data = record_bytes(owner["folder"]) if owner else None
    folders: set[str] = set()
    for row in (data or b"").decode("utf-8", errors="replace").splitlines():
        path = row.split(",", 1)[0].strip('"')
        for marker in (".dist-info/", ".egg-info/"):
            at = path.find(marker)
            if at > 0 and "/" in path[:at]:
                folders.add(path[: at + len(marker) - 1])
    return folders


def _inside(entry: str, roots: list[str]) -> tuple[str, str] | None:
    """(root, entry relative to it, '/'-separated) when `entry` lies inside a folder listed
    before it on the path (the innermost one: the working folder `-c` puts first may hold
    the environment), else None."""
    inside = [root for root in roots if entry.startswith(root.rstrip(os.sep) + os.sep)]
    if not inside:
        return None
    root = max(inside, key=len)
    return root, os.path.relpath(entry, root).replace(os.sep, "/")


def own_folders() -> list[str]:
    """The environment's own folders (real paths): its site-packages and the standard
    library. Any other sys.path entry was put there (the working folder, PYTHONPATH, a
    .pth file) and holds no certified distribution."""
    import site

    folders = site.getsitepackages([sys.prefix, sys.exec_prefix])
    folders.append(os.path.dirname(os.__file__))
    return [os.path.realpath(f) for f in dict.fromkeys(folders)]


def _within(real: str, folders: list[str]) -> bool:
    return any(real == f or real.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _headers(text: str) -> dict[str, str]:
    """The header fields of a METADATA or PKG-INFO text (the first of each)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            out.setdefault(key.strip(), value.strip())
    return out


def _zipped(path: str) -> list[tuple[str, str]]:
    """(name, version) of each distribution inside a zip on sys.path (a wheel, a zipped
    egg); [] for a file that is no zip (Python imports nothing from it either)."""
    import zipfile

    out = []
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                top, _, rest = info.filename.partition("/")
                if rest not in ("METADATA", "PKG-INFO") or not (
                    top == "EGG-INFO" or top.endswith((".dist-info", ".egg-info"))
                ):
                    continue
                text = zf.read(info)[:MAX_METADATA] if info.file_size <= MAX_METADATA else b""
                fields = _headers(text.decode("utf-8", errors="replace"))
                if top == "EGG-INFO":
                    named = _egg_name(path)
                else:  # name-version.dist-info, name-version-pyX.Y.egg-info
                    stem, _, rest = top.rpartition(".")[0].partition("-")
                    named = (stem, rest.split("-", 1)[0])
                name = fields.get("Name") or named[0]
                version = fields.get("Version") or named[1]
                if name:
                    out.append((name, version))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return []
    return out


def _egg_name(path: str) -> tuple[str, str]:
    """(name, version) from an egg's file name (`name-version-pyX.Y.egg`)."""
    base = os.path.basename(path.rstrip(os.sep))
    parts = (base[: -len(".egg")] if base.endswith(".egg") else base).split("-")
    return parts[0], parts[1] if len(parts) > 1 else ""


def distributions(
    paths: list[str] | None = None, sites: list[str] | None = None
) -> dict[str, dict[str, str]]:
    """{canonical name: {name, version, folder}} of every distribution on `paths`
    (default sys.path), the first of a name winning, as importlib.metadata finds them.

    One that is not in the environment's own folders (`sites`, default `own_folders()`):
    in a zip (a wheel or an egg on sys.path), an egg folder, or a folder put on sys.path,
    also has `outside` (a zip, an egg, a folder) and `entry` (its sys.path entry). Each
    of those is listed, under `name entry` when the name was found before it: it is
    drift wherever it is, whatever its version.

    A path entry inside an earlier one (setuptools >= 71 adds `setuptools/_vendor` when it
    is imported) holds files of the distribution installed there: a dist-info folder in it
    that the owner's RECORD lists (the owner named by the entry's first folder) is part of
    that wheel, checked through its RECORD, and not counted as installed on its own."""
    own = own_folders() if sites is None else [os.path.realpath(s) for s in sites]
    found: dict[str, dict[str, str]] = {}
    roots: list[str] = []

    def add(name: str, version: str, folder: str, outside: str = "", entry: str = "") -> None:
        key, info = canonical(name), {"name": name, "version": version, "folder": folder}
        if outside:
            info.update(outside=outside, entry=entry)
        if key not in found:
            found[key] = info
        elif outside:
            found[f"{key} {entry}"] = info

    for entry in sys.path if paths is None else paths:
        where = entry or "."
        try:
            names = sorted(os.listdir(where))
        except NotADirectoryError:  # a zip: a wheel or an egg put on sys.path
            kind = "an egg" if where.endswith(".egg") else "a zip"
            for name, version in _zipped(where):
                add(name, version, where, kind, entry)
            continue
        except OSError:  # a missing folder
            continue
        if where.rstrip(os.sep).endswith(".egg") or "EGG-INFO" in names:
            named = _egg_name(where)
            info = os.path.join(where, "EGG-INFO")
            name = _metadata(info, "Name") or named[0]
            add(name, _metadata(info, "Version") or named[1], where, "an egg", entry)
            continue
        outside = "" if _within(os.path.realpath(where), own) else "a folder"
        owned: set[str] = set()
        nested = _inside(os.path.abspath(where), roots)
        if nested is not None:
            owner = found.get(canonical(nested[1].split("/", 1)[0]))
            if owner and os.path.abspath(os.path.dirname(owner["folder"])) == nested[0]:
                owned = {f[len(nested[1]) + 1 :] for f in _vendored_folders(owner)
                         if f.startswith(nested[1] + "/")}  # fmt: skip
        roots.append(os.path.abspath(where))
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")) or name in owned:
                continue
            folder = os.path.join(where, name)
            parsed = _parse(name, folder)
            if parsed is not None:
                add(parsed[0], parsed[1], folder, outside, entry)
    return found


def added_by(entry: str) -> str:
    """How a sys.path entry came there, as far as this process can tell: the working
    folder, PYTHONPATH, the .pth file in site-packages that names it."""
    real = os.path.realpath(entry or ".")
    first = sys.path[0] if sys.path else None
    if not entry or (entry == first and real == os.path.realpath(os.getcwd())):
        return "the working folder, first on sys.path"
    for given in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if given and os.path.realpath(given) == real:
            return "on PYTHONPATH"
    import site

    for folder in site.getsitepackages([sys.prefix, sys.exec_prefix]):
        try:
            pth = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in pth:
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read(MAX_METADATA).splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.rstrip()
                named = not line.startswith(("#", "import ", "import\t"))
                if line and named and os.path.realpath(os.path.join(folder, line)) == real:
                    return f"named by {os.path.join(folder, name)}"
    if entry == first:
        return "first on sys.path: the script's folder"
    return "on sys.path"


def entry_of(folder: str, paths: list[str] | None = None) -> str | None:
    """The entry of `paths` (default sys.path) that is `folder` (same real path), None
    when none is."""
    real = os.path.realpath(folder)
    for entry in sys.path if paths is None else paths:
        if os.path.realpath(entry or ".") == real:
            return entry
    return None


def resolve(name: str, paths: list[str] | None = None) -> tuple[list[str], str | None]:
    """Where Python imports the top-level module `name` from: its file and, for a package,
    the folders its submodules come from; ([], why) when it does not resolve to files.
    `paths` None: this process (a module imported already is the one in use, and import
    hooks count); else as the path finder finds it on `paths`."""
    import importlib.machinery
    import importlib.util

    try:
        if paths is None:
            spec = importlib.util.find_spec(name)
        else:
            spec = importlib.machinery.PathFinder.find_spec(name, paths)
    except Exception as exc:  # an import hook that fails, a module without a spec
        return [], f"{type(exc).__name__}: {exc}"
    if spec is None:
        return [], "cannot be imported"
    where = [spec.origin] if spec.has_location and spec.origin else []
    where += list(spec.submodule_search_locations or [])
    return (where, None) if where else ([], f"is imported from no file ({spec.origin})")


def top_level(paths: Collection[str]) -> list[str]:
    """The top-level modules and packages among a distribution's files ('/'-separated): each
    first folder that is a name Python can import, each top-level module file."""
    import bisect
    import importlib.machinery

    suffixes = tuple(importlib.machinery.all_suffixes())
    keys = sorted(paths)  # certified.json keeps them sorted: a linear pass in C
    tops = set()
    at = 0
    while at < len(keys):
        head, sep, _ = keys[at].partition("/")
        if sep:  # a folder: a package (or a namespace package); skip the rest of its files
            name = head
            at = bisect.bisect_left(keys, head + "0", at)  # "/" sorts just before "0"
        else:
            name = head.split(".", 1)[0] if head.endswith(suffixes) else ""
            at += 1
        if name.isidentifier():
            tops.add(name)
    return sorted(tops)


def record_bytes(folder: str) -> bytes | None:
    """The RECORD of a .dist-info folder (None: an egg-info, or no RECORD)."""
    try:
        with open(os.path.join(folder, "RECORD"), "rb") as f:
            return f.read()
    except OSError:
        return None


def record_sha256(folder: str) -> str | None:
    data = record_bytes(folder)
    return hashlib.sha256(data).hexdigest() if data is not None else None


def record_rows(data: bytes) -> list[tuple[str, str]]:
    """(path, hash) for the rows of a RECORD that carry a sha256 (a row with a quote is read
    by the csv module, every other one split at its last two commas: RECORD is a csv file
    whose third column never holds a comma)."""
    rows: list[tuple[str, str]] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        parsed = next(csv.reader(io.StringIO(line)), []) if '"' in line else line.rsplit(",", 2)
        if len(parsed) >= 2 and parsed[1].startswith("sha256="):
            rows.append((parsed[0], parsed[1]))
    return rows


def _covered(path: str) -> str | None:
    """The path as the manifest's files_sha256 covers it (installed unchanged, inside the
    site folder), else None."""
    if path.startswith("/") or "__pycache__" in path or ".dist-info/" in path or ".." in path:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if (
            not parts
            or path.startswith("/")
            or ".." in parts
            or "__pycache__" in parts
            or parts[0].endswith(".dist-info")
        ):
            return None
        return "/".join(parts)
    if "//" in path or "/./" in path or path.startswith("./") or path.endswith("/."):
        return "/".join(p for p in path.split("/") if p not in ("", ".")) or None
    return path or None


def covered(data: bytes) -> dict[str, str]:
    """{path: hash} of the files of a RECORD that an installer puts into site-packages
    unchanged (the manifest's files_sha256 covers them)."""
    out = {}
    for path, digest in record_rows(data):
        where = _covered(path)
        if where is not None:
            out[where] = digest
    return out


def files_sha256(data: bytes) -> str:
    """The manifest's `files_sha256` from an installed RECORD: sha256 over the sorted
    `path,hash` lines of the files an installer puts into site-packages unchanged."""
    entries = covered(data)
    text = "".join(f"{p},{entries[p]}\n" for p in sorted(entries))
    return hashlib.sha256(text.encode()).hexdigest()


def file_stats(folder: str, paths: list[str]) -> dict[str, list[int]]:
    """{path: [size, mtime_ns]} of a distribution's files ([-1, -1]: missing)."""
    site = os.path.dirname(folder) + os.sep
    out: dict[str, list[int]] = {}
    stat = os.stat
    for path in paths:
        try:
            st = stat(site + path)
            out[path] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[path] = [-1, -1]
    return out


def snapshot(
    roles: dict[str, str], paths: list[str] | None = None, sites: list[str] | None = None
) -> dict[str, object]:
    """What `vpr install` records once the environment is verified: every distribution
    (version and RECORD sha256), and the file stats of the distributions named in `roles`
    (role -> name: core, plugin, guard)."""
    dists = distributions(paths, sites)
    out_dists = {
        key: {"version": d["version"], "record": record_sha256(d["folder"])}
        for key, d in sorted(dists.items())
    }
    files = {}
    for name in sorted(set(roles.values())):
        found = dists.get(canonical(name))
        data = record_bytes(found["folder"]) if found else None
        if data is not None:
            files[canonical(name)] = file_stats(found["folder"], list(covered(data)))
    return {"dists": out_dists, "files": files}
