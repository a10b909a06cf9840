"""The plugin's docs as text: the files a list of globs names (`doc_files`) and their
text (`doc_texts`), read through the plugin tree's reader (`plugintree.py`) within bounds.

Used by the `hardware_docs` check (what the docs say about parallelism, the mesh and
device nodes) and the `workload` check (the models the docs show). Each file is read at
most `MAX_BYTES`, at most `MAX_FILES` files and `MAX_TOTAL_BYTES` in all (the files left
are named to the caller, not read).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from vllm_plugin_release.conform.lib.plugintree import Unread, read_regular, within
from vllm_plugin_release.core.cache import walk

MAX_FILES = 400


MAX_BYTES = 512 * 1024


MAX_TOTAL_BYTES = 4 * 1024 * 1024  # read in all; then the rest is named, not read


MARKDOWN = {".md", ".markdown", ".rst", ".txt", ""}


CODE = {".sh", ".bash", ".py", ".yaml", ".yml", ".toml", ".dockerfile"}


def doc_files(root: Path, patterns: list[str]) -> list[Path]:
    """The plugin's files that `patterns` (globs relative to `root`, `**` for any folders)
    name, sorted: text files only, nothing hidden, nothing that resolves outside `root`,
    at most MAX_FILES. One walk of the tree, entering only folders a pattern can reach,
    without recursion and without following a link to a folder (a tree 1,100 folders
    deep is walked like any other)."""
    globs = [
        _Glob(p)
        for p in patterns
        if not p.startswith("/") and ".." not in Path(p).parts  # the schema refuses these
    ]
    reach: dict[str, list[frozenset[int]]] = {"": [g.start for g in globs]}  # per folder

    def enter(rel: str) -> bool:
        parent, _, name = rel.rpartition("/")
        here = [g.step(states, name) for g, states in zip(globs, reach[parent])]
        reach[rel] = here
        return not name.startswith(".") and any(g.open(st) for g, st in zip(globs, here))

    found: list[Path] = []
    for rel, entry in walk(root, enter=enter, errors="skip"):
        parent, _, name = rel.rpartition("/")
        if name.startswith(".") or entry.is_dir() or parent not in reach:
            continue
        path = Path(entry.path)
        if path.suffix.lower() not in MARKDOWN | CODE and name != "Dockerfile":
            continue
        matched = any(g.done(g.step(st, name)) for g, st in zip(globs, reach[parent]))
        if matched and within(root, path) is not None:  # not a link out of the checkout
            found.append(path)
    return sorted(found)[:MAX_FILES]


class _Glob:
    """A glob's segments as a small automaton over path parts (`**`: any folders, as in
    pathlib's glob; a trailing `**` names the files under the folder)."""

    def __init__(self, pattern: str) -> None:
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        self.parts = [*parts, "*"] if parts and parts[-1] == "**" else parts
        self.start = self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        todo, out = list(states), set(states)
        while todo:
            i = todo.pop()
            if i < len(self.parts) and self.parts[i] == "**" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return frozenset(out)

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        nxt: set[int] = set()
        for i in states:
            if i < len(self.parts) and self.parts[i] == "**":
                nxt.add(i)  # ** takes this folder too
            elif i < len(self.parts) and fnmatch.fnmatchcase(name, self.parts[i]):
                nxt.add(i + 1)
        return self._closure(nxt)

    def open(self, states: frozenset[int]) -> bool:
        """Something under a folder in these states can still match."""
        return any(i < len(self.parts) for i in states)

    def done(self, states: frozenset[int]) -> bool:
        return len(self.parts) in states


def doc_texts(
    root: Path, patterns: list[str], left: list[str] | None = None
) -> list[tuple[str, str]]:
    """(path relative to `root`, text) of the docs `patterns` name: `doc_files`, each read
    at most MAX_BYTES through the plugin tree's reader, binary files left out, until
    MAX_TOTAL_BYTES are read; the files after that go to `left` (named, not read)."""
    out: list[tuple[str, str]] = []
    files = doc_files(root, patterns)
    total = 0
    for index, path in enumerate(files):
        if total >= MAX_TOTAL_BYTES:
            if left is not None:
                left.extend(p.relative_to(root).as_posix() for p in files[index:])
            break
        try:
            raw = read_regular(path, MAX_BYTES)[:MAX_BYTES]
        except Unread:
            continue
        if b"\0" in raw:
            continue  # binary
        total += len(raw)
        out.append((path.relative_to(root).as_posix(), raw.decode("utf-8", errors="replace")))
    return out
