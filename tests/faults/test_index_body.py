"""A malformed PEP 691 project page is an outside failure naming the URL (exit 3), never a
KeyError or TypeError: both readers of the simple API (fetch and the publish index client)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support import serve_in_thread
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges import fetch, index

BODIES = {
    "truncated": b'{"files": [',
    "no filename": b'{"files": [{"url": "/files/vllm-0.0.1.tar.gz"}]}',
    "no url": b'{"files": [{"filename": "vllm-0.0.1.tar.gz"}]}',
    "files is an object": b'{"files": {"filename": "vllm-0.0.1.tar.gz"}}',
    "entry is a string": b'{"files": ["vllm-0.0.1.tar.gz"]}',
    "hashes is a list": b'{"files": [{"filename": "v.tar.gz", "url": "/f", "hashes": [1]}]}',
    "top level is a list": b"[]",
    "not utf-8": b"\xff\xfe{",
}


@pytest.fixture
def page():
    """A loopback index whose project page is whatever body the test sets."""
    served = {"body": b""}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = served["body"]
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    served["url"] = f"http://127.0.0.1:{server.server_address[1]}/simple"
    yield served
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_fetch_index_files_refuses_a_malformed_page(page, body):
    page["body"] = body
    with pytest.raises(OutsideFailure, match="malformed PEP 691 index page") as info:
        fetch.index_files(page["url"], "vllm")
    assert "/simple/vllm/" in str(info.value)
    assert info.value.exit_code == 3


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_publish_index_client_refuses_a_malformed_page(page, body):
    page["body"] = body
    with pytest.raises(OutsideFailure, match="malformed PEP 691 index page"):
        index.remote_sha256(page["url"], "vllm", "vllm-0.0.1.tar.gz")


def test_a_good_page_still_reads(page):
    page["body"] = b'{"files": [{"filename": "vllm-0.0.1.tar.gz", "url": "/f/v.tar.gz"}]}'
    files = fetch.index_files(page["url"], "vllm")
    assert [f.filename for f in files] == ["vllm-0.0.1.tar.gz"]
    assert files[0].sha256 is None
