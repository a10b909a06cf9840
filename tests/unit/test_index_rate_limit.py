"""An index that rate-limits (HTTP 429, or 503 with Retry-After): the listing is retried with
backoff, then an outside failure (exit 3) once $VPR_INDEX_RETRY_BUDGET is spent. A real
loopback server; `vpr upstream` is the hourly workflow's only index request."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import serve_in_thread, spec_head, vpr
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges.fetch import index_files


class LimitedIndex:
    """Answers 429 (Retry-After: 0) to the first `limited` listing requests, then lists."""

    def __init__(self, limited: int, code: int = 429) -> None:
        self.hits = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.hits += 1
                if owner.hits <= limited:
                    self.send_response(code)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps(
                    {"files": [{"filename": "vllm-0.1.0.tar.gz", "url": "/f", "hashes": {}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("code", [429, 503])
def test_rate_limited_listing_is_retried(code: int) -> None:
    index = LimitedIndex(limited=3, code=code)
    try:
        files = index_files(index.url, "vllm")
    finally:
        index.close()
    assert [f.filename for f in files] == ["vllm-0.1.0.tar.gz"]
    assert index.hits == 4


def test_rate_limit_budget_spent_is_an_outside_failure(monkeypatch) -> None:
    monkeypatch.setenv("VPR_INDEX_RETRY_BUDGET", "0")
    index = LimitedIndex(limited=100)
    try:
        with pytest.raises(OutsideFailure, match=r"still rate-limits \(HTTP 429\)"):
            index_files(index.url, "vllm")
    finally:
        index.close()


def test_cli_upstream_exits_3_after_the_budget(tmp_path: Path) -> None:
    index = LimitedIndex(limited=100)
    (tmp_path / "pyproject.toml").write_text("")
    spec = tmp_path / "s.toml"
    spec.write_text(spec_head().replace('kind = "sdist"', f'kind = "sdist"\nindex = "{index.url}"'))
    try:
        done = vpr(
            "upstream", "--spec", str(spec), env={"VPR_INDEX_RETRY_BUDGET": "2"}, check=False
        )
    finally:
        index.close()
    assert done.returncode == 3, done.stdout + done.stderr
    out = " ".join((done.stdout + done.stderr).split())
    assert "still rate-limits (HTTP 429) after 2 s" in out and "Traceback" not in out
    assert index.hits >= 2
