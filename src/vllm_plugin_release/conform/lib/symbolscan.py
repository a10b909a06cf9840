"""Scanning a core tree or a built wheel for vendor symbols (the scanner of `isolation`): one
matcher pass per file, hits classified, allowlisted hits downgraded to info."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from vllm_plugin_release.conform.lib.symbols import (
    KINDS,
    AllowEntry,
    Hit,
    Matcher,
    Symbol,
    classify,
    parse_symbols,
)
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.proc import forked_map

if TYPE_CHECKING:
    from pathlib import Path

# A wheel's RECORD lists `path,sha256=<urlsafe base64>,size`: the paths are scanned, the
# hashes are not code (random base64 matches a short symbol on a CamelCase boundary).
_RECORD_FILE = re.compile(r"(?:^|/)[^/]+\.dist-info/RECORD$")
_RECORD_HASH = re.compile(rb"(?<=,)(sha\d{3}=)([A-Za-z0-9_=-]+)(?=,)")


def without_record_hashes(path: str, data: bytes) -> bytes:
    """`data` with the hash values of a `*.dist-info/RECORD` blanked (same length, so
    lines and columns stay); any other file unchanged."""
    if not path.endswith("/RECORD") or not _RECORD_FILE.search(path):  # the cheap test first
        return data
    return _RECORD_HASH.sub(lambda m: m.group(1) + b"=" * len(m.group(2)), data)


# ---------------------------------------------------------------------------
# Reports


class Skipped(NamedTuple):
    path: str
    reason: str  # binary | undecodable | symlink | unreadable | special
    symbols: tuple[str, ...] = ()  # symbols whose spelling occurs in the raw bytes (unverified)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "reason": self.reason}
        if self.symbols:
            out["symbols"] = list(self.symbols)
        return out


@dataclass(eq=False)
class ScanReport:
    """What one scan found."""

    root: str
    source: Literal["tree", "wheel"]
    symbols: tuple[str, ...]
    hits: list[Hit] = field(default_factory=list)
    files_scanned: int = 0
    bytes_scanned: int = 0
    files_with_hits: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    unused_allowlist: list[AllowEntry] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def counts(self) -> dict[str, int]:
        """Hits by kind, allowlisted hits left out (they are counted under `allowed`)."""
        counts = dict.fromkeys(KINDS, 0)
        for hit in self.hits:
            if not hit.allowed:
                counts[hit.kind] += 1
        return counts

    @property
    def allowed(self) -> int:
        return sum(1 for h in self.hits if h.allowed)

    @property
    def skipped_counts(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped))

    @property
    def status(self) -> Literal["pass", "warn", "fail"]:
        severities = {h.severity for h in self.hits}
        if "fail" in severities:
            return "fail"
        return "warn" if "warn" in severities else "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.root,
            "source": self.source,
            "status": self.status,
            "symbols": list(self.symbols),
            "counts": self.counts,
            "allowed": self.allowed,
            "hits": [h.to_json() for h in self.hits],
            "files_scanned": self.files_scanned,
            "bytes_scanned": self.bytes_scanned,
            "files_with_hits": self.files_with_hits,
            "skipped": {
                "counts": self.skipped_counts,
                "files": [s.to_json() for s in self.skipped],
            },
            "unused_allowlist": [a.to_json() for a in self.unused_allowlist],
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------------------
# Scanning


class _Scan:
    """Shared state of one scan (a tree or a wheel), or of one share of its files."""

    def __init__(
        self,
        report: ScanReport,
        matcher: Matcher,
        allowlist: Sequence[AllowEntry],
        *,
        inspect_binary: bool,
    ) -> None:
        self.report = report
        self.matcher = matcher
        self.allowlist = list(allowlist)
        self.used: set[int] = set()
        # Wheels: note the symbols in binary members (compiled extensions); trees: skip
        # images and archives unread, as ripgrep does.
        self.inspect_binary = inspect_binary

    def feed(self, path: str, data: bytes) -> None:
        report = self.report
        data = without_record_hashes(path, data)
        if b"\0" in data:
            names = self._names(data, None) if self.inspect_binary else ()
            report.skipped.append(Skipped(path, "binary", names))
            return
        found = self.matcher.candidates(data.lower())
        text = ""
        if not data.isascii():
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                report.skipped.append(Skipped(path, "undecodable", self._names(data, found)))
                return
        report.files_scanned += 1
        report.bytes_scanned += len(data)
        if not found:
            return
        spans = self.matcher.verify(data, found)
        if not spans:
            return
        report.files_with_hits += 1
        for hit in classify(path, data, text or data.decode("ascii"), spans, self.matcher.symbols):
            report.hits.append(self._allow(hit))

    def _names(self, data: bytes, found: list[tuple[int, int, int]] | None) -> tuple[str, ...]:
        if found is None:
            found = self.matcher.candidates(data.lower())
        spans = self.matcher.verify(data, found) if found else []
        return tuple(sorted({self.matcher.symbols[i].name for i, _, _ in spans}))

    def _allow(self, hit: Hit) -> Hit:
        symbol = next(s for s in self.matcher.symbols if s.name == hit.symbol)
        for i, entry in enumerate(self.allowlist):
            if entry.matches(hit.path, symbol):
                self.used.add(i)
                return dataclasses.replace(hit, allowed=True, reason=entry.reason)
        return hit

    def share(self) -> _Scan:
        """An empty scan with this one's matcher and allowlist, for one share of the files."""
        report = self.report
        return _Scan(
            ScanReport(report.root, report.source, report.symbols),
            self.matcher,
            self.allowlist,
            inspect_binary=self.inspect_binary,
        )

    def merge(self, part: tuple[ScanReport, set[int]]) -> None:
        done, used = part
        report = self.report
        report.hits.extend(done.hits)
        report.skipped.extend(done.skipped)
        report.files_scanned += done.files_scanned
        report.bytes_scanned += done.bytes_scanned
        report.files_with_hits += done.files_with_hits
        self.used |= used

    def run(self, items: list[Any], workers: int, feed: Callable[[_Scan, Any], None]) -> None:
        """`feed` each share of `items` into an empty scan (forked when `workers` > 1),
        merged into this one."""

        def read_share(share: list[Any]) -> tuple[ScanReport, set[int]]:
            part = self.share()
            feed(part, share)
            return part.report, part.used

        for part in forked_map(read_share, _shares(items, workers)):
            self.merge(part)

    def finish(self, started: float) -> ScanReport:
        report = self.report
        report.hits.sort(key=lambda h: (h.path, h.line, h.column, h.symbol))
        report.skipped.sort(key=lambda s: s.path)
        report.unused_allowlist = [e for i, e in enumerate(self.allowlist) if i not in self.used]
        report.seconds = time.perf_counter() - started
        return report


def _new_scan(
    root: str,
    source: Literal["tree", "wheel"],
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]],
) -> _Scan:
    """A scan of a tree or a wheel; a wheel's binary members are searched for symbols too."""
    try:
        syms = parse_symbols([s.name if isinstance(s, Symbol) else s for s in symbols])
    except ValueError as exc:
        raise BadInput(f"bad symbol: {exc}") from None
    return _Scan(
        ScanReport(str(root), source, tuple(s.name for s in syms)),
        Matcher(syms),
        [
            e if isinstance(e, AllowEntry) else AllowEntry(*(str(e[k]) for k in AllowEntry._fields))
            for e in allowlist
        ],
        inspect_binary=source == "wheel",
    )


def _path_text(path: Path | str) -> str:
    """`path` as text, as `str(Path(path))` spells it (the report's root)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise BadInput(f"{text!r}: not a path name", hint="pass the path as text")
    if not text:
        return "."
    # Path's spelling: no trailing slash, no repeated or `.` parts
    lead = "//" if text.startswith("//") and not text.startswith("///") else ""
    parts = [p for p in text.split("/") if p and p != "."]
    body = "/".join(parts)
    if text.startswith("/"):
        return (lead or "/") + body
    return body or "."


def _walk(root: str) -> Iterator[tuple[str, str, str | None]]:
    """(absolute path, relative posix path, skip reason) for every file under root."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        directory = os.path.join(root, rel_dir) if rel_dir else root
        try:
            entries = list(os.scandir(directory))
        except OSError:
            yield directory, rel_dir or ".", "unreadable"
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    yield entry.path, rel, "symlink"
                elif entry.is_dir():
                    if entry.name != ".git":
                        stack.append(rel)
                elif entry.is_file():
                    yield entry.path, rel, None
                else:
                    yield entry.path, rel, "special"
            except OSError:
                yield entry.path, rel, "unreadable"


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


# A file is read this far first; one with a NUL byte in it is binary, skipped unread (as
# ripgrep does), so the rest of it is not read.
_HEAD = 1 << 16


def _read(path: str) -> bytes:
    """The file's bytes, or only its first _HEAD bytes when they hold a NUL byte (a binary
    file: `feed` skips it on the same NUL whatever follows)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, min(size, _HEAD) + 1)
        if len(data) > _HEAD and b"\0" in data:
            return data
        parts = [data]
        if len(data) > _HEAD:  # a big text file: the rest of it
            parts.append(os.read(fd, size - len(data) + 1))
        # a short read or a file that grew: read to the end
        while sum(map(len, parts)) != size and (chunk := os.read(fd, 1 << 20)):
            parts.append(chunk)
        return b"".join(parts) if len(parts) > 1 else data
    finally:
        os.close(fd)


def scan_tree(
    root: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """Search every file under `root` (a core source tree) for the vendor symbols, shared
    out over `workers` forked processes when above 1 (the report the same)."""
    started = time.perf_counter()
    root_path = _path_text(root)
    if not os.path.exists(root_path):
        raise BadInput(
            f"{root_path}: core tree not found",
            hint="pass the extracted vLLM source tree (or a built wheel)",
        )
    if not os.path.isdir(root_path):
        raise BadInput(f"{root_path}: not a directory", hint="pass the extracted vLLM source tree")
    scan = _new_scan(root_path, "tree", symbols, allowlist)
    files = []
    for path, rel, reason in _walk(root_path):
        if reason:
            scan.report.skipped.append(Skipped(rel, reason))
        else:
            files.append((path, rel))

    def feed(part: _Scan, share: list[tuple[str, str]]) -> None:
        for path, rel in share:
            try:
                data = _read(path)
            except OSError:
                part.report.skipped.append(Skipped(rel, "unreadable"))
                continue
            part.feed(rel, data)

    scan.run(files, workers, feed)
    return scan.finish(started)


# A share is worth a fork from this many files (below it, the fork and its pickled answer
# cost more than the share's work).
FILES_PER_FORK = 128


def _shares(items: list[Any], workers: int) -> list[list[Any]]:
    """`items` dealt round-robin into at most `workers` shares of FILES_PER_FORK or more;
    the merged report is sorted, so the split never shows in it."""
    n = max(1, min(workers, len(items) // FILES_PER_FORK))
    return [items[i::n] for i in range(n)]


def scan_wheel(
    path: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """Search every member of a built wheel, read from the zip; `workers` as in `scan_tree`."""
    started = time.perf_counter()
    wheel = _path_text(path)
    if not os.path.isfile(wheel):
        raise BadInput(f"{wheel}: wheel not found", hint="pass the built core wheel (.whl)")
    scan = _new_scan(wheel, "wheel", symbols, allowlist)
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = []
            for index, member in enumerate(zf.infolist()):
                if member.is_dir():
                    continue
                if stat.S_ISLNK(member.external_attr >> 16):
                    scan.report.skipped.append(Skipped(member.filename, "symlink"))
                else:
                    members.append(index)
    except zipfile.BadZipFile as exc:
        raise BadInput(
            f"{wheel}: not a wheel (zip) file: {exc}", hint="pass a built .whl"
        ) from None

    def feed(part: _Scan, share: list[int]) -> None:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            for index in share:
                member = infos[index]
                try:
                    data = zf.read(member)
                except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as exc:
                    raise BadInput(
                        f"{wheel}: member {member.filename} cannot be read: {exc}",
                        hint="rebuild the wheel; it is damaged",
                    ) from None
                part.feed(member.filename, data)

    scan.run(members, workers, feed)
    return scan.finish(started)


def scan_path(
    path: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """A directory -> scan_tree; a wheel or zip file -> scan_wheel."""
    p = _path_text(path)
    if os.path.isdir(p):
        return scan_tree(p, symbols, allowlist, workers=workers)
    if os.path.isfile(p):
        if zipfile.is_zipfile(p):
            return scan_wheel(p, symbols, allowlist, workers=workers)
        raise BadInput(
            f"{p}: neither a directory nor a wheel",
            hint="pass the extracted core source tree or a built .whl (extract an sdist first)",
        )
    raise BadInput(
        f"{p}: no such file or directory",
        hint="pass the extracted core source tree or a built .whl",
    )
