"""The one index client (`edges/index.project_files`, one parser in `core/simpleindex`, one
retry loop `retrying`), used by fetch and by publish, against a loopback server that fails
on script: HTTP 503 and 429 are retried, 404 is not, an index that never answers is not
retried by fetch, and fetch never sends the upload credentials."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support import serve_in_thread
from vllm_plugin_release.core import simpleindex
from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges import fetch
from vllm_plugin_release.edges import index as ix

SHA = hashlib.sha256(b"wheel").hexdigest()
FILES = [
    {"filename": "demo-1.0.tar.gz", "url": "/files/demo-1.0.tar.gz", "hashes": {"sha256": SHA}},
    {"filename": "demo-1.1.tar.gz", "url": "../../files/demo-1.1.tar.gz", "hashes": {}},
]


class Script:
    """A project page that first answers with each status of `fail`, then the page."""

    def __init__(self) -> None:
        self.fail: list[int] = []
        self.html = False
        self.requests: list[dict[str, Any]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                script.requests.append({"path": self.path, "headers": dict(self.headers)})
                if self.path != "/simple/demo/":
                    self.send_error(404)
                elif script.fail:
                    self.send_error(script.fail.pop(0))
                else:
                    body, ctype = script.page()
                    self.send_response(200)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def page(self) -> tuple[bytes, str]:
        if not self.html:
            return json.dumps({"files": FILES}).encode(), "application/vnd.pypi.simple.v1+json"
        links = "".join(
            f'<a href="{f["url"]}{"#sha256=" + SHA if f["hashes"] else ""}">{f["filename"]}</a>'
            for f in FILES
        )
        return f"<html><body>{links}</body></html>".encode(), "text/html"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Iterator[Script]:
    monkeypatch.setenv("VPR_INDEX_BACKOFF", "0.01")
    monkeypatch.setenv("VPR_PUBLISH_BACKOFF", "0.01")
    s = Script()
    yield s
    s.server.shutdown()
    s.server.server_close()


def test_json_and_html_pages_read_the_same(script: Script) -> None:
    from_json = ix.project_files(script.url, "Demo")
    script.html = True
    from_html = ix.project_files(script.url, "demo")
    assert from_json is not None and from_html is not None
    drop = {"upload_time", "size"}
    assert [{k: v for k, v in f.__dict__.items() if k not in drop} for f in from_json] == [
        {k: v for k, v in f.__dict__.items() if k not in drop} for f in from_html
    ]
    host = script.url.removesuffix("/simple/")
    assert [f.url for f in from_json] == [
        f"{host}/files/demo-1.0.tar.gz",
        f"{host}/files/demo-1.1.tar.gz",
    ]
    assert [f.sha256 for f in from_json] == [SHA, None]


def test_fetch_retries_503_and_429_then_reads_the_page(script: Script) -> None:
    script.fail = [503, 429]
    files = fetch.index_files(script.url, "demo")
    assert [f.filename for f in files] == ["demo-1.0.tar.gz", "demo-1.1.tar.gz"]
    assert len(script.requests) == 3


def test_fetch_gives_up_after_its_attempts_with_exit_3(
    script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPR_INDEX_ATTEMPTS", "2")
    script.fail = [503, 503, 503]
    with pytest.raises(OutsideFailure, match=r"package index unreachable .*2 attempts"):
        fetch.index_files(script.url, "demo")
    assert len(script.requests) == 2


def test_a_missing_project_is_bad_input_and_not_retried(script: Script) -> None:
    with pytest.raises(BadInput, match="not found on the index"):
        fetch.index_files(script.url, "nothere")
    assert len(script.requests) == 1


def test_fetch_does_not_send_the_upload_credentials(
    script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TWINE_USERNAME", "uploader")
    monkeypatch.setenv("TWINE_PASSWORD", "s3cret-token")
    fetch.index_files(script.url, "demo")
    assert "Authorization" not in script.requests[-1]["headers"]
    ix.project_files(script.url, "demo")  # publish's reads do (the index is its target)
    assert script.requests[-1]["headers"]["Authorization"].startswith("Basic ")


def test_publish_reads_retry_through_the_same_loop(script: Script) -> None:
    script.fail = [502]
    attempts, backoff = ix.retry_policy()
    got = ix.retrying(
        lambda: ix.remote_sha256(script.url, "demo", "demo-1.0.tar.gz"),
        attempts=attempts,
        backoff=backoff,
    )
    assert got == SHA and len(script.requests) == 2


def test_a_waited_out_request_is_raised_at_once_when_asked() -> None:
    calls: list[int] = []

    def silent() -> None:
        calls.append(1)
        raise ix.Transient("no answer after waiting 60 s", waited=True)

    with pytest.raises(ix.Transient):
        ix.retrying(silent, attempts=3, backoff=0, retry_waited=False)
    assert len(calls) == 1
    with pytest.raises(ix.Transient):
        ix.retrying(silent, attempts=3, backoff=0)
    assert len(calls) == 4


def test_retry_policy_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VPR_INDEX_ATTEMPTS", raising=False)
    monkeypatch.delenv("VPR_INDEX_BACKOFF", raising=False)
    assert ix.retry_policy("VPR_INDEX") == (3, 0.5)
    monkeypatch.setenv("VPR_PUBLISH_ATTEMPTS", "0")
    assert ix.retry_policy()[0] == 1


def test_html_anchor_text_names_the_file_and_yanked_is_kept() -> None:
    body = b'<a href="/f/x-1.0.tar.gz#sha256=ab" data-yanked="">x-1.0.tar.gz</a><a href="/f/y">'
    files = simpleindex.page_files(body, "text/html", "http://h/simple/x/", "page")
    assert files[0].filename == "x-1.0.tar.gz" and files[0].yanked is True
    assert files[0].sha256 == "ab" and files[0].url == "http://h/f/x-1.0.tar.gz"
    assert files == files[:1]  # an anchor never closed is not a file


def test_a_json_page_is_read_into_index_files_and_a_bad_upload_time_refused() -> None:
    import json

    from vllm_plugin_release.core.errors import OutsideFailure

    entry = {
        "filename": "x-1.0.tar.gz",
        "url": "../../f/x-1.0.tar.gz#frag",
        "hashes": {"sha256": "ab"},
        "size": 7,
        "upload-time": "2026-07-25T10:40:48Z",
        "yanked": "bad release",
    }
    page = json.dumps({"files": [entry]}).encode()
    files = simpleindex.page_files(page, "application/json", "http://h/simple/x/", "page")
    assert files == [
        simpleindex.IndexFile(
            "x-1.0.tar.gz", "http://h/f/x-1.0.tar.gz", "ab", 7, "2026-07-25T10:40:48Z", True
        )
    ]
    hostile = json.dumps({"files": [{**entry, "upload-time": 1753440048}]}).encode()
    with pytest.raises(OutsideFailure, match=r"page: malformed .*files\[0\]: 'upload-time'"):
        simpleindex.page_files(hostile, "application/json", "http://h/simple/x/", "page")
