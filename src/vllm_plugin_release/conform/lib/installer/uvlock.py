"""`uv sync` in an installer: the core as the project's `uv.lock` pins it (pure).

`uv sync [--frozen|--locked] [--project DIR|--directory DIR]` installs exactly what the
project's `uv.lock` records. The lock is an outside input: read at most `MAX_BYTES`,
parsed with tomllib, each entry's shape checked; a file that is too big, not TOML or not
shaped like a uv lock is reported naming the file and line, never raised past the check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

import tomllib

from vllm_plugin_release.conform.lib.plugintree import Unread, read_regular
from vllm_plugin_release.conform.lib.requirements import canonical

MAX_BYTES = 64 * 1024 * 1024
_AT_LINE = re.compile(r"\(at line (\d+)")
_PROJECT_OPTS = ("--project", "--directory")


@dataclass(frozen=True)
class LockedCore:
    """The core package of a uv.lock: its version and where uv takes it from."""

    version: str
    line: int
    source: str  # registry | git | url | path | other
    url: str | None = None
    ref: str | None = None  # git: the rev asked for
    commit: str | None = None  # git: the commit the lock resolved
    sdist_only: bool = False  # registry: no wheel, so uv builds it


class LockError(ValueError):
    """A uv.lock that cannot be read as one: the message names the file and line."""


def sync_project(argv: list[str]) -> tuple[str | None, bool]:
    """(`--project`/`--directory` of a `uv sync` command or None, whether the lock is used
    as written: `--frozen` or `--locked`)."""
    project = None
    for i, word in enumerate(argv):
        for opt in _PROJECT_OPTS:
            if word == opt and i + 1 < len(argv):
                project = argv[i + 1]
            elif word.startswith(opt + "="):
                project = word.split("=", 1)[1]
    return project, any(w in ("--frozen", "--locked") for w in argv)


def is_uv_sync(argv: list[str]) -> bool:
    words = [w for w in argv[1:] if not w.startswith("-")]
    return PurePosixPath(argv[0]).name == "uv" and words[:1] == ["sync"]


def _package_lines(text: str) -> dict[str, int]:
    """Each `[[package]]`'s name -> the line of its `name = "NAME"` (the first one): one
    pass over the lock."""
    found: dict[str, int] = {}
    previous = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if previous == "[[package]]" and line.startswith('name = "') and line.endswith('"'):
            found.setdefault(line[len('name = "') : -1], number)
        previous = line
    return found


def _source(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's source, the git url split into url, rev and resolved commit."""
    source = entry.get("source")
    if not isinstance(source, dict):
        return {"source": "other"}
    if isinstance(source.get("registry"), str):
        wheels = entry.get("wheels")
        return {"source": "registry", "url": source["registry"], "sdist_only": not wheels}
    if isinstance(source.get("git"), str):
        parts = urlsplit(source["git"])
        rev = (parse_qs(parts.query).get("rev") or parse_qs(parts.query).get("tag") or [None])[0]
        base = parts._replace(query="", fragment="").geturl()
        return {"source": "git", "url": base, "ref": rev, "commit": parts.fragment or None}
    if isinstance(source.get("url"), str):
        return {"source": "url", "url": source["url"]}
    for kind in ("path", "directory", "editable", "virtual"):
        if isinstance(source.get(kind), str):
            return {"source": "path", "url": source[kind]}
    return {"source": "other"}


@dataclass(frozen=True)
class Lock:
    """A uv.lock as read: its text (for line numbers) and its `[[package]]` tables."""

    shown: str
    text: str
    packages: tuple[dict[str, Any], ...]
    lines: dict[str, int]  # package name -> the line of its name

    @property
    def names(self) -> set[str]:
        """Every locked package (canonical names)."""
        return {canonical(p["name"]) for p in self.packages}

    def core(self, core: str) -> list[LockedCore]:
        """Every entry named `core`, with its version and source."""
        found: list[LockedCore] = []
        for entry in self.packages:
            if canonical(entry["name"]) != canonical(core):
                continue
            line = self.lines.get(entry["name"], 1)
            version = entry.get("version")
            if not isinstance(version, str) or not version:
                raise LockError(f"{self.shown}:{line}: [[package]] {entry['name']} has no version")
            try:
                source = _source(entry)
            except ValueError as exc:  # urlsplit: "Invalid IPv6 URL", a bad port, ...
                raise LockError(
                    f"{self.shown}:{line}: [[package]] {entry['name']}: its source URL cannot "
                    f"be read ({exc})"
                ) from None
            found.append(LockedCore(version=version, line=line, **source))
        return found


def read_lock(path: Path, shown: str) -> Lock:
    """The uv.lock at `path` (`shown`: its name in messages), checked for size and shape."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except Unread as exc:
        raise LockError(f"{shown}: {exc.reason}") from None
    if len(raw) > MAX_BYTES:
        raise LockError(f"{shown}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not read")
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _AT_LINE.search(str(exc))
        raise LockError(f"{shown}:{m.group(1) if m else 1}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per nested array or table
        raise LockError(f"{shown}: arrays or tables nested too deep to read; not read") from None
    packages = data.get("package")
    if not isinstance(packages, list):
        raise LockError(f"{shown}:1: no [[package]] list; not a uv lock file")
    tables = tuple(p for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str))
    return Lock(shown, text, tables, _package_lines(text))
