"""One walk over a folder tree, without recursion.

A tree is an outside input (a plugin checkout, an extracted source): one nested deeper
than Python's recursion limit (1,100 folders) must be walked like any other, in one
pass, linear in the number of entries. `os.walk`, `Path.glob("**")` and
`shutil.rmtree` recurse once per level on the Pythons we support.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path


def walk(
    root: Path | str,
    skip: frozenset[str] = frozenset(),
    *,
    enter: Callable[[str], bool] | None = None,
    errors: str = "raise",
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative posix path, entry) of everything under `root`, each folder before what
    it holds, in name order. A link is an entry, never followed; a folder named in `skip`,
    or for whose relative path `enter` says False, is listed but not entered.
    `errors="skip"` passes over a folder that cannot be listed."""
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
    """`shutil.rmtree` without recursion: what `path` holds, then `path` (a link or a
    file is removed itself, never followed). `ignore_errors` leaves what cannot go."""
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
