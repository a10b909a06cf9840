"""A package index as seen from here: the simple API (PEP 691 JSON / PEP 503 HTML) and the
local default index (a pypiserver on loopback); credentials go in a header, never into a
URL or a message."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from packaging.utils import canonicalize_name

from vllm_plugin_release.core import progress, records, simpleindex
from vllm_plugin_release.core.cache import atomic_write_text
from vllm_plugin_release.core.errors import Origin, OutsideFailure, origin, scrub
from vllm_plugin_release.core.simpleindex import IndexFile
from vllm_plugin_release.edges import httpio, proc, settings
from vllm_plugin_release.edges.proc import free_port, spawn

USER_AGENT = "vllm-plugin-release (+publish)"
CREDENTIAL_ENV = ("TWINE_PASSWORD", "TWINE_USERNAME")


def redact(text: str) -> str:
    """Text meant for a person, without the environment's index credentials or URL user info."""
    values = [os.environ.get(k, "") for k in CREDENTIAL_ENV]
    return scrub(text, [v for v in values if len(v) >= 4])


@dataclass(frozen=True)
class IndexTarget:
    upload_url: str
    simple_url: str
    local: bool = False


def simple_url_for(upload_url: str) -> str:
    """The simple API that goes with an upload URL (PyPI, TestPyPI, pypiserver/devpi-like)."""
    parts = urllib.parse.urlsplit(upload_url)
    host = parts.hostname or ""
    if host == "upload.pypi.org":
        return "https://pypi.org/simple/"
    if host == "test.pypi.org":
        return "https://test.pypi.org/simple/"
    return upload_url.rstrip("/") + "/simple/"


class Transient(Exception):
    """A failure worth retrying (connection error, timeout, HTTP 5xx or 429). `waited`: the
    index accepted the connection and said nothing for the whole VPR_NET_TIMEOUT."""

    def __init__(
        self,
        message: str,
        *,
        waited: bool = False,
        rate_limited: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.waited = waited
        # HTTP 429, or 503 with Retry-After: the index asks us to slow down (the status code)
        self.rate_limited = rate_limited
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date, or garbage: back off by our own schedule
        return None


def retry_policy(prefix: str = "VPR_PUBLISH") -> tuple[int, float]:
    """(attempts, first backoff in seconds) for index requests: $PREFIX_ATTEMPTS (4) and
    $PREFIX_BACKOFF (2.0); `VPR_PUBLISH` for publishing, `VPR_INDEX` for reading (3, 0.5)."""
    return settings.count(f"{prefix}_ATTEMPTS"), settings.number(f"{prefix}_BACKOFF")


T = TypeVar("T")


class RateLimited(Transient):
    """The index still rate-limited when the caller's backoff budget was spent."""

    def __init__(self, last: Transient, backed_off: float) -> None:
        super().__init__(str(last), rate_limited=last.rate_limited, retry_after=last.retry_after)
        self.backed_off = backed_off


def retrying(
    call: Callable[[], T],
    *,
    attempts: int,
    backoff: float,
    retry_waited: bool = True,
    rate_budget: float | None = None,
) -> T:
    """`call()`, again after a Transient, up to `attempts` times with doubling waits (one that
    `waited` the whole timeout only with `retry_waited`). With `rate_budget` (seconds), a
    rate-limited answer is waited out, not counted, until the budget is spent: RateLimited."""
    attempt, backed_off, pace = 0, 0.0, 1.0
    while True:
        try:
            return call()
        except Transient as exc:
            if exc.rate_limited and rate_budget is not None:
                if backed_off >= rate_budget:
                    raise RateLimited(exc, backed_off) from None
                asked = exc.retry_after if exc.retry_after is not None else pace
                pause = min(max(asked, 0.25), rate_budget - backed_off)  # never a busy loop
                progress.warn(f"{exc}: rate-limited; waiting {pause:.1f} s")
                time.sleep(pause)
                backed_off += pause
                pace = min(pace * 2, 30.0)
                continue
            attempt += 1
            if attempt >= attempts or (exc.waited and not retry_waited):
                raise
            delay = backoff * (2 ** (attempt - 1))
            progress.warn(f"{exc}; retrying in {delay:g} s ({attempt + 1}/{attempts})")
            time.sleep(delay)


# The files host an index links its files to (no credentials go there): PyPI's simple pages
# link files.pythonhosted.org. Any other origin than the index's own is refused.
FILE_HOSTS: dict[Origin, frozenset[Origin]] = {
    ("https", "pypi.org", 443): frozenset({("https", "files.pythonhosted.org", 443)}),
    ("https", "test.pypi.org", 443): frozenset({("https", "test-files.pythonhosted.org", 443)}),
}


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _auth_header(index_url: str, *, environment: bool = True) -> dict[str, str]:
    """The index's credentials: its URL's user info, else TWINE_USERNAME / TWINE_PASSWORD
    (when `environment`: the upload index's, never sent to an index we only read from)."""
    parts = urllib.parse.urlsplit(index_url)
    if parts.username:
        user = urllib.parse.unquote(parts.username)
        return _basic(user, urllib.parse.unquote(parts.password or ""))
    if not environment:
        return {}
    user, password = os.environ.get("TWINE_USERNAME"), os.environ.get("TWINE_PASSWORD")
    return _basic(user, password) if user and password else {}


def _without_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if not parts.username and not parts.password:
        return url
    netloc = parts.hostname or ""
    netloc = f"[{netloc}]" if ":" in netloc else netloc
    return urllib.parse.urlunsplit(
        parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else ""))
    )


class _OriginRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects stay inside `allowed`; credentials never follow one off `auth_origin`."""

    def __init__(self, allowed: frozenset[Origin], auth_origin: Origin) -> None:
        self.allowed, self.auth_origin = allowed, auth_origin

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is None:
            return None
        if origin(newurl) not in self.allowed:
            raise OutsideFailure(
                f"{redact(_without_userinfo(req.full_url))} redirects to "
                f"{redact(_without_userinfo(newurl))}, another origin than the index's",
                hint="the index must serve its pages and files itself (or from its files host)",
            )
        if origin(newurl) != self.auth_origin:
            new.remove_header("Authorization")
        return new


def _get(
    url: str, accept: str | None = None, *, index: str, credentials: bool = True
) -> tuple[bytes, str, str] | None:
    """(body, content type, final URL), None on 404; Transient on 5xx/429/connection errors.
    `url` must be on the origin of `index` (or its files host); credentials go there only."""
    home = origin(index)
    allowed = frozenset({home}) | FILE_HOSTS.get(home, frozenset())
    if origin(url) not in allowed:
        raise OutsideFailure(
            f"{redact(_without_userinfo(index))} links {redact(_without_userinfo(url))}, "
            "on another origin than the index's: not downloaded",
            hint="the index must serve its files itself (or from its files host) or list "
            "their sha256",
        )
    headers = {"User-Agent": USER_AGENT}
    if origin(url) == home:
        headers.update(_auth_header(index, environment=credentials))
    url = _without_userinfo(url)
    if accept:
        headers["Accept"] = accept
    opener = urllib.request.build_opener(_OriginRedirects(allowed, home))
    try:
        request = urllib.request.Request(url, headers=headers)
        with httpio.waiting(
            lambda: opener.open(request, timeout=httpio.timeout()), redact(url)
        ) as response:
            return response.read(), response.headers.get("Content-Type", ""), response.geturl()
    except httpio.NoAnswer as exc:
        raise Transient(str(exc), waited=True)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        if exc.code == 429 or (exc.code == 503 and after is not None):
            raise Transient(
                f"HTTP {exc.code} from {redact(url)}", rate_limited=exc.code, retry_after=after
            )
        if exc.code >= 500:
            raise Transient(f"HTTP {exc.code} from {redact(url)}")
        if exc.code in (401, 403):
            raise OutsideFailure(
                f"{redact(url)}: the index refused access (HTTP {exc.code})",
                hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
            )
        raise OutsideFailure(f"{redact(url)}: the index answered HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        raise Transient(f"{redact(url)} unreachable ({getattr(exc, 'reason', exc)})")


def project_files(
    simple_url: str, project: str, *, credentials: bool = True
) -> list[IndexFile] | None:
    """The files of `project` on a simple-API index (PEP 691 JSON, PEP 503 HTML), None on 404. One
    request, no retry. `credentials`: send the environment's upload credentials (publish)."""
    page = _get(
        f"{simple_url.rstrip('/')}/{canonicalize_name(project)}/",
        simpleindex.ACCEPT,
        index=simple_url,
        credentials=credentials,
    )
    if page is None:
        return None
    body, content_type, base = page
    return simpleindex.page_files(body, content_type, base, redact(_without_userinfo(base)))


def remote_sha256(simple_url: str, project: str, filename: str) -> str | None:
    """sha256 of `filename` on the index, or None when the index does not have it."""
    files = {f.filename: f for f in project_files(simple_url, project) or []}
    if filename not in files:
        return None
    if files[filename].sha256:
        return files[filename].sha256
    got = _get(files[filename].url, index=simple_url)  # no hash on the page: download, hash
    return hashlib.sha256(got[0]).hexdigest() if got else None


def parse_pid(data: Any) -> int | None:
    """The server's process id in a pid file (`LocalIndex.start` writes it: `pid`, a
    positive whole number); None when the file says no such thing."""
    pid = data.get("pid") if isinstance(data, dict) else None
    return pid if type(pid) is int and pid > 0 else None


class LocalIndex:
    """A pypiserver on 127.0.0.1 over `root`, started and stopped by us."""

    def __init__(self, root: Path, *, startup_timeout: float = 30.0) -> None:
        self.root = Path(root)
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.root.parent / "index-server.log"
        self.pid_file = self.root.parent / "index-server.pid"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def target(self) -> IndexTarget:
        return IndexTarget(upload_url=self.url, simple_url=self.url + "simple/", local=True)

    def _stop_recorded(self) -> None:
        """Stop the server a killed run left behind (recorded in the pid file, still running
        and still a pypiserver over our root), then forget the file."""
        pid = records.read_object(self.pid_file, parse_pid)  # bounded; None when unusable
        if pid is not None:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                cmdline = []
            if b"pypiserver" in cmdline and str(self.root).encode() in cmdline:
                proc.kill_group(pid)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def start(self) -> IndexTarget:
        self.root.mkdir(parents=True, exist_ok=True)
        self._stop_recorded()
        last = ""
        for _ in range(3):  # the port could be taken between choosing and binding
            self.port = free_port()
            with self.log.open("wb") as log:
                argv = [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1"]
                argv += ["-p", str(self.port), "-a", ".", "-P", ".", "--disable-fallback"]
                argv += ["--hash-algo", "sha256", "--backend", "simple-dir", str(self.root)]
                self.process = spawn(
                    argv,
                    what="the local package index (pypiserver)",
                    stdout=log,
                    guard=False,  # a server left by a SIGKILLed run is stopped by the next
                )
            pid_record = {"pid": self.process.pid, "port": self.port, "root": str(self.root)}
            atomic_write_text(self.pid_file, json.dumps(pid_record) + "\n")
            deadline = time.monotonic() + self.startup_timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                try:
                    with urllib.request.urlopen(f"{self.url}health", timeout=2) as r:
                        if r.status == 200:
                            return self.target
                except (urllib.error.URLError, OSError):
                    time.sleep(0.1)
            last = self.log.read_text(errors="replace")[-2000:]
            self.stop()
        raise OutsideFailure(
            f"the local package index (pypiserver over {self.root}) did not start:\n{last}",
            hint="is pypiserver installed (pip install pypiserver)? see " + str(self.log),
        )

    def stop(self) -> None:
        server, self.process = self.process, None
        if server is None:
            return
        proc.forget(server)
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def __enter__(self) -> IndexTarget:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
