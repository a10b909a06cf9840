"""Fetch and extraction against a real HTTP server on loopback and real git repositories."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Index, git, make_sdist
from vllm_plugin_release.buildspec.model import GitSource, SdistSource
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.edges.fetch import Fetcher, extract, index_files


@pytest.fixture
def index() -> Iterator[Index]:
    idx = Index()
    yield idx
    idx.close()


def source(index: Index, name: str, data: bytes) -> SdistSource:
    index.files[name] = data
    return SdistSource(index=index.url, filename=name, sha256=hashlib.sha256(data).hexdigest())


def leftovers(cache: Cache) -> list[Path]:
    return [p for p in cache.root.rglob("*") if p.is_file() and not p.name.endswith(".json")]


def test_download_verify_and_cache(tmp_path: Path, index: Index) -> None:
    data = make_sdist({"PKG-INFO": b"Name: vllm\n", "setup.py": b"print(1)\n"})
    src = source(index, "vllm-0.0.1.tar.gz", data)
    cache = Cache(tmp_path / ".vpr")
    fetcher = Fetcher(cache)
    path = fetcher.sdist(src, "vllm")
    assert path == cache.cas_path(src.sha256)
    assert path.read_bytes() == data
    assert fetcher.sdist_url(src).endswith("/files/vllm-0.0.1.tar.gz")
    tree = fetcher.source_tree(src, "vllm")
    assert (tree / "setup.py").read_text() == "print(1)\n"
    hits = len(index.hits)
    fetcher.source_tree(src, "vllm")  # cached: no request at all
    assert len(index.hits) == hits


def test_html_simple_api_fallback(tmp_path: Path, index: Index) -> None:
    index.html = True
    src = source(index, "vllm-0.0.1.tar.gz", make_sdist({"a": b"1"}))
    assert Fetcher(Cache(tmp_path)).sdist(src, "vllm").exists()
    assert {f.filename for f in index_files(index.url, "vllm")} == {"vllm-0.0.1.tar.gz"}


def test_sha_mismatch_discards_download(tmp_path: Path, index: Index) -> None:
    data = make_sdist({"a": b"1"})
    index.files["vllm-0.0.1.tar.gz"] = data
    index.listed_sha["vllm-0.0.1.tar.gz"] = "0" * 64  # the index does not say: mismatch on bytes
    wrong = SdistSource(index=index.url, filename="vllm-0.0.1.tar.gz", sha256="0" * 64)
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(GateFailed, match="sha256 mismatch"):
        Fetcher(cache).sdist(wrong, "vllm")
    assert not cache.cas_path("0" * 64).exists()
    assert leftovers(cache) == []


def test_index_listing_mismatch_stops_before_download(tmp_path: Path, index: Index) -> None:
    index.files["vllm-0.0.1.tar.gz"] = make_sdist({"a": b"1"})
    wrong = SdistSource(index=index.url, filename="vllm-0.0.1.tar.gz", sha256="1" * 64)
    with pytest.raises(GateFailed, match="nothing was downloaded"):
        Fetcher(Cache(tmp_path)).sdist(wrong, "vllm")
    assert not any(h.startswith("/files/") for h in index.hits)


def test_interrupted_download_leaves_nothing(tmp_path: Path, index: Index) -> None:
    src = source(index, "vllm-0.0.1.tar.gz", make_sdist({"a": os.urandom(200_000)}))
    index.truncate.add("vllm-0.0.1.tar.gz")
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(OutsideFailure):
        Fetcher(cache).sdist(src, "vllm")
    assert leftovers(cache) == []


def test_unreachable_index_is_outside_failure(tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    src = SdistSource(index=f"http://127.0.0.1:{port}/simple", filename="x.tar.gz", sha256="2" * 64)
    with pytest.raises(OutsideFailure, match="unreachable"):
        Fetcher(Cache(tmp_path)).sdist(src, "vllm")


def test_missing_file_on_index_is_bad_input(tmp_path: Path, index: Index) -> None:
    source(index, "vllm-0.0.1.tar.gz", make_sdist({"a": b"1"}))
    other = SdistSource(index=index.url, filename="vllm-9.9.9.tar.gz", sha256="3" * 64)
    with pytest.raises(BadInput, match="no file named"):
        Fetcher(Cache(tmp_path)).sdist(other, "vllm")


# -- malicious archives --------------------------------------------------------------


def evil_tar(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        ok = tarfile.TarInfo("pkg/ok.txt")
        ok.size = 2
        tf.addfile(ok, io.BytesIO(b"ok"))
        if kind == "traversal":
            info = tarfile.TarInfo("pkg/../../evil.txt")
            info.size = 4
            tf.addfile(info, io.BytesIO(b"evil"))
        elif kind == "absolute":
            info = tarfile.TarInfo("/tmp/vpr-evil-absolute.txt")
            info.size = 4
            tf.addfile(info, io.BytesIO(b"evil"))
        elif kind == "symlink":
            info = tarfile.TarInfo("pkg/link")
            info.type = tarfile.SYMTYPE
            info.linkname = "../../../etc/passwd"
            tf.addfile(info)
        elif kind == "device":
            info = tarfile.TarInfo("pkg/dev")
            info.type = tarfile.CHRTYPE
            info.devmajor, info.devminor = 1, 3
            tf.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["traversal", "absolute", "symlink", "device"])
def test_unsafe_archive_is_rejected(tmp_path: Path, index: Index, kind: str) -> None:
    src = source(index, "vllm-0.0.1.tar.gz", evil_tar(kind))
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(BadInput, match="unsafe archive member"):
        Fetcher(cache).source_tree(src, "vllm")
    assert not cache.src_dir(src.sha256).exists()
    assert not (tmp_path / "evil.txt").exists()
    assert not Path("/tmp/vpr-evil-absolute.txt").exists()


def test_safe_archive_extracts(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(evil_tar("none"))
    extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "ok.txt").read_text() == "ok"


# -- git ------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "upstream"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("one\n")
    git("add", ".", cwd=path)
    git("commit", "-q", "-m", "one", cwd=path)
    git("tag", "v1", cwd=path)
    return path, git("rev-parse", "HEAD", cwd=path)


def test_git_clone_at_tag_verified(tmp_path: Path, repo: tuple[Path, str]) -> None:
    path, commit = repo
    cache = Cache(tmp_path / ".vpr")
    checkout = Fetcher(cache).git(GitSource(url=f"file://{path}", tag="v1", commit=commit))
    assert (checkout / "README").read_text() == "one\n"
    assert git("rev-parse", "HEAD", cwd=checkout) == commit


def test_git_moved_tag_is_commit_mismatch(tmp_path: Path, repo: tuple[Path, str]) -> None:
    path, commit = repo
    (path / "README").write_text("two\n")
    git("commit", "-q", "-am", "two", cwd=path)
    git("tag", "-f", "v1", cwd=path)
    cache = Cache(tmp_path / ".vpr")
    with pytest.raises(GateFailed, match="commit mismatch"):
        Fetcher(cache).git(GitSource(url=str(path), tag="v1", commit=commit))
    assert not cache.git_dir(commit).exists()


def test_git_unknown_tag_is_bad_input(tmp_path: Path, repo: tuple[Path, str]) -> None:
    path, commit = repo
    with pytest.raises(BadInput, match="not found"):
        Fetcher(Cache(tmp_path)).git(GitSource(url=str(path), tag="v9", commit=commit))


def test_a_download_that_breaks_is_an_outside_failure_and_leaves_nothing(
    tmp_path: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`download` itself: a file the server does not have (HTTP 404), a server that is
    gone, one that never answers: exit 3 each, no file and no `.part` left; a server that
    sends no Content-Length still delivers the pinned bytes."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.support import serve_in_thread
    from vllm_plugin_release.edges.fetch import download

    monkeypatch.setenv("VPR_NET_TIMEOUT", "1")
    data = b"sdist bytes" * 100
    sha = hashlib.sha256(data).hexdigest()
    dest, tmp = tmp_path / "cas" / "x.tar.gz", tmp_path / "cache" / "tmp"  # made as needed
    base = index.url.removesuffix("/simple")
    with pytest.raises(OutsideFailure, match="HTTP 404"):
        download(f"{base}/files/absent.tar.gz", sha, dest, tmp, "x")
    with socket.socket() as gone:
        gone.bind(("127.0.0.1", 0))
        port = gone.getsockname()[1]
    with pytest.raises(OutsideFailure, match="download failed"):
        download(f"http://127.0.0.1:{port}/x.tar.gz", sha, dest, tmp, "x")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/x.tar.gz"
        with pytest.raises(OutsideFailure, match="timed out"):
            download(url, sha, dest, tmp, "x")
    assert not dest.exists() and list(tmp.iterdir()) == []

    class NoLength(BaseHTTPRequestHandler):  # HTTP/1.0: the body ends when it closes
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoLength)
    thread: threading.Thread = serve_in_thread(server)
    try:
        download(f"http://127.0.0.1:{server.server_address[1]}/x", sha, dest, tmp, "x")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert dest.read_bytes() == data and list(tmp.iterdir()) == []
