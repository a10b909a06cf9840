"""What uv downloads while it installs, said as it happens (torch for a Python without a
CPU build on the machine's find-links is about 3 GB with its nvidia-* wheels).

uv writes `Downloading NAME (SIZE)` when it starts fetching a file its cache lacks and
` Downloaded NAME` when it has it; nothing when the cache holds it. `watching(log)` reads
those lines from the install's log while it runs (from the offset the install started
at) and says once what is being downloaded and how large it is, then the progress every
`VPR_HEARTBEAT` seconds, then the total. A second install of the same files downloads
nothing and says nothing here.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vllm_plugin_release.core import progress

START = re.compile(r"^Downloading (\S+) \((\d+(?:\.\d+)?)(KiB|MiB|GiB|B)\)\s*$", re.M)
DONE = re.compile(r"^ Downloaded (\S+)\s*$", re.M)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
POLL_SECONDS = 1.0
READ_LIMIT = 4 << 20  # a log is ours, but bound the read anyway


@dataclass
class Downloads:
    """The downloads an install's log shows so far."""

    sizes: dict[str, int] = field(default_factory=dict)  # name -> bytes
    done: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    @property
    def finished(self) -> int:
        return sum(self.sizes.get(name, 0) for name in self.done)


def parse(text: str) -> Downloads:
    """The downloads in uv's output `text` (pure)."""
    found = Downloads()
    for m in START.finditer(text):
        found.sizes[m.group(1)] = int(float(m.group(2)) * UNITS[m.group(3)])
    found.done = {m.group(1) for m in DONE.finditer(text)} & set(found.sizes)
    return found


def size_text(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def announce(what: str, seen: Downloads) -> str:
    """The line said once uv starts downloading: how much, and the largest files."""
    largest = sorted(seen.sizes.items(), key=lambda kv: -kv[1])[:4]
    names = ", ".join(f"{name} {size_text(size)}" for name, size in largest)
    more = len(seen.sizes) - len(largest)
    return (
        f"{what}: downloading {size_text(seen.total)} in {len(seen.sizes)} files into uv's "
        f"cache (once per machine): {names}" + (f" and {more} more" if more > 0 else "")
    )


def _read(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as fh:
            fh.seek(offset)
            return fh.read(READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


@contextlib.contextmanager
def watching(what: str, log: Path, offset: int | None = None) -> Iterator[None]:
    """Say what uv downloads while the block (an install writing to `log` from `offset`,
    default its size now) runs."""
    if offset is None:
        offset = log.stat().st_size if log.exists() else 0
    said = {"announced": 0, "reported": 0.0}

    def report(final: bool) -> None:
        seen = parse(_read(log, offset))
        if not seen.sizes:
            return
        if len(seen.sizes) > said["announced"] and not final:
            said["announced"] = len(seen.sizes)
            progress.info(announce(what, seen))
            return
        if final:
            progress.info(
                f"{what}: downloaded {size_text(seen.finished)} in {len(seen.done)} of "
                f"{len(seen.sizes)} files"
            )
            return
        said["reported"] += POLL_SECONDS
        if said["reported"] >= progress.heartbeat_seconds():
            said["reported"] = 0.0
            progress.info(
                f"{what}: {len(seen.done)} of {len(seen.sizes)} files downloaded "
                f"({size_text(seen.finished)} of {size_text(seen.total)})"
            )

    try:
        with progress.every(POLL_SECONDS, lambda: report(final=False), "vpr-uv-downloads"):
            yield
    finally:
        report(final=True)
