"""Private temporary folders that a killed run does not leave behind for good.

A run removes its temporary folders when it ends, but not when it is killed (SIGKILL, a
lost machine): the warm worker's folder and the in-environment job folders stayed in the
temporary directory, one set per killed run. Each folder made here carries the owner
stamp the cache's scratch folders carry (`core/cache.owner_stamp`: the process id and its
start time); making the next one removes the folders of the same prefix whose owner is
gone.

Only folders that are plainly ours are removed: a real directory (not a link), owned by
this user, named with our prefix, whose owner file names a process that no longer runs
(or whose id now belongs to a later process). A folder without an owner file (another
run making it right now, or one made before this module) is left alone.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from vllm_plugin_release.core.cache import OWNER_FILE, owner_alive, owner_stamp, remove_tree

_MAX_OWNER_BYTES = 64  # "pid start-time": a longer file is not ours
_swept: set[tuple[str, str]] = set()  # (root, prefix): once a process is enough


def sweep(prefix: str, root: Path | None = None) -> int:
    """Remove the folders `root/prefix*` (the temporary directory by default) of runs that
    are gone; how many. Errors are ignored: this is tidying, never the run's work."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            fd = os.open(Path(entry.path) / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                text = os.read(fd, _MAX_OWNER_BYTES + 1)
            finally:
                os.close(fd)
        except OSError:
            continue
        if len(text) <= _MAX_OWNER_BYTES and not owner_alive(text.decode("ascii", "replace")):
            remove_tree(Path(entry.path), ignore_errors=True)
            removed += not os.path.lexists(entry.path)
    return removed


def make(prefix: str, root: Path | None = None) -> Path:
    """A new private folder `prefix*` in `root` (the temporary directory by default), marked
    as this process's, after removing (once a process) the folders of that prefix that
    killed runs left."""
    if (str(root), prefix) not in _swept:
        _swept.add((str(root), prefix))
        sweep(prefix, root)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (folder / OWNER_FILE).write_text(owner_stamp())
    return folder
