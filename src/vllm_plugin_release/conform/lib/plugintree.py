"""The plugin tree, the only place the analysers read plugin files from: a path that resolves
(links included) outside the tree is refused, only regular files are opened, reads are bounded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_BYTES = 1024 * 1024  # per installer file: real ones are a few KiB
OUTSIDE = "outside the plugin tree; not read"
MISSING = "missing in the plugin source"


def within(root: Path, path: Path) -> Path | None:
    """`path` with every link resolved, when that is `root` or under it; else None (also
    for a name no file can have: a NUL byte in it)."""
    if "\0" in os.fspath(path):
        return None
    base = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
        return Path(real)
    return None


def exists_within(root: Path, path: Path) -> Path | None:
    """`within(root, path)` when it exists (nothing outside the tree is looked at)."""
    inside = within(root, path)
    return inside if inside is not None and inside.exists() else None


class Unread(Exception):
    """A file that is not read: `reason` says why, after "PATH is" ("outside the plugin
    tree; not read", "not a regular file; not read", ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the regular file `path` (no blocking, no last link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise Unread(MISSING)
    except OSError as exc:
        raise Unread(f"unreadable ({exc.strerror}); not read")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a fifo, a device
            raise Unread("not a regular file; not read")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)


def read_text(root: Path, path: Path, limit: int = MAX_BYTES) -> tuple[str, bool]:
    """The text of `path` inside `root` and whether it was cut at `limit` bytes."""
    inside = within(root, path)
    if inside is None:
        raise Unread(OUTSIDE)
    raw = read_regular(inside, limit)
    return raw[:limit].decode("utf-8", errors="replace"), len(raw) > limit


def too_large(shown: str, limit: int = MAX_BYTES) -> str:
    """The note for a file cut at `limit` bytes."""
    return f"{shown}: larger than {limit // 1024} KiB; analysed the first {limit // 1024} KiB"
