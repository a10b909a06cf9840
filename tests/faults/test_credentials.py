"""Credentials sent to another origin: an index page that links (or redirects) a file to
another host must not make the publish client send it TWINE_USERNAME / TWINE_PASSWORD, and
a file on another origin than the index's (or its files host) is not downloaded at all.
Two loopback servers on two ports are two origins; the second records what it receives."""

from __future__ import annotations

import base64
import hashlib
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support import serve_in_thread
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges import index

WHEEL = "demo-1.0-py3-none-any.whl"
BODY = b"not really a wheel"
USER, PASSWORD = "alice", "s3cret-token"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class Origin:
    """A loopback HTTP server: `routes` maps a path to (status, headers, body); every request
    is recorded as (path, Authorization header or None)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, str | None]] = []
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                origin.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = origin.routes.get(self.path, (404, {}, b""))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def auth_seen(self) -> list[str]:
        return [a for _, a in self.seen if a]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pair(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    a, b = Origin(), Origin()
    b.routes["/files/" + WHEEL] = (200, {"Content-Type": "application/octet-stream"}, BODY)
    a.routes["/files/" + WHEEL] = (200, {"Content-Type": "application/octet-stream"}, BODY)
    yield a, b
    a.close()
    b.close()


def _html(a: Origin, href: str) -> None:
    page = f'<html><body><a href="{href}">{WHEEL}</a></body></html>'.encode()
    a.routes["/simple/demo/"] = (200, {"Content-Type": "text/html"}, page)


def _json(a: Origin, url: str) -> None:
    files = [{"filename": WHEEL, "url": url, "hashes": {}}]
    doc = {"meta": {"api-version": "1.0"}, "name": "demo", "files": files}
    ctype = "application/vnd.pypi.simple.v1+json"
    a.routes["/simple/demo/"] = (200, {"Content-Type": ctype}, json.dumps(doc).encode())


@pytest.mark.parametrize("page", ["html", "json"])
def test_a_link_to_another_origin_gets_no_credentials_and_no_download(pair, page: str) -> None:
    a, b = pair
    (_html if page == "html" else _json)(a, f"{b.url}/files/{WHEEL}")
    with pytest.raises(OutsideFailure, match="another origin"):
        index.remote_sha256(a.url + "/simple/", "demo", WHEEL)
    assert a.auth_seen() == [BASIC]  # the index's own page: credentials as before
    assert b.seen == []  # never asked, so never given the credentials


def test_a_redirect_to_another_origin_carries_no_credentials(pair) -> None:
    a, b = pair
    _html(a, "/files/moved/" + WHEEL)
    a.routes["/files/moved/" + WHEEL] = (302, {"Location": f"{b.url}/files/{WHEEL}"}, b"")
    with pytest.raises(OutsideFailure, match="another origin"):
        index.remote_sha256(a.url + "/simple/", "demo", WHEEL)
    assert b.auth_seen() == []


def test_the_files_host_of_an_index_is_used_without_credentials(pair, monkeypatch) -> None:
    a, b = pair  # b plays files.pythonhosted.org for a (as PyPI's pair does)
    monkeypatch.setitem(index.FILE_HOSTS, index.origin(a.url), frozenset({index.origin(b.url)}))
    _html(a, f"{b.url}/files/{WHEEL}")
    assert (
        index.remote_sha256(a.url + "/simple/", "demo", WHEEL) == hashlib.sha256(BODY).hexdigest()
    )
    assert b.seen and b.auth_seen() == []
    a.routes["/files/moved/" + WHEEL] = (302, {"Location": f"{b.url}/files/{WHEEL}"}, b"")
    _html(a, "/files/moved/" + WHEEL)
    before = len(b.seen)
    assert (
        index.remote_sha256(a.url + "/simple/", "demo", WHEEL) == hashlib.sha256(BODY).hexdigest()
    )
    assert len(b.seen) == before + 1 and b.auth_seen() == []


def test_same_origin_files_keep_their_credentials(pair) -> None:
    a, _ = pair
    _html(a, "/files/" + WHEEL)
    assert (
        index.remote_sha256(a.url + "/simple/", "demo", WHEEL) == hashlib.sha256(BODY).hexdigest()
    )
    assert a.auth_seen() == [BASIC, BASIC]


def test_url_user_info_goes_to_the_index_origin_only(pair, monkeypatch) -> None:
    a, b = pair
    monkeypatch.delenv("TWINE_USERNAME")
    monkeypatch.delenv("TWINE_PASSWORD")
    _html(a, f"{b.url}/files/{WHEEL}")
    simple = a.url.replace("://", f"://{USER}:{PASSWORD}@") + "/simple/"
    with pytest.raises(OutsideFailure) as err:
        index.remote_sha256(simple, "demo", WHEEL)
    assert PASSWORD not in str(err.value)
    assert a.auth_seen() == [BASIC] and b.seen == []
