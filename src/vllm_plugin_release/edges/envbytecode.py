"""The pairing env's bytecode, kept (hard links into `.vpr/bytecode/<key>/`, keyed by lock,
core wheel and Python) for the next environment of that key, and put back only beside the
very source file it was compiled from; the plugin's packages are never kept."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

PYCACHE = "__pycache__"
# The number each CPython writes at the head of its bytecode, by cache tag (stable within
# a minor version): a pairing env may run another Python than vpr's own (the TT pairing's
# 3.10 under vpr on 3.11), and its pyc carry its number, not ours.
MAGIC = {"cpython-310": 3439, "cpython-311": 3495, "cpython-312": 3531, "cpython-313": 3571}
_MAX_POINTER = 64 * 1024  # bytes read of the pointer file (it holds two paths)
_TIMESTAMP = 0  # the flags of a pyc checked by its source's mtime and size


def site_packages(env: Path) -> Path | None:
    """The environment's site-packages (POSIX layout), or None."""
    found = sorted(env.glob("lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None


def _pyc_name(name: str) -> tuple[str, str] | None:
    """`mod.cpython-311.pyc` -> ("mod", "cpython-311"); None for an optimised one
    (`mod.cpython-311.opt-1.pyc`) or any other file."""
    parts = name.split(".")
    if len(parts) != 3 or parts[2] != "pyc":
        return None
    return parts[0], parts[1]


def magic(tag: str) -> bytes | None:
    """The head of a pyc named for cache tag `tag` ("cpython-310"); None for a tag whose
    number is not known here (its bytecode is then not kept)."""
    if tag == sys.implementation.cache_tag:
        return importlib.util.MAGIC_NUMBER
    number = MAGIC.get(tag)
    return None if number is None else number.to_bytes(2, "little") + b"\r\n"


def current(pyc: Path, source: Path, head_magic: bytes = importlib.util.MAGIC_NUMBER) -> bool:
    """`pyc` is bytecode of the interpreter whose magic number is `head_magic` (this one's
    by default), written for `source` as it is now (the header Python itself checks:
    version, then the source's mtime and size)."""
    with pyc.open("rb") as f:
        head = f.read(16)
    st = source.stat()
    return (
        len(head) == 16
        and head[:4] == head_magic
        and int.from_bytes(head[4:8], "little") == _TIMESTAMP
        and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def _link(source: Path, dest: Path, *, copy: bool = True) -> bool:
    """Hard-link `source` to `dest` (else, when `copy`, copy it there whole); False when
    not done or when `dest` appeared meanwhile (never written over)."""
    try:
        os.link(source, dest)
    except FileExistsError:
        return False
    except OSError:
        if not copy:
            return False
        part = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            shutil.copyfile(source, part)
            os.replace(part, dest)
        except OSError:
            part.unlink(missing_ok=True)
            return False
    return True


def keep(site: Path, store: Path, skip: tuple[str, ...] = ()) -> int:
    """Link into `store` the current bytecode in `site` that it lacks, with its source,
    except under the top-level folders `skip` (the plugin's); how many files. Bytecode
    that is already a link (put here from the store or a build environment) is not kept
    again. (Plain strings, not Paths: a pairing env holds some 5,000 pyc files.)"""
    kept = 0
    top = str(site)
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == top:
            dirnames[:] = [d for d in dirnames if d not in skip]
        if os.path.basename(dirpath) != PYCACHE:
            continue
        dirnames.clear()
        pkg = os.path.dirname(dirpath)
        kept_pkg = os.path.join(store, os.path.relpath(pkg, top))
        for name in filenames:
            parsed = _pyc_name(name)
            head = None if parsed is None else magic(parsed[1])
            if parsed is None or head is None:
                continue
            pyc, source = os.path.join(dirpath, name), os.path.join(pkg, parsed[0] + ".py")
            dest = os.path.join(kept_pkg, PYCACHE, name)
            with contextlib.suppress(OSError):
                if os.stat(pyc).st_nlink > 1 or os.path.exists(dest):
                    continue
                if os.path.isfile(source) and current(Path(pyc), Path(source), head):
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    kept_source = Path(kept_pkg, parsed[0] + ".py")
                    if kept_source.exists() or _link(Path(source), kept_source, copy=False):
                        kept += _link(Path(pyc), Path(dest))
    return kept


def _cache_tag(site: Path) -> str | None:
    """`lib/python3.11/site-packages` -> "cpython-311" (the pyc names that interpreter
    reads); None for another layout."""
    version = site.parent.name.removeprefix("python")
    major, _, minor = version.partition(".")
    return f"cpython-{major}{minor}" if major.isdigit() and minor.isdigit() else None


def restore(store: Path, site: Path) -> int:
    """Link the kept bytecode into `site` beside the very files it was written for (the
    same inode as the kept source); how many files. Bytecode already there stays; bytecode
    for another Python is not put there (a pure-Python file is the same file for each).
    (Plain strings, not Paths: a build environment holds some 5,000 pyc files.)"""
    restored = 0
    tag = _cache_tag(site)
    top = str(store)
    for dirpath, dirnames, filenames in os.walk(top):
        if os.path.basename(dirpath) != PYCACHE:
            continue
        dirnames.clear()
        kept_pkg = os.path.dirname(dirpath)
        pkg = os.path.join(site, os.path.relpath(kept_pkg, top))
        target_dir = os.path.join(pkg, PYCACHE)
        made = os.path.isdir(target_dir)
        for name in filenames:
            parsed = _pyc_name(name)
            if parsed is None or (tag and parsed[1] != tag):
                continue
            source = parsed[0] + ".py"
            try:
                if not os.path.samefile(os.path.join(pkg, source), os.path.join(kept_pkg, source)):
                    continue
                if not made:
                    os.mkdir(target_dir)
                    made = True
            except OSError:  # no such file here (another package set): nothing to put back
                continue
            restored += _link(Path(dirpath, name), Path(target_dir, name))
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
        with open(env / POINTER, "rb") as f:  # bounded: a pointer is a line of JSON
            text = f.read(_MAX_POINTER + 1)
        if len(text) > _MAX_POINTER:  # not a pointer vpr wrote
            return 0
        noted = json.loads(text)
        store, skip = Path(noted["store"]), tuple(noted["skip"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return keep(site, store, skip) if site is not None else 0
