"""Publish: both wheels to a package index (twine), then the manifest to the manifest store.

Order, each step a gate for the next:
  1. the manifest folder verifies (subject digests; the signature when a public
     key is at hand) and its verdict is fleet or pilot (else `--allow-uncertified`);
  2. `twine check --strict` on both wheels;
  3. per wheel: ask the index's simple API whether the file is there. Same sha256:
     done. Different sha256: exit 1. Absent: `twine upload`, with retries and
     backoff on connection errors and 5xx (then exit 3);
  4. with the default index, a local pypiserver on loopback over `.vpr/index/`, the
     result is proven by installing both wheels with `pip --require-hashes` into a
     scratch venv and checking it against the manifest (`--verify-install` does
     the same for any index);
  5. only then is the manifest added to the store.

Credentials: twine reads TWINE_USERNAME / TWINE_PASSWORD or the keyring; the
simple-API queries send the same environment credentials. Neither appears in
output: every line from a subprocess is scrubbed, URLs lose their user info.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure

USER_AGENT = "vllm-plugin-release (+publish)"
HTTP_TIMEOUT = 60
CERTIFIED = ("fleet", "pilot")


def _attempts() -> int:
    return max(1, int(os.environ.get("VPR_PUBLISH_ATTEMPTS", "4")))


def _backoff() -> float:
    return float(os.environ.get("VPR_PUBLISH_BACKOFF", "2.0"))


def _secrets() -> list[str]:
    values = [os.environ.get(k, "") for k in ("TWINE_PASSWORD", "TWINE_USERNAME")]
    return [v for v in values if len(v) >= 4]


def scrub(text: str) -> str:
    """Remove credentials from text meant for a person."""
    for secret in _secrets():
        text = text.replace(secret, "***")
    return re.sub(r"(?<=://)[^/@\s:]+(:[^/@\s]*)?@", "***@", text)


def redact_url(url: str) -> str:
    return scrub(url)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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


# ---------------------------------------------------------------------------
# The local default index


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalIndex:
    """A pypiserver on 127.0.0.1 over `root`, started and stopped by us."""

    def __init__(self, root: Path, *, startup_timeout: float = 30.0) -> None:
        self.root = Path(root)
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.root.parent / "index-server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def target(self) -> IndexTarget:
        return IndexTarget(upload_url=self.url, simple_url=self.url + "simple/", local=True)

    def start(self) -> IndexTarget:
        self.root.mkdir(parents=True, exist_ok=True)
        last = ""
        for _ in range(3):  # the port could be taken between choosing and binding
            self.port = _free_port()
            with self.log.open("wb") as log:
                self.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "pypiserver",
                        "run",
                        "-i",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                        "-a",
                        ".",
                        "-P",
                        ".",
                        "--disable-fallback",
                        "--hash-algo",
                        "sha256",
                        "--backend",
                        "simple-dir",
                        str(self.root),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
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
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> IndexTarget:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------
# Talking to an index


class _Transient(Exception):
    """A failure worth retrying (connection error, timeout, HTTP 5xx)."""


def _auth_header() -> dict[str, str]:
    user, password = os.environ.get("TWINE_USERNAME"), os.environ.get("TWINE_PASSWORD")
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
    return {}


def _get(url: str, accept: str | None = None) -> tuple[bytes, str, str] | None:
    """(body, content type, final URL), None on 404; _Transient on 5xx/connection errors."""
    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": USER_AGENT, **_auth_header()}
    if parts.username:  # credentials in the URL: send them as a header, never log them
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        url = urllib.parse.urlunsplit(
            parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
        )
    if accept:
        headers["Accept"] = accept
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return response.read(), response.headers.get("Content-Type", ""), response.geturl()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        if exc.code >= 500:
            raise _Transient(f"HTTP {exc.code} from {redact_url(url)}")
        if exc.code in (401, 403):
            raise OutsideFailure(
                f"{redact_url(url)}: the index refused access (HTTP {exc.code})",
                hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
            )
        raise OutsideFailure(f"{redact_url(url)}: the index answered HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        raise _Transient(f"{redact_url(url)} unreachable ({getattr(exc, 'reason', exc)})")


def _links(body: bytes, content_type: str, base: str) -> dict[str, tuple[str, str | None]]:
    """{filename: (url, sha256 or None)} from a PEP 691 JSON or PEP 503 HTML page."""
    import html.parser

    out: dict[str, tuple[str, str | None]] = {}
    if "json" in content_type:
        for f in json.loads(body).get("files", []):
            url = urllib.parse.urljoin(base, f["url"])
            out[f["filename"]] = (url.split("#")[0], (f.get("hashes") or {}).get("sha256"))
        return out

    class Parser(html.parser.HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            href = dict(attrs).get("href")
            if tag != "a" or not href:
                return
            url = urllib.parse.urljoin(base, href)
            name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
            frag = urllib.parse.urlsplit(url).fragment
            sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
            out[name] = (url.split("#")[0], sha)

    Parser().feed(body.decode("utf-8", "replace"))
    return out


def remote_sha256(simple_url: str, project: str, filename: str) -> str | None:
    """sha256 of `filename` on the index, or None when the index does not have it."""
    page = _get(
        f"{simple_url.rstrip('/')}/{normalize(project)}/",
        "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
    )
    if page is None:
        return None
    links = _links(*page)
    if filename not in links:
        return None
    url, sha = links[filename]
    if sha:
        return sha
    got = _get(url)  # no hash on the page: download and hash it
    return hashlib.sha256(got[0]).hexdigest() if got else None


def _twine_env(target: IndexTarget) -> dict[str, str]:
    env = {**os.environ, "TWINE_NON_INTERACTIVE": "1"}
    if target.local:  # pypiserver with auth off still wants a user name from twine
        env.update(
            TWINE_USERNAME="vpr",
            TWINE_PASSWORD="local-index",
            PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        )
    return env


def twine_check(wheels: list[Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        out = scrub((done.stdout + done.stderr).strip())
        raise GateFailed(
            f"`twine check --strict` failed:\n{out}",
            hint="fix the package metadata (long description, content type) and rebuild",
        )


def _twine_upload(target: IndexTarget, wheel: Path) -> None:
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "twine",
                "upload",
                "--non-interactive",
                "--disable-progress-bar",
                "--repository-url",
                target.upload_url,
                str(wheel),
            ],
            capture_output=True,
            text=True,
            check=False,
            env=_twine_env(target),
            timeout=1800,
        )
    except subprocess.TimeoutExpired:
        raise _Transient(f"upload of {wheel.name} timed out")
    if done.returncode == 0:
        return
    out = scrub((done.stdout + done.stderr).strip())
    last = "\n".join(out.splitlines()[-6:])
    status = re.search(r"HTTPError: (\d{3})", out)
    code = int(status.group(1)) if status else None
    if code is None or code >= 500 or "ConnectionError" in out or "timed out" in out.lower():
        raise _Transient(f"upload of {wheel.name}: {last}")
    if code in (401, 403):
        raise OutsideFailure(
            f"{redact_url(target.upload_url)} refused the upload of {wheel.name} (HTTP {code})",
            hint="set TWINE_USERNAME / TWINE_PASSWORD or store them in the keyring",
        )
    if code in (400, 409):  # often "file already exists": the caller re-checks the digest
        raise _Transient(f"upload of {wheel.name} refused (HTTP {code}): {last}")
    raise OutsideFailure(f"upload of {wheel.name} failed (HTTP {code}):\n{last}")


def ensure_on_index(target: IndexTarget, project: str, wheel: Path, sha256: str) -> str:
    """Make sure `wheel` is on the index: 'present' (same sha256 already) or 'uploaded'.

    A different file under the same name is GateFailed; the index failing every
    attempt is OutsideFailure.
    """
    attempts, backoff = _attempts(), _backoff()
    last = ""
    for attempt in range(attempts):
        if attempt:
            delay = backoff * (2 ** (attempt - 1))
            progress.warn(f"{last}; retrying in {delay:g} s ({attempt + 1}/{attempts})")
            time.sleep(delay)
        try:
            remote = remote_sha256(target.simple_url, project, wheel.name)
            if remote == sha256:
                return "present" if attempt == 0 else "uploaded"
            if remote is not None:
                raise GateFailed(
                    f"{redact_url(target.simple_url)}: {wheel.name} is already on the index "
                    f"with sha256 {remote}, but this build's wheel is {sha256}",
                    hint="a published file can never be replaced; bump the version (or a "
                    "local label) and rebuild, or check why the build is not reproducible",
                )
            _twine_upload(target, wheel)
            remote = remote_sha256(target.simple_url, project, wheel.name)
            if remote == sha256:
                return "uploaded"
            if remote is not None:
                raise GateFailed(
                    f"{wheel.name}: the index holds sha256 {remote} after upload, expected {sha256}"
                )
            last = f"{wheel.name} not listed on the index after upload"
        except _Transient as exc:
            last = str(exc)
    raise OutsideFailure(
        f"{redact_url(target.upload_url)}: giving up on {wheel.name} after {attempts} "
        f"attempts: {last}",
        hint="the index is down or failing; re-run `vpr publish` later (files already "
        "uploaded with the same sha256 count as done)",
    )


# ---------------------------------------------------------------------------
# Install proof


def _pip_has_python_option() -> bool:
    """pip >= 22.3 can install into another interpreter (`pip --python`)."""
    try:
        import pip
    except ImportError:
        return False
    try:
        major, minor = (int(x) for x in pip.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (22, 3)


def prove_install(
    target: IndexTarget, manifest: dict[str, Any], wheels_dir: Path, workdir: Path
) -> None:
    """Install both wheels from the index with --require-hashes into a scratch venv, then
    check that environment against the manifest. GateFailed on any mismatch."""
    from vllm_plugin_release.stages import manifest as mf

    venv = workdir / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        raise OutsideFailure(f"install proof: could not create a venv in {venv}:\n{made.stderr}")
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    requirements = workdir / "requirements.txt"
    lines = [
        f"{manifest[p]['name']}=={manifest[p]['wheel']['version']} "
        f"--hash=sha256:{manifest[p]['wheel']['sha256']}"
        for p in ("core", "plugin")
    ]
    requirements.write_text("\n".join(lines) + "\n")
    common = [
        "--no-deps",
        "--require-hashes",
        "--index-url",
        target.simple_url,
        "-r",
        str(requirements),
    ]
    if _pip_has_python_option():
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-input",
            *common,
        ]
    else:  # uv ships as a dependency of this package
        cmd = [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "--python",
            str(python),
            "--no-cache",
            "--no-config",
            *common,
        ]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_INDEX",
                 "UV_EXTRA_INDEX_URL", "UV_INDEX_URL"):  # fmt: skip
        env.pop(name, None)  # the proof installs from this index only
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        out = scrub((done.stdout + done.stderr).strip())
        raise GateFailed(
            "install proof failed: installing both wheels from "
            f"{redact_url(target.simple_url)} with --require-hashes did not work:\n"
            + "\n".join(out.splitlines()[-15:]),
            hint="nothing was added to the manifest store",
        )
    problems = mf.check_environment(manifest, python, wheels_dir)
    if problems:
        raise GateFailed(
            "install proof failed: the installed wheels do not match the manifest:\n  "
            + "\n  ".join(problems),
            hint="nothing was added to the manifest store",
        )


# ---------------------------------------------------------------------------
# The whole step


@dataclass
class PublishResult:
    index: str
    wheels: dict[str, str] = field(default_factory=dict)  # filename -> uploaded | present
    install_proven: bool = False
    store: str = ""
    store_status: str = ""
    pairing_id: str = ""
    verdict: str | None = None


def resolve_targets(
    spec: Any, index: str | None, store: str | None, cache_root: Path
) -> tuple[str | None, str]:
    """(index upload URL or None for the local default, store location)."""
    index = index or os.environ.get("VPR_INDEX") or spec.publish.get("index")
    store = store or os.environ.get("VPR_STORE") or spec.publish.get("store")
    if store and "://" not in store and not Path(store).is_absolute():
        store = str(spec.root / store)
    return index, store or str(cache_root / "store")


def _proof_marker(index_root: Path, wheels: list[tuple[str, Path, str]]) -> Path:
    from vllm_plugin_release.core.cache import key_of

    return index_root.parent / "index-proofs" / key_of(sorted(sha for _, _, sha in wheels))


def _already_proven(index_root: Path, wheels: list[tuple[str, Path, str]]) -> bool:
    """Both wheels sit in the local index folder with the right sha256, and an earlier
    run proved that exact pair installs with --require-hashes."""
    from vllm_plugin_release.core.cache import sha256_file

    if not _proof_marker(index_root, wheels).exists():
        return False
    return all(
        (index_root / w.name).is_file() and sha256_file(index_root / w.name) == sha
        for _, w, sha in wheels
    )


def publish_folder(
    dist_dir: Path,
    *,
    index: str | None,
    store: str,
    index_root: Path,
    scratch_root: Path,
    simple_index: str | None = None,
    public_key: Path | None = None,
    verify_install: bool | None = None,
    allow_uncertified: bool = False,
) -> PublishResult:
    """Publish dist_dir's wheels and manifest. `index=None`: a local pypiserver over index_root."""
    import shutil
    import tempfile

    from vllm_plugin_release.edges.store import HttpStore, open_store
    from vllm_plugin_release.stages import manifest as mf
    from vllm_plugin_release.stages import signing

    manifest_path = dist_dir / mf.MANIFEST_FILE
    if not manifest_path.exists():
        raise BadInput(
            f"{manifest_path}: no manifest to publish",
            hint="run `vpr manifest build --spec FILE` first",
        )
    target_store = open_store(store)
    if isinstance(target_store, HttpStore):
        raise BadInput(
            f"--store {target_store.location}: an HTTP manifest store is read-only",
            hint="publish to the folder that is served (--store PATH)",
        )
    if public_key is None:
        progress.warn("no public key at hand: checking subject digests, not the signature")
    verified = signing.verify_files(manifest_path, public_key)
    manifest = verified.manifest
    verdict = manifest["conformance"]["verdict"]
    if verdict not in CERTIFIED and not allow_uncertified:
        raise GateFailed(
            f"{manifest_path}: conformance verdict is {verdict or 'absent'}; only fleet and "
            "pilot pairings are published",
            hint="run `vpr conform` and fix the failing checks, or pass --allow-uncertified",
        )
    wheels = [
        (
            manifest[p]["name"],
            dist_dir / manifest[p]["wheel"]["filename"],
            manifest[p]["wheel"]["sha256"],
        )
        for p in ("core", "plugin")
    ]
    progress.info("twine check --strict")
    twine_check([w for _, w, _ in wheels])
    result = PublishResult(index="", pairing_id=manifest["pairing_id"], verdict=verdict)
    local = LocalIndex(index_root) if index is None else None
    if local is not None and verify_install is not False and _already_proven(index_root, wheels):
        # The same bytes were uploaded and install-proven by an earlier run: the local
        # index is a folder we own, so checking the files on disk is the whole answer.
        result.index = (
            f"local index {index_root} (files verified on disk; install proven by an earlier run)"
        )
        result.wheels = {w.name: "present" for _, w, _ in wheels}
        result.install_proven = True
        added = target_store.add(manifest_path, verified.statement_path)
        result.store, result.store_status = added.store, added.status
        return result
    with contextlib.ExitStack() as stack:
        if local is not None:
            from filelock import FileLock

            # One local publisher at a time over .vpr/index/ (each runs its own server).
            index_root.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(FileLock(str(index_root.parent / "index.lock"), timeout=600))
            target = stack.enter_context(local)
            result.index = f"local pypiserver over {index_root} ({target.upload_url})"
        else:
            target = IndexTarget(upload_url=index, simple_url=simple_index or simple_url_for(index))
            result.index = redact_url(target.upload_url)
        for project, wheel, sha in wheels:
            with progress.status(f"publishing {wheel.name} to {result.index}"):
                result.wheels[wheel.name] = ensure_on_index(target, project, wheel, sha)
            progress.info(f"{wheel.name}: {result.wheels[wheel.name]} on {result.index}")
        if verify_install is None:
            verify_install = local is not None
        if verify_install:
            scratch_root.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="install-proof-", dir=scratch_root))
            try:
                with progress.status("install proof: pip --require-hashes into a scratch venv"):
                    prove_install(target, manifest, dist_dir, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            result.install_proven = True
            if local is not None:
                marker = _proof_marker(index_root, wheels)
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text("install proven\n")
    added = target_store.add(manifest_path, verified.statement_path)
    result.store = added.store
    result.store_status = added.status
    return result


def publish_spec(
    spec: Any,
    *,
    index: str | None = None,
    store: str | None = None,
    simple_index: str | None = None,
    public_key: str | Path | None = None,
    signing_key: str | Path | None = None,
    verify_install: bool | None = None,
    allow_uncertified: bool = False,
    dist_root: Path | str = "dist",
    cache: Any = None,
) -> PublishResult:
    """`vpr publish --spec FILE`: the defaults resolved from the spec and the environment."""
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.stages import manifest as mf
    from vllm_plugin_release.stages import signing

    cache = cache or Cache.from_env()
    index, store_location = resolve_targets(spec, index, store, cache.root)
    pub = Path(public_key) if public_key else None
    if pub is None:  # the signing key's public half, when it is where the build left it
        key_path, _ = signing.resolve_key_path(
            signing_key, spec.publish.get("signing_key"), root=spec.root, cache_root=cache.root
        )
        candidate = signing.public_path(key_path)
        pub = candidate if candidate.exists() else None
    return publish_folder(
        mf.dist_dir_for(spec, dist_root),
        index=index,
        store=store_location,
        index_root=cache.root / "index",
        scratch_root=cache.tmp,
        simple_index=simple_index,
        public_key=pub,
        verify_install=verify_install,
        allow_uncertified=allow_uncertified,
    )


@contextlib.contextmanager
def local_index(root: Path) -> Iterator[IndexTarget]:
    """A LocalIndex as a context manager (for tests and the release pipeline)."""
    server = LocalIndex(root)
    try:
        yield server.start()
    finally:
        server.stop()
