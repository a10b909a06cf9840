"""Content-addressed cache under `.vpr/`, atomic file writes, and folder trees walked and
removed without recursion."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import marshal
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput

# The most read of a cache entry's own notes (a cache entry is outside input): a file's
# verified-marker is one line; a tree's manifest lists its files.
_MAX_MARKER = 64 * 1024
_MAX_TREE = 64 * bounded.MiB

CHUNK = 1 << 20
TREE_MANIFEST = ".vpr-manifest.json"
# Written by the tools that use a tree (git, plugin tests), never part of what is built.
TREE_SKIP = frozenset({".git", "__pycache__", ".pytest_cache"})
# A file's stamp: [inode, size, mtime_ns, ctime_ns] (a list: the digest and the JSON hold
# it as one), or `link:<target>` for a link; a tree's stamps: relative path -> stamp.
Stamps = dict[str, str | list[int]]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def verified_file(path: Path, sha256: str) -> bool:
    """True when `path` holds `sha256`: re-hashed unless its `.verified.json` marker vouches
    for this very file (inode, mtime, size)."""
    marker = path.with_name(path.name + ".verified.json")
    st = path.stat()
    stamp = {"inode": st.st_ino, "mtime_ns": st.st_mtime_ns, "size": st.st_size, "sha256": sha256}
    try:
        if json.loads(bounded.read_file(marker, _MAX_MARKER, "marker")) == stamp:
            return True
    except (OSError, ValueError, BadInput):  # absent, unreadable, too large: hash again
        pass
    if sha256_file(path) != sha256:
        marker.unlink(missing_ok=True)
        return False
    write_json(marker, stamp)
    return True


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 (or `link:<target>`) of every file under `root`."""
    files: dict[str, str] = {}
    for rel, entry in walk(root, TREE_SKIP, errors="skip"):
        if entry.is_symlink():
            files[rel] = "link:" + os.readlink(entry.path)
        elif not entry.is_dir() and rel != TREE_MANIFEST:
            files[rel] = sha256_file(Path(entry.path))
    return files


def tree_stamps(root: Path) -> Stamps:
    """Relative path -> [inode, size, mtime_ns, ctime_ns] of every file `tree_digest` covers:
    ctime cannot be set back, so a rewrite that restores mtime and size still shows."""
    stamps: Stamps = {}
    for rel, entry in walk(root, TREE_SKIP):
        if entry.is_symlink():
            stamps[rel] = "link:" + os.readlink(entry.path)
        elif not entry.is_dir(follow_symlinks=False) and rel != TREE_MANIFEST:
            st = entry.stat(follow_symlinks=False)
            stamps[rel] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    return stamps


def stamps_digest(stamps: Stamps) -> str:
    """sha256 of `tree_stamps` in walk order (marshal version 0 writes every string alike,
    interned or not)."""
    return hashlib.sha256(marshal.dumps(stamps, 0)).hexdigest()


def write_tree_manifest(root: Path) -> None:
    """Record what an extracted tree holds (written last, inside the cache entry)."""
    before = tree_stamps(root)
    _write_manifest(root, tree_digest(root), before)


def _write_manifest(root: Path, files: dict[str, str], stamps: Stamps) -> None:
    """The digest, and the stamps taken before it when nothing changed while hashing."""
    data: dict[str, Any] = {"files": files}
    if stamps == tree_stamps(root):
        data["stamps"] = stamps
    write_json(root / TREE_MANIFEST, data)


def tree_intact(root: Path) -> bool:
    """True when the tree still holds what its manifest recorded; hashed again unless the
    stamps of the last full check all still hold."""
    try:
        data = json.loads(bounded.read_file(root / TREE_MANIFEST, _MAX_TREE, "tree manifest"))
        recorded = data["files"]
    except (OSError, ValueError, KeyError, TypeError, BadInput):
        return False
    before = tree_stamps(root)
    if data.get("stamps") == before:
        return True
    if recorded != tree_digest(root):
        return False
    with contextlib.suppress(OSError):  # a read-only cache is checked in full each time
        _write_manifest(root, recorded, before)
    return True


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key_of(obj: Any) -> str:
    """Stable hash of plain data: the cache key of a stage's inputs."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Files are written 0644 on purpose (a restrictive umask is honoured): never writable by
# others, whatever the umask; a secret (a private key) is made 0600 where it is written.
FILE_MODE = 0o644 & ~_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, made durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    """Deterministic JSON (sorted keys, 2-space indent, trailing newline), atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def atomic_copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# Leftovers of killed runs: scratch folders and partial downloads name their owner.

OWNER_FILE = ".vpr-owner"
_SWEPT: set[Path] = set()


def _start_time(pid: int) -> str:
    """The start time of process `pid` (clock ticks since boot; '' when unknown)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def owner_stamp(pid: int | None = None) -> str:
    """'<pid> <start time>' of this process: names the owner even if the pid is reused."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {_start_time(pid)}".strip()


def owner_alive(stamp: str) -> bool:
    """Whether the process a stamp names still runs (unreadable stamps count as alive)."""
    fields = stamp.split()
    try:
        pid = int(fields[0])
    except (IndexError, ValueError):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return len(fields) < 2 or _start_time(pid) in ("", fields[1])


def sweep_stale(tmp: Path) -> list[Path]:
    """Remove scratch folders and `<sha>.part.<pid>` downloads under `tmp` whose owner is gone."""
    removed: list[Path] = []
    for entry in sorted(tmp.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            try:
                stamp = (entry / OWNER_FILE).read_text()
            except OSError:
                continue
            if not owner_alive(stamp):
                remove_tree(entry, ignore_errors=True)
                removed.append(entry)
        elif ".part." in entry.name and not owner_alive(entry.name.rsplit(".part.", 1)[1]):
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
            removed.append(entry)
    return removed


# Local builds' scratch (thousands of small files written once) costs far less on a RAM
# filesystem, and nothing there has to survive the run.
SCRATCH_MIN_FREE = 2 << 30


def private_scratch_root(base: Path, *, create: bool = True) -> Path | None:
    """This user's private folder `vpr-<uid>` (mode 0700) in the shared folder `base`, or None;
    `create` makes it where `base` has SCRATCH_MIN_FREE. A link or another's folder is not used."""
    root = base / f"vpr-{os.getuid()}"
    try:
        if create:
            if shutil.disk_usage(base).free < SCRATCH_MIN_FREE:
                return None
            with contextlib.suppress(FileExistsError):
                os.mkdir(root, 0o700)
        info = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return root


def sweep_once(folder: Path | None) -> None:
    """`sweep_stale(folder)` the first time this process uses it."""
    if folder is not None and folder not in _SWEPT and folder.is_dir():
        _SWEPT.add(folder)
        sweep_stale(folder)


# Written last into an environment made by a stage: without it the env is remade.
ENV_COMPLETE = ".vpr-complete"


class Cache:
    """The `.vpr/` folder. Every path it hands out is keyed by content or inputs."""

    def __init__(self, root: Path | str = ".vpr") -> None:
        self.root = Path(root).absolute()
        sweep_once(self.root / "tmp")  # what a killed run left: gone at the next

    def cas_path(self, sha256: str) -> Path:
        return self.root / "cas" / "sha256" / sha256[:2] / sha256

    def src_dir(self, sha256: str) -> Path:
        return self.root / "src" / sha256

    def git_dir(self, commit: str) -> Path:
        return self.root / "git" / commit

    def env_dir(self, name: str, key: str) -> Path:
        return self.root / "envs" / f"{name}-{key[:16]}"

    def complete_envs(self, name: str) -> list[Path]:
        """The environments `name-*` made to the end (`ENV_COMPLETE` written last)."""
        return sorted(
            e for e in (self.root / "envs").glob(f"{name}-*") if (e / ENV_COMPLETE).is_file()
        )

    def stage_dir(self, stage: str, key: str) -> Path:
        return self.root / "stages" / stage / key

    @property
    def tmp(self) -> Path:
        """`.vpr/tmp/`; the first use in a process removes what killed runs left there."""
        path = self.root / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        sweep_once(path)
        return path

    @contextlib.contextmanager
    def lock(self, entry: Path) -> Iterator[None]:
        """Hold one shared cache entry's lock while it is checked and created; the lock file goes
        on release, so a waiter that wakes holding a removed file's lock tries again."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(str(Path(entry).absolute()).encode()).hexdigest()[:32]
        path = locks / f"{name}.lock"
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
            os.close(fd)

    @contextlib.contextmanager
    def scratch(self, prefix: str, *, under: Path | None = None) -> Iterator[Path]:
        """A temporary folder under .vpr/tmp (or `under`), removed afterwards whatever happens."""
        sweep_once(under)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=under or self.tmp))
        try:
            (path / OWNER_FILE).write_text(owner_stamp())
            yield path
        finally:
            remove_tree(path, ignore_errors=True)

    @contextlib.contextmanager
    def publish_dir(self, final: Path) -> Iterator[Path]:
        """Build a folder in scratch space; it appears at `final` only if the block succeeds."""
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            yield work
            if final.exists():
                remove_tree(final)
            os.replace(work, final)
        finally:
            remove_tree(work, ignore_errors=True)


# Without recursion: a tree is outside input, and one nested deeper than Python's recursion
# limit must be walked like any other (`os.walk` and `shutil.rmtree` recurse once per level).


def walk(
    root: Path | str,
    skip: frozenset[str] = frozenset(),
    *,
    enter: Callable[[str], bool] | None = None,
    errors: str = "raise",
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative posix path, entry) of everything under `root`, folders first, in name order;
    links never followed; a folder in `skip`, or refused by `enter`, is listed but not entered."""
    stack = [""]
    top = os.fspath(root)
    while stack:
        prefix = stack.pop()
        try:
            with os.scandir(os.path.join(top, prefix) if prefix else top) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            if errors == "skip":
                continue
            raise
        folders = []
        for entry in entries:
            rel = prefix + entry.name
            yield rel, entry
            if (
                entry.name not in skip
                and entry.is_dir(follow_symlinks=False)
                and (enter is None or enter(rel))
            ):
                folders.append(rel + "/")
        stack.extend(reversed(folders))  # depth first, in name order


def remove_tree(path: Path | str, *, ignore_errors: bool = False) -> None:
    """`shutil.rmtree` without recursion (a link or a file is removed itself, never followed)."""
    top = os.fspath(path)
    try:
        if not os.path.isdir(top) or os.path.islink(top):
            os.unlink(top)
            return
        folders = [top]
        for _rel, entry in walk(top, errors="skip" if ignore_errors else "raise"):
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            else:
                _remove(os.unlink, entry.path, ignore_errors)
        for folder in reversed(folders):  # each after every folder under it
            _remove(os.rmdir, folder, ignore_errors)
    except OSError:
        if not ignore_errors:
            raise


def _remove(how: Callable[[str], None], target: str, ignore_errors: bool) -> None:
    try:
        how(target)
    except FileNotFoundError:
        pass
    except OSError:
        if not ignore_errors:
            raise
