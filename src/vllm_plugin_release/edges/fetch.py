"""Fetch stage: sources by sha256 or by git commit into the content-addressed cache; an
sdist streamed and hashed before it is kept, archives extracted only when every member
and link stays inside, a git source checked out at its pinned commit."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import (
    CHUNK,
    Cache,
    remove_tree,
    tree_intact,
    verified_file,
    write_json,
    write_tree_manifest,
)
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from vllm_plugin_release.edges.index import IndexFile

# The network and git halves (urllib, the index client, subprocess) are imported where
# they are used: a run that finds its sources cached and verified never loads them.

USER_AGENT = "vllm-plugin-release (+fetch)"


def _normalize(project: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", project).lower()


def _open(url: str):
    import urllib.request

    from vllm_plugin_release.edges import httpio

    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    # a heartbeat while the index keeps us waiting; NoAnswer once VPR_NET_TIMEOUT has passed
    return httpio.waiting(lambda: urllib.request.urlopen(request, timeout=httpio.timeout()), url)


def index_files(index: str, project: str) -> list[IndexFile]:
    """All files of `project` on a simple-API index, with the index client's retries and rate-limit
    waits ($VPR_INDEX_*); an index that never answered is not retried."""
    from vllm_plugin_release.edges import index as ix

    url = f"{index.rstrip('/')}/{_normalize(project)}/"
    attempts, backoff = ix.retry_policy("VPR_INDEX")
    try:
        files = ix.retrying(
            lambda: ix.project_files(index, project, credentials=False),
            attempts=attempts,
            backoff=backoff,
            retry_waited=False,
            rate_budget=settings.number("VPR_INDEX_RETRY_BUDGET"),
        )
    except ix.RateLimited as exc:
        raise OutsideFailure(
            f"{url}: the package index still rate-limits (HTTP {exc.rate_limited}) after "
            f"{exc.backed_off:.0f} s of backing off",
            hint="retry later, or raise VPR_INDEX_RETRY_BUDGET (seconds)",
        )
    except ix.Transient as exc:
        if exc.waited:
            raise OutsideFailure(
                f"package index timed out: {exc}",
                hint="the index accepted the connection but did not answer; retry later, or "
                "raise VPR_NET_TIMEOUT",
            )
        raise OutsideFailure(
            f"{url}: package index unreachable ({exc}; {attempts} attempts)",
            hint="check the network or the [core.source] index URL",
        )
    if files is None:
        raise BadInput(f"{url}: project {project!r} not found on the index (HTTP 404)")
    return files


def download(url: str, expected_sha256: str, dest: Path, tmp_dir: Path, label: str) -> None:
    """Stream `url` to `dest`, verifying sha256; nothing is left behind on failure."""
    import urllib.error

    from vllm_plugin_release.edges import httpio

    tmp_dir.mkdir(parents=True, exist_ok=True)
    part = tmp_dir / f"{expected_sha256}.part.{os.getpid()}"
    digest = hashlib.sha256()
    try:
        try:
            with _open(url) as response, part.open("wb") as out:
                total = response.headers.get("Content-Length")
                with progress.BytesProgress(label, int(total) if total else None) as bar:
                    read = functools.partial(response.read, CHUNK)
                    stop = functools.partial(httpio.shut_down, response.fileno())
                    while block := httpio.waiting(read, url, stop):
                        out.write(block)
                        digest.update(block)
                        bar.advance(len(block))
                if total is not None and out.tell() != int(total):
                    raise OutsideFailure(
                        f"{url}: download interrupted ({out.tell()} of {total} bytes)"
                    )
                out.flush()
                os.fsync(out.fileno())
        except urllib.error.HTTPError as exc:
            raise OutsideFailure(f"{url}: HTTP {exc.code} while downloading")
        except httpio.NoAnswer as exc:
            raise OutsideFailure(
                f"download timed out: {exc}", hint="retry; nothing was kept in the cache"
            )
        except (urllib.error.URLError, OSError) as exc:
            raise OutsideFailure(
                f"{url}: download failed ({getattr(exc, 'reason', exc)})",
                hint="retry; nothing was kept in the cache",
            )
        got = digest.hexdigest()
        if got != expected_sha256:
            raise GateFailed(
                f"{label}: sha256 mismatch: the spec pins {expected_sha256}, the index served "
                f"{got}; the file was discarded",
                hint="check [core.source] sha256 against the index; never copy a hash from an "
                "unverified download",
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()


def parse_sdist_url(data: Any) -> str | None:
    """The URL a cached sdist's note (`<sha256>.json` beside it, written when it was
    downloaded) records; None when it records none as text."""
    url = data.get("url") if isinstance(data, dict) else None
    return url if isinstance(url, str) else None


class Fetcher:
    """The network edge for sources: sdists by sha256, git by commit."""

    def __init__(self, cache: Cache, limits: ArchiveLimits | None = None) -> None:
        self.cache = cache
        self.limits = limits

    def sdist(self, source: SdistSource, project: str) -> Path:
        """Path of the verified sdist in the cache; downloads it when missing."""
        cached = self.cache.cas_path(source.sha256)
        with self.cache.lock(cached):  # one download per file, however many runs ask
            if cached.exists() and not verified_file(cached, source.sha256):
                progress.warn(f"{cached}: cached file fails its sha256; downloading it again")
                cached.unlink()
            if not cached.exists():
                self._download_sdist(source, project, cached)
                verified_file(cached, source.sha256)  # the marker for the next run
        return cached

    def _download_sdist(self, source: SdistSource, project: str, cached: Path) -> None:
        files = {f.filename: f for f in index_files(source.index, project)}
        entry = files.get(source.filename)
        if entry is None:
            raise BadInput(
                f"{source.index}/{_normalize(project)}/: no file named {source.filename!r}",
                hint="check [core] version and [core.source] filename",
            )
        if entry.sha256 and entry.sha256 != source.sha256:
            raise GateFailed(
                f"{source.filename}: sha256 mismatch: the spec pins {source.sha256}, the index "
                f"lists {entry.sha256}; nothing was downloaded",
                hint="check [core.source] sha256",
            )
        download(entry.url, source.sha256, cached, self.cache.tmp, source.filename)
        write_json(
            cached.with_name(cached.name + ".json"), {"filename": entry.filename, "url": entry.url}
        )

    def sdist_url(self, source: SdistSource) -> str | None:
        """The URL the cached sdist was downloaded from (recorded at download time)."""
        meta = self.cache.cas_path(source.sha256)
        meta = meta.with_name(meta.name + ".json")
        return records.read_object(meta, parse_sdist_url)  # bounded; absent or tampered: None

    def source_tree(
        self, source: SdistSource, project: str, limits: ArchiveLimits | None = None
    ) -> Path:
        """The verified sdist extracted (once) into `.vpr/src/<sha256>/`; returns its top dir."""
        final = self.cache.src_dir(source.sha256)
        with self.cache.lock(final):  # one extraction, however many runs ask
            if final.exists() and not tree_intact(final):
                progress.warn(f"{final}: extracted tree differs from its manifest; re-extracting")
                remove_tree(final)
            if not final.exists():
                archive = self.sdist(source, project)
                with self.cache.publish_dir(final) as work:
                    extract(archive, work, limits or self.limits, source.filename)
                    write_tree_manifest(work)
        return single_top_dir(final)

    def git(self, source: GitSource) -> Path:
        """A checkout of `source.tag`, verified to be `source.commit`."""
        final = self.cache.git_dir(source.commit)
        if final.exists():
            return final
        with self.cache.publish_dir(final) as work:
            checkout = work / "checkout"
            clone_at(source.url, source.tag, checkout)
            verify_commit(checkout, source.commit, f"{source.url}@{source.tag}")
            for entry in checkout.iterdir():
                shutil.move(str(entry), work / entry.name)
            checkout.rmdir()
        return final


def source_tree(spec: Spec, fetcher: Fetcher) -> Path:
    """The verified core source tree of `spec` (sdist by sha256 or git by commit)."""
    src = spec.core.source
    if isinstance(src, SdistSource):
        return fetcher.source_tree(src, spec.core.name, ArchiveLimits.of(spec.fetch))
    return fetcher.git(src)


def cached_source_tree(spec: Spec, cache: Cache) -> Path | None:
    """The verified core source tree when it is already in the cache, else None; nothing is fetched,
    extracted or written."""
    src = spec.core.source
    if isinstance(src, SdistSource):
        final = cache.src_dir(src.sha256)
        return single_top_dir(final) if final.is_dir() else None
    final = cache.git_dir(src.commit)
    return final if final.is_dir() else None


def clone_at(url: str, tag: str, dest: Path) -> None:
    from vllm_plugin_release.edges.git import git, is_local, refuse_option

    refuse_option(url, "[core.source] url")
    refuse_option(tag, "[core.source] tag")
    local = is_local(url)
    args = ["clone", "--quiet", f"--branch={tag}", "--single-branch"]
    if not local:
        args += ["--depth", "1"]
    done = git(*args, "--", url, str(dest))
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
        if "not found in upstream" in done.stderr or "Remote branch" in done.stderr:
            raise BadInput(f"{url}: tag {tag!r} not found ({message})", hint="check the tag")
        if local and not Path(url.removeprefix("file://")).exists():
            raise BadInput(f"{url}: no such repository", hint="check the source url")
        raise OutsideFailure(f"{url}: git clone failed: {message}")


def verify_commit(checkout: Path, commit: str, label: str) -> None:
    from vllm_plugin_release.edges.git import git

    done = git("rev-parse", "HEAD^{commit}", cwd=checkout)
    head = done.stdout.strip()
    if head != commit:
        raise GateFailed(
            f"{label}: commit mismatch: the spec pins {commit}, the tag resolves to {head}",
            hint="a moved tag is a supply-chain event: check it, then update the pinned commit",
        )


# Every member and link target is resolved lexically inside the destination, following the
# archive's own symlinks (never the disk), before anything is written; a second wall checks
# each member as it is extracted. tarfile's `data` filter is not used: it calls realpath on
# every member (cubic in a tree's depth), and older Pythons have holes in it (CVE-2025-4517).

_MAX_LINK_HOPS = 40  # as the kernel's ELOOP limit
_LINK = ""  # the key of a trie node that is a symlink member (a path part is never "")


@dataclass(frozen=True)
class ArchiveLimits:
    """`[fetch]` limits; defaults leave headroom over the vLLM sdist (~6,000 files, ~30 MB)."""

    max_members: int = 100_000
    max_total_bytes: int = 2 * 1024**3
    max_file_bytes: int = 512 * 1024**2

    @classmethod
    def of(cls, table: Mapping[str, int] | None) -> ArchiveLimits:
        """The limits a spec's `[fetch]` table sets (its schema: positive integers)."""
        table = table or {}
        return cls(**{k: int(table[k]) for k in cls.__dataclass_fields__ if k in table})


class _Unsafe(Exception):
    """A member the extraction refuses; `extract` turns it into BadInput naming the archive."""


class _Budget:
    """Counts members and bytes against the limits (from headers, then while writing)."""

    def __init__(self, archive: str, limits: ArchiveLimits) -> None:
        self.archive, self.limits = archive, limits
        self.members = self.total = 0

    def _over(self, what: str, limit: int, key: str, member: str | None = None) -> BadInput:
        where = f" at member {member!r}" if member else ""
        return BadInput(
            f"{self.archive}: archive exceeds the limit of {limit} {what}{where}; "
            "extraction stopped and nothing was kept",
            hint=f"if the archive is trusted, raise [fetch] {key} in the spec",
        )

    def member(self, name: str, size: int) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise self._over("members", self.limits.max_members, "max_members")
        self.add(name, size, size)

    def add(self, name: str, file_bytes: int, more: int) -> None:
        """`file_bytes`: the member's size so far; `more`: bytes to add to the total."""
        if file_bytes > self.limits.max_file_bytes:
            raise self._over(
                "bytes in one file", self.limits.max_file_bytes, "max_file_bytes", name
            )
        self.total += more
        if self.total > self.limits.max_total_bytes:
            raise self._over("bytes in total", self.limits.max_total_bytes, "max_total_bytes", name)


def _check_member_path(name: str) -> None:
    """Reject absolute paths and '..' outright (the data filter would only strip a '/')."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or name.startswith("\\") or ":" in p.parts[0]:
        raise BadInput(
            f"unsafe archive member {name!r} (absolute path or '..')",
            hint="the archive tries to write outside its folder; do not use it",
        )


def _parts(name: str) -> tuple[str, ...]:
    return tuple(p for p in name.split("/") if p not in ("", "."))


class _Links:
    """The archive's symlink members as a trie of path parts: whether a path passes through one,
    and where a link target leads, in steps linear in the path's length."""

    def __init__(self) -> None:
        self.root: dict[str, Any] = {}

    def add(self, parts: tuple[str, ...], target: str) -> None:
        node = self.root
        for part in parts:
            node = node.setdefault(part, {})
        node[_LINK] = target

    def through(self, parts: tuple[str, ...], is_link: bool) -> bool:
        """`parts` passes through a symlink member, or replaces one (unless it is it)."""
        node: dict[str, Any] | None = self.root
        for i, part in enumerate(parts):
            node = node.get(part) if node is not None else None
            if node is None:
                return False
            if _LINK in node and (i < len(parts) - 1 or not is_link):
                return True
        return False

    def resolve(self, start: tuple[str, ...], target: str) -> None:
        """`target` walked from folder `start`, the archive's symlinks expanded lexically (no
        disk); _Unsafe when it leaves the destination, loops or is absolute."""
        stack: list[dict[str, Any] | None] = []  # the trie node of each part walked
        node: dict[str, Any] | None = self.root
        for part in start:
            node = node.get(part) if node is not None else None
            stack.append(node)
        todo, hops = target.split("/")[::-1], 0  # reversed: the next part is last
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    raise _Unsafe(f"link target {target!r} resolves outside the destination")
                stack.pop()
                continue
            parent = stack[-1] if stack else self.root
            node = parent.get(part) if parent is not None else None
            link = node.get(_LINK) if node is not None else None
            if link is None:
                stack.append(node)
                continue
            hops += 1
            if hops > _MAX_LINK_HOPS or link.startswith("/"):
                raise _Unsafe(f"link target {target!r} loops or is absolute")
            todo.extend(link.split("/")[::-1])


def _check_tar_members(members: list[tarfile.TarInfo]) -> None:
    """Refuse devices, absolute or escaping links, and paths through a symlink member."""
    links = _Links()
    seen: set[tuple[str, ...]] = set()
    for m in members:
        parts = _parts(m.name)
        if m.issym():
            if m.linkname.startswith("/") or m.linkname.startswith("\\"):
                raise _Unsafe(f"{m.name!r}: absolute symlink target {m.linkname!r}")
            if not parts or parts in seen:  # links are judged in their final state only
                raise _Unsafe(f"{m.name!r}: symlink replaces an earlier member")
            links.add(parts, m.linkname)
        seen.add(parts)
    for m in members:
        parts = _parts(m.name)
        if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
            raise _Unsafe(f"{m.name!r}: device, fifo or other special file")
        if links.through(parts, m.issym()):
            raise _Unsafe(f"{m.name!r}: path passes through or replaces a symlink member")
        try:
            if m.issym():
                links.resolve(parts[:-1], m.linkname)
            elif m.islnk():
                if m.linkname.startswith("/"):
                    raise _Unsafe(f"absolute hard link target {m.linkname!r}")
                links.resolve((), m.linkname)
        except _Unsafe as exc:
            raise _Unsafe(f"{m.name!r}: {exc}")


def _second_wall(member: tarfile.TarInfo, _dest: str) -> tarfile.TarInfo:
    """Each member again as it is extracted: no absolute or '..' name, no absolute link, no special
    file; modes and owners as tarfile's `data` filter sets them."""
    _check_member_path(member.name)
    if member.issym() or member.islnk():
        if member.linkname.startswith(("/", "\\")):
            raise _Unsafe(f"{member.name!r}: absolute link target {member.linkname!r}")
    elif not (member.isreg() or member.isdir()):
        raise _Unsafe(f"{member.name!r}: device, fifo or other special file")
    mode: int | None = member.mode & 0o755
    if member.isreg() or member.islnk():
        if not mode & 0o100:
            mode &= ~0o111
        mode |= 0o600
    else:
        mode = None
    return member.replace(mode=mode, uid=None, gid=None, uname=None, gname=None, deep=False)


def _open_tar(archive: Path | BinaryIO) -> tarfile.TarFile:
    if isinstance(archive, Path):
        return tarfile.open(archive)
    return tarfile.open(fileobj=archive)


def _extract_tar(archive: Path | BinaryIO, dest: Path, budget: _Budget) -> None:
    with _open_tar(archive) as tf:
        members: list[tarfile.TarInfo] = []
        for member in tf:  # headers only: stops at the first limit exceeded
            _check_member_path(member.name)  # same path rules as for zip: no abs, no ..
            budget.member(member.name, member.size if member.isreg() else 0)
            members.append(member)
        _check_tar_members(members)
        # tarfile copies exactly `size` bytes per member (short data is an error), so the
        # header sizes counted above are the bytes written.
        tf.extractall(dest, members=members, filter=_second_wall)


def _extract_zip(archive: Path | BinaryIO, dest: Path, budget: _Budget) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            _check_member_path(info.filename)
            kind = (info.external_attr >> 16) & 0o170000
            if kind == 0o120000:
                raise _Unsafe(f"{info.filename!r} (link)")
            if kind not in (0, 0o100000, 0o040000):
                raise _Unsafe(f"{info.filename!r}: device, fifo or other special file")
            budget.member(info.filename, info.file_size)
        written = _Budget(budget.archive, budget.limits)  # counts what is really written
        for info in infos:
            target = dest.joinpath(*_parts(info.filename))
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            size = 0
            with zf.open(info) as src, target.open("wb") as out:
                while block := src.read(CHUNK):
                    size += len(block)
                    written.add(info.filename, size, len(block))
                    out.write(block)


def extract(
    archive: Path | BinaryIO,
    dest: Path,
    limits: ArchiveLimits | None = None,
    label: str | None = None,
) -> None:
    """Extract a tar or zip archive (a file, or a seekable binary stream) safely into `dest`, a
    scratch folder the caller discards on error; messages name it `label`."""
    name = label or (archive.name if isinstance(archive, Path) else "archive")
    budget = _Budget(name, limits or ArchiveLimits())
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, dest, budget)
        else:
            if not isinstance(archive, Path):
                archive.seek(0)
            _extract_tar(archive, dest, budget)
    except _Unsafe as exc:
        raise BadInput(
            f"{name}: unsafe archive member {exc}",
            hint="the archive tries to write outside its folder or holds a special file; "
            "do not use it",
        )
    except BadInput as exc:
        if not exc.message.startswith(name):
            raise BadInput(f"{name}: {exc.message}", hint=exc.hint)
        raise
    except (tarfile.ReadError, zipfile.BadZipFile, EOFError) as exc:
        raise BadInput(f"{name}: not a readable archive ({exc})")


def single_top_dir(path: Path) -> Path:
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return path
