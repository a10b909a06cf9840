"""The pairing env's bytecode, kept for the next environment made from the same lock.

Python writes a module's bytecode (`__pycache__/NAME.cpython-311.pyc`) when it first
imports it. In a new pairing env that is most of the first import of vLLM (torch alone
is over a thousand modules): ~3x the import with bytecode. The environment is made
again whenever the core or the plugin wheel changes, but its third-party packages (the
lock) stay, so the bytecode Python wrote in one environment is kept (`keep`) and put
into the next one made from the same lock (`restore`), before anything imports there.

Kept as checked-hash pycs (PEP 552): the header holds the hash of the source's bytes, so
a kept pyc is valid for a file with the same bytes wherever it lives and whatever its
mtime, and Python checks that hash on every import. A stale or foreign entry costs one
compile (Python writes a fresh pyc), never a wrong module. Only bytecode Python wrote
itself, for a source beside it that it still matches, and only of this interpreter's
bytecode version, is kept; nothing is compiled here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

PYCACHE = "__pycache__"
_TIMESTAMP, _CHECKED_HASH = 0, 0b11


def site_packages(env: Path) -> Path | None:
    """The environment's site-packages (POSIX layout), or None."""
    found = sorted(env.glob("lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None


def _source_of(pyc: Path) -> Path | None:
    """`pkg/__pycache__/mod.cpython-311.pyc` -> `pkg/mod.py`; None for optimised ones."""
    parts = pyc.name.split(".")
    if len(parts) != 3 or parts[2] != "pyc" or pyc.parent.name != PYCACHE:
        return None
    return pyc.parent.parent / f"{parts[0]}.py"


def checked_hash_pyc(pyc: bytes, source: Path) -> bytes | None:
    """`pyc` as a checked-hash pyc for `source`, when it is this interpreter's bytecode
    written for exactly that source; else None."""
    if len(pyc) < 16 or pyc[:4] != importlib.util.MAGIC_NUMBER:
        return None
    flags = int.from_bytes(pyc[4:8], "little")
    data = source.read_bytes()
    digest = importlib.util.source_hash(data)
    if flags == _CHECKED_HASH:
        return pyc if pyc[8:16] == digest else None
    if flags != _TIMESTAMP:
        return None  # unchecked-hash pycs are never kept
    st = source.stat()
    mtime = int.from_bytes(pyc[8:12], "little")
    size = int.from_bytes(pyc[12:16], "little")
    if mtime != int(st.st_mtime) & 0xFFFFFFFF or size != st.st_size & 0xFFFFFFFF:
        return None  # written for another version of the source
    return pyc[:4] + _CHECKED_HASH.to_bytes(4, "little") + digest + pyc[16:]


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".pyc.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def keep(site: Path, store: Path, skip: tuple[str, ...] = ()) -> int:
    """Copy into `store` the bytecode in `site` that it lacks, except under the top-level
    folders `skip` (the plugin's: they change with every plugin commit); how many files."""
    kept = 0
    for dirpath, dirnames, filenames in os.walk(site):
        rel_dir = Path(dirpath).relative_to(site)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in skip]
        if rel_dir.name != PYCACHE:
            continue
        dirnames.clear()
        for name in filenames:
            pyc = Path(dirpath, name)
            source = _source_of(pyc)
            dest = store / rel_dir / name
            if source is None or dest.exists() or not source.is_file():
                continue
            with contextlib.suppress(OSError):
                data = checked_hash_pyc(pyc.read_bytes(), source)
                if data is not None:
                    _write(dest, data)
                    kept += 1
    return kept


def restore(store: Path, site: Path) -> int:
    """Put the kept bytecode into `site` (linked, else copied) beside the sources it was
    written for; how many files. Existing bytecode is left alone."""
    restored = 0
    for dirpath, _, filenames in os.walk(store):
        rel_dir = Path(dirpath).relative_to(store)
        if rel_dir.name != PYCACHE or not (site / rel_dir.parent).is_dir():
            continue
        for name in filenames:
            target = site / rel_dir / name
            source = _source_of(target)
            if source is None or target.exists() or not source.is_file():
                continue
            target.parent.mkdir(exist_ok=True)
            try:
                os.link(Path(dirpath, name), target)
            except OSError:
                with contextlib.suppress(OSError):
                    shutil.copyfile(Path(dirpath, name), target)
                    restored += 1
                continue
            restored += 1
    return restored


# Beside an environment's marker: where its bytecode is kept, and what is not kept.
POINTER = ".vpr-bytecode.json"


def remember(env: Path, store: Path, skip: tuple[str, ...]) -> None:
    """Note in `env` where its bytecode goes (`keep_for` reads it after later imports)."""
    (env / POINTER).write_text(json.dumps({"store": str(store), "skip": list(skip)}))


def keep_for(env: Path) -> int:
    """`keep` for an environment made by `vpr env` (0 for any other environment)."""
    site = site_packages(env)
    try:
        noted = json.loads((env / POINTER).read_text())
        store, skip = Path(noted["store"]), tuple(noted["skip"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return keep(site, store, skip) if site is not None else 0
