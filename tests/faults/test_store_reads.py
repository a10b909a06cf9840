"""Every read from a manifest store is bounded in bytes and in time, and a store file that is
not a file is bad input naming it: `/dev/zero` or a fifo as a store file, a folder where a
file should be, an HTTP store whose answer never ends, or that sends one byte at a time, an
HTTP store URL that does not parse. Each ends with exit 2 (bad input) or 3 (outside
failure) naming what was read, within its deadline, never a traceback or a MemoryError.

The CLI runs in a subprocess with its address space limited to 1 GiB, so a read without a
cap fails quickly here instead of filling the machine's memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.pairing import SRC, store_key
from tests.support import serve_in_thread

MEMORY = 1 << 30
STORE_FILES = ("head.json", "index.json")


@pytest.fixture(autouse=True)
def _key(tmp_path: Path) -> None:
    """The key the CLI checks a store's head with, where it looks by default: the reads
    below fail before any signature could be checked."""
    store_key(tmp_path)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(*args: str, cwd: Path, timeout: float = 40) -> subprocess.CompletedProcess:
    """`vpr ARGS` in a subprocess with 1 GiB of address space; a deadline for the test."""
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "VPR_CACHE_DIR": str(cwd / ".vpr"),
        "VPR_STORE_TIMEOUT": "3",
    }
    return subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limited,
    )


def _refused(done: subprocess.CompletedProcess, code: int, *names: str) -> str:
    said = done.stdout + done.stderr
    assert done.returncode == code, said
    assert "Traceback" not in said and "MemoryError" not in said
    for name in names:
        assert name in said, said
    return said


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_a_store_file_that_is_not_a_file_is_bad_input(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    for name in STORE_FILES:
        target = store / name
        if kind == "dev-zero":
            target.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(target)
        else:
            target.mkdir()
    done = run("manifest", "query", "--store", str(store), cwd=tmp_path)
    said = _refused(done, 2, str(store))
    assert "[Errno" not in said


def test_a_store_url_that_does_not_parse_is_bad_input(tmp_path: Path) -> None:
    done = run("manifest", "query", "--store", "http://[::1/", cwd=tmp_path)
    _refused(done, 2, "--store", "http://[::1/")


class _Hostile(BaseHTTPRequestHandler):
    """Every path: `endless` (no length, bytes forever), `trickle` (one byte every 0.2 s
    after the headers) or `slow-headers` (the status line and headers a byte at a time)."""

    mode = "endless"
    stop = threading.Event()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        try:
            if self.mode == "slow-headers":
                for byte in b"HTTP/1.0 200 OK\r\nX-Slow: " + b"a" * 10_000:
                    if self.stop.is_set():
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b" " * 65536 if self.mode == "endless" else b" "
            while not self.stop.is_set():
                self.wfile.write(chunk)
                if self.mode != "endless":
                    self.wfile.flush()
                    time.sleep(0.2)
        except OSError:
            return


@pytest.fixture
def hostile():
    servers = []

    def serve(mode: str) -> str:
        handler = type("Handler", (_Hostile,), {"mode": mode, "stop": threading.Event()})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        serve_in_thread(server)
        servers.append((server, handler))
        return f"http://127.0.0.1:{server.server_address[1]}/store/"

    yield serve
    for server, handler in servers:
        handler.stop.set()
        server.shutdown()
        server.server_close()


def test_an_http_store_answer_that_never_ends_is_cut(tmp_path: Path, hostile) -> None:
    url = hostile("endless")
    done = run("manifest", "query", "--store", url, cwd=tmp_path)
    said = _refused(done, 2, url)
    assert "bytes" in said


@pytest.mark.parametrize("mode", ["trickle", "slow-headers"])
def test_an_http_store_sending_a_byte_at_a_time_meets_a_total_deadline(
    tmp_path: Path, hostile, mode: str
) -> None:
    url = hostile(mode)
    done = run("manifest", "query", "--store", url, cwd=tmp_path)
    _refused(done, 3, url, "3 s")


@pytest.mark.parametrize("kind", ["folder", "text file", "text file, executable"])
def test_check_env_given_a_python_that_is_no_program_is_bad_input(
    tmp_path: Path, kind: str
) -> None:
    from tests.pairing import built_manifest, write_manifest

    manifest = write_manifest(tmp_path, built_manifest(tmp_path / "dist" / "ref"), "m.json")
    python = tmp_path / "python"
    if kind == "folder":
        python.mkdir()
    else:
        python.write_text("this is not python\n")
        python.chmod(0o755 if "executable" in kind else 0o644)
    done = run("manifest", "check-env", "--manifest", str(manifest), "--python", str(python),
               cwd=tmp_path)  # fmt: skip
    said = _refused(done, 2, str(python))
    assert "[Errno" not in said


def test_check_env_given_a_lock_that_is_a_folder_is_bad_input(tmp_path: Path) -> None:
    from tests.pairing import built_manifest, write_manifest
    from vllm_plugin_release.core import attest
    from vllm_plugin_release.core.cache import sha256_file

    m = built_manifest(tmp_path / "dist" / "ref")
    manifest = write_manifest(tmp_path / "signed", m, "manifest.json")
    statement = attest.build_statement(
        m, sha256_file(manifest), {}, builder_id=attest.LOCAL_BUILDER
    )
    signed = attest.signed_bytes(statement, store_key(tmp_path))
    (manifest.parent / "manifest.intoto.jsonl").write_bytes(signed)
    lock = tmp_path / "lock"
    lock.mkdir()
    done = run("manifest", "check-env", "--manifest", str(manifest), "--lock", str(lock),
               "--python", sys.executable, cwd=tmp_path)  # fmt: skip
    said = _refused(done, 2, str(lock))
    assert "[Errno" not in said
