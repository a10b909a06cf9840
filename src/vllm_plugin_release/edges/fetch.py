"""Fetch stage: sources by sha256 or by git commit, into the content-addressed cache.

- An sdist is found through the index's simple API (PEP 691 JSON, PEP 503 HTML as a
  fallback), streamed to a temporary file while hashing, and only renamed into
  `.vpr/cas/` when its sha256 equals the pin. A mismatch or an interrupted
  download leaves nothing behind.
- Archives are extracted with tarfile's `data` filter (no absolute paths, no `..`,
  no links that escape, no device files) into `.vpr/src/<sha256>/`.
- A git source is cloned at its tag and HEAD must equal the pinned commit.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import html.parser
import json
import os
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import CHUNK, Cache, write_json
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges import netwait
from vllm_plugin_release.edges.git import git
from vllm_plugin_release.spec.model import GitSource, SdistSource, Spec

USER_AGENT = "vllm-plugin-release (+fetch)"
TIMEOUT = 60


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    upload_time: str | None = None
    yanked: bool = False


class _LinkParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _normalize(project: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", project).lower()


def _open(url: str, accept: str | None = None):
    headers = {"User-Agent": USER_AGENT}
    if accept:
        headers["Accept"] = accept
    request = urllib.request.Request(url, headers=headers)
    # a heartbeat while the index keeps us waiting; NoAnswer once VPR_NET_TIMEOUT has passed
    return netwait.waiting(lambda: urllib.request.urlopen(request, timeout=netwait.timeout()), url)


def index_files(index: str, project: str) -> list[IndexFile]:
    """All files of `project` on a simple-API index (JSON preferred, HTML accepted)."""
    url = f"{index.rstrip('/')}/{_normalize(project)}/"
    try:
        with _open(url, "application/vnd.pypi.simple.v1+json, text/html;q=0.1") as response:
            content_type = response.headers.get("Content-Type", "")
            body = response.read()
            base = response.geturl()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise BadInput(f"{url}: project {project!r} not found on the index (HTTP 404)")
        raise OutsideFailure(f"{url}: package index answered HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        raise OutsideFailure(
            f"{url}: package index unreachable ({getattr(exc, 'reason', exc)})",
            hint="check the network or the [core.source] index URL",
        )
    except netwait.NoAnswer as exc:
        raise OutsideFailure(
            f"package index timed out: {exc}",
            hint="the index accepted the connection but did not answer; retry later, or raise "
            "VPR_NET_TIMEOUT",
        )
    files: list[IndexFile] = []
    if "json" in content_type:
        data = json.loads(body)
        for f in data.get("files", []):
            files.append(
                IndexFile(
                    filename=f["filename"],
                    url=urllib.parse.urljoin(base, f["url"]),
                    sha256=f.get("hashes", {}).get("sha256"),
                    size=f.get("size"),
                    upload_time=f.get("upload-time"),
                    yanked=bool(f.get("yanked")),
                )
            )
        return files
    parser = _LinkParser()
    parser.feed(body.decode("utf-8", "replace"))
    for text, href in parser.links:
        full = urllib.parse.urljoin(base, href)
        frag = urllib.parse.urlparse(full).fragment
        sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
        files.append(IndexFile(filename=text, url=full.split("#")[0], sha256=sha, size=None))
    return files


def download(url: str, expected_sha256: str, dest: Path, tmp_dir: Path, label: str) -> None:
    """Stream `url` to `dest`, verifying sha256; nothing is left behind on failure."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    part = tmp_dir / f"{expected_sha256}.part.{os.getpid()}"
    digest = hashlib.sha256()
    try:
        try:
            with _open(url) as response, part.open("wb") as out:
                total = response.headers.get("Content-Length")
                with progress.bytes_progress(label, int(total) if total else None) as bar:
                    read = functools.partial(response.read, CHUNK)
                    stop = functools.partial(netwait.shut_down, response.fileno())
                    while block := netwait.waiting(read, url, stop):
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
        except netwait.NoAnswer as exc:
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


class Fetcher:
    """The network edge for sources: sdists by sha256, git by commit."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    # -- sdist ---------------------------------------------------------------
    def sdist(self, source: SdistSource, project: str) -> Path:
        """Path of the verified sdist in the cache; downloads it when missing."""
        cached = self.cache.cas_path(source.sha256)
        if cached.exists():
            return cached
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
        return cached

    def sdist_url(self, source: SdistSource) -> str | None:
        """The URL the cached sdist was downloaded from (recorded at download time)."""
        meta = self.cache.cas_path(source.sha256)
        meta = meta.with_name(meta.name + ".json")
        try:
            return json.loads(meta.read_text())["url"]
        except (OSError, ValueError, KeyError):
            return None

    def source_tree(self, source: SdistSource, project: str) -> Path:
        """The verified sdist extracted (once) into `.vpr/src/<sha256>/`; returns its top dir."""
        final = self.cache.src_dir(source.sha256)
        if not final.exists():
            archive = self.sdist(source, project)
            with self.cache.publish_dir(final) as work:
                extract(archive, work)
        return single_top_dir(final)

    # -- git -----------------------------------------------------------------
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
        return fetcher.source_tree(src, spec.core.name)
    return fetcher.git(src)


def clone_at(url: str, tag: str, dest: Path) -> None:
    local = not urllib.parse.urlparse(url).scheme or url.startswith("file://")
    args = ["clone", "--quiet", "--branch", tag, "--single-branch"]
    if not local:
        args += ["--depth", "1"]
    done = git(*args, url, str(dest))
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
        if "not found in upstream" in done.stderr or "Remote branch" in done.stderr:
            raise BadInput(f"{url}: tag {tag!r} not found ({message})", hint="check the tag")
        if local and not Path(url.removeprefix("file://")).exists():
            raise BadInput(f"{url}: no such repository", hint="check the source url")
        raise OutsideFailure(f"{url}: git clone failed: {message}")


def verify_commit(checkout: Path, commit: str, label: str) -> None:
    done = git("rev-parse", "HEAD^{commit}", cwd=checkout)
    head = done.stdout.strip()
    if head != commit:
        raise GateFailed(
            f"{label}: commit mismatch: the spec pins {commit}, the tag resolves to {head}",
            hint="a moved tag is a supply-chain event: check it, then update the pinned commit",
        )


# ---------------------------------------------------------------------------
# Safe extraction.


def _check_member_path(name: str) -> None:
    """Reject absolute paths and '..' outright (the data filter would only strip a '/')."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or name.startswith("\\") or ":" in p.parts[0]:
        raise BadInput(
            f"unsafe archive member {name!r} (absolute path or '..')",
            hint="the archive tries to write outside its folder; do not use it",
        )


def extract(archive: Path, dest: Path) -> None:
    """Extract a tar or zip archive safely into `dest`."""
    name = archive.name
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    _check_member_path(info.filename)
                    if (info.external_attr >> 16) & 0o170000 == 0o120000:
                        raise BadInput(f"{name}: unsafe archive member {info.filename!r} (link)")
                zf.extractall(dest)
            return
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                _check_member_path(member.name)  # same path rules as for zip: no abs, no ..
            try:
                tf.extractall(dest, filter="data")
            except tarfile.FilterError as exc:
                raise BadInput(
                    f"{name}: unsafe archive member rejected: {exc}",
                    hint="the archive tries to write outside its folder or holds a device file; "
                    "do not use it",
                )
    except (tarfile.ReadError, zipfile.BadZipFile, EOFError) as exc:
        raise BadInput(f"{name}: not a readable archive ({exc})")


def single_top_dir(path: Path) -> Path:
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return path
