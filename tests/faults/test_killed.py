"""A killed run leaves nothing running and nothing behind.

Every wait here is for an event (a file the child writes, a line it prints, a process
ending), never a fixed short timeout and never a measured time: on a busy machine each
step takes what it takes. Each test's pytest timeout, generous, ends a hang with a stack.

SIGTERM takes the Ctrl-C path: the builders' process groups and the local index are
stopped and the scratch folder removed. After a SIGKILL the next run removes what was
left: owner-stamped scratch folders, `.part` downloads, the pypiserver of the pid file.
An index that accepts and never answers prints waiting lines and fails with exit 3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.integration.test_build_core import tiny_spec
from tests.support import REPO, Index, serve_in_thread, vpr

# setup.py of the tiny core: leaves a marker, then builds for a minute
SLOW_STAMP = '(open(r"{marker}", "a").write("x"), __import__("time").sleep(60), "S = 1\\n")[2]'


def _start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _wait_for(condition, what: str, child: subprocess.Popen[str] | None = None) -> None:
    """Wait for an event: until `condition()` holds. No time limit of its own (a loaded
    machine takes what it takes; the test's pytest timeout ends a hang, with a stack);
    when `child` ends first, fail at once with what it said."""
    while not condition():
        if child is not None and child.poll() is not None:
            _, stderr = child.communicate()
            raise AssertionError(
                f"the run ended (exit {child.returncode}) before {what}:\n{stderr[-3000:]}"
            )
        time.sleep(0.05)


def _alive(pids: set[int]) -> set[int]:
    """The pids of `pids` that still run (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            out.add(pid)
    return out


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def index():
    idx = Index()
    yield idx
    idx.close()


def _slow_build(tmp_path: Path, index: Index, sig: int):
    """`vpr build-core` of a tiny core whose setup.py sleeps, hit by `sig` mid-build:
    (the finished child, its stderr, its builders seen while it ran, the folder of its
    scratch: in memory, `$VPR_BUILD_SCRATCH/vpr-<uid>`, here under tmp_path)."""
    marker = tmp_path / "building"
    spec = tiny_spec(tmp_path, index, stamp=SLOW_STAMP.format(marker=marker))
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    (tmp_path / "ram").mkdir()
    scratch = tmp_path / "ram" / f"vpr-{os.getuid()}"
    child = _start(
        "build-core", "--spec", str(spec), "--dist", str(tmp_path / "dist"),
        "--cache-dir", str(cache), cwd=tmp_path, env=_ram_env(tmp_path),
    )  # fmt: skip
    try:
        _wait_for(marker.exists, "the tiny build started", child)
        builders = _descendants(child.pid)
        assert builders, "no builder processes seen"
        assert list(scratch.glob("build-core-*"))
        assert not list((cache / "tmp").glob("build-core-*"))
        child.send_signal(sig)
        _, stderr = child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
    return child, stderr, builders, scratch


def _ram_env(tmp_path: Path) -> dict[str, str]:
    return {"VPR_BUILD_SCRATCH": str(tmp_path / "ram")}


@pytest.mark.timeout(600)
def test_sigterm_stops_builders_and_removes_scratch(tmp_path: Path, index: Index) -> None:
    child, stderr, builders, scratch = _slow_build(tmp_path, index, signal.SIGTERM)
    try:
        assert child.returncode == 130, stderr
        assert "interrupted" in stderr and "Traceback" not in stderr
        # the run stopped its builders' groups before it ended: they end (an event; were
        # one left running, the test's timeout would end it with a stack)
        _wait_for(lambda: not _alive(builders), "the builders of the stopped run ended")
        assert not list(scratch.glob("build-core-*"))
    finally:
        _kill_all(builders)


@pytest.mark.timeout(600)
def test_after_sigkill_the_next_run_removes_the_scratch(tmp_path: Path, index: Index) -> None:
    _, _, builders, scratch = _slow_build(tmp_path, index, signal.SIGKILL)
    try:
        # the death guard stops the builders although the run itself was SIGKILLed
        _wait_for(lambda: not _alive(builders), "the builders of the SIGKILLed run ended")
    finally:
        _kill_all(builders)
    assert list(scratch.glob("build-core-*")), "the killed run left no scratch?"
    spec = tmp_path / "project" / "buildspec" / "tiny.toml"
    cache = tmp_path / ".vpr"
    vpr(
        "fetch",
        "--spec",
        str(spec),
        "--cache-dir",
        str(cache),
        cwd=tmp_path,
        env=_ram_env(tmp_path),
    )
    assert not list(scratch.glob("build-core-*"))


# -- a download killed half way -------------------------------------------------------------


class _StallingIndex:
    """A simple index whose file download sends half the bytes and then stalls."""

    def __init__(self, data: bytes) -> None:
        release = self.release = threading.Event()
        sha = hashlib.sha256(data).hexdigest()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/simple/vllm/":
                    files = [
                        {"filename": "vllm-0.0.1.tar.gz", "url": "/f", "hashes": {"sha256": sha}}
                    ]
                    body = json.dumps({"files": files}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                release.wait(30)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_killed_download_leaves_no_part_file(tmp_path: Path, index: Index, sig: int) -> None:
    """SIGTERM: the run removes its .part; SIGKILL: the next run removes it."""
    spec = tiny_spec(tmp_path, index, stamp='"S = 1\\n"')
    data = index.files["vllm-0.0.1.tar.gz"]
    data += b"\0" * (1 << 21)  # big enough that half of it reaches the .part file
    index.files["vllm-0.0.1.tar.gz"] = data
    text = spec.read_text().replace(index.url, "INDEX")
    old_sha = text.split('sha256 = "', 1)[1].split('"', 1)[0]
    text = text.replace(old_sha, hashlib.sha256(data).hexdigest())
    stalling = _StallingIndex(data)
    cache = tmp_path / ".vpr"
    try:
        spec.write_text(text.replace("INDEX", stalling.url))
        child = _start("fetch", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
        try:
            _wait_for(lambda: any((cache / "tmp").glob("*.part.*")), "a .part file", child)
            child.send_signal(sig)
            _, stderr = child.communicate()
        finally:
            if child.poll() is None:
                child.kill()
    finally:
        stalling.close()
    if sig == signal.SIGTERM:
        assert child.returncode == 130, stderr
        assert not list((cache / "tmp").glob("*.part.*"))
        return
    assert list((cache / "tmp").glob("*.part.*")), "the killed download left no .part?"
    spec.write_text(text.replace("INDEX", index.url))
    vpr("fetch", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    assert not list((cache / "tmp").glob("*.part.*"))


@pytest.mark.timeout(300)
def test_stalled_download_times_out_with_waiting_lines(tmp_path: Path, index: Index) -> None:
    spec = tiny_spec(tmp_path, index, stamp='"S = 1\\n"')
    data = index.files["vllm-0.0.1.tar.gz"] + b"\0" * (1 << 21)
    text = spec.read_text()
    old_sha = text.split('sha256 = "', 1)[1].split('"', 1)[0]
    stalling = _StallingIndex(data)
    cache = tmp_path / ".vpr"
    try:
        text = text.replace(old_sha, hashlib.sha256(data).hexdigest())
        spec.write_text(text.replace(index.url, stalling.url))
        done = vpr(
            "fetch", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path,
            env={"VPR_NET_TIMEOUT": "3", "VPR_NET_HEARTBEAT": "1"}, check=False,
        )  # fmt: skip
    finally:
        stalling.close()
    assert done.returncode == 3, done.stderr
    _gave_up_once(done.stderr, limit=3, beat=1)
    assert "Traceback" not in done.stderr
    assert not list((cache / "tmp").glob("*.part.*"))


def _gave_up_once(said: str, *, limit: float, beat: float) -> None:
    """The run's own account of a wait (no clock of the test's): it gave up once the limit
    had passed, saying how long it waited, after at most one waiting line a heartbeat (a
    wait started again, or not given up, would say more)."""
    waited = [float(s) for s in re.findall(r"no answer after waiting (\d+) s", said)]
    assert waited and waited[0] >= limit, said
    lines = re.findall(r"vpr: waiting for \S+ \((\d+) s so far\)", said)
    assert 1 <= len(lines) <= limit / beat, said
    assert all(float(s) <= limit for s in lines), said  # (rounded to whole seconds)


# -- the local index (pypiserver) -----------------------------------------------------------

HOLD_INDEX = """
import sys, time
from pathlib import Path
from vllm_plugin_release.edges.index import LocalIndex
server = LocalIndex(Path(sys.argv[1]))
server.start()
print(server.process.pid, flush=True)
time.sleep(60)
"""

# the CLI's way: SIGINT/SIGTERM stop the run's children and exit through KeyboardInterrupt
HOLD_INDEX_IN_A_RUN = """
import sys, time
from pathlib import Path
from vllm_plugin_release.edges.proc import stopped_on_signals
from vllm_plugin_release.edges.index import LocalIndex
with stopped_on_signals():
    try:
        server = LocalIndex(Path(sys.argv[1]))
        server.start()
        print(server.process.pid, flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        sys.exit(130)
"""


def _hold_index(root: Path, script: str = HOLD_INDEX) -> tuple[subprocess.Popen[str], int]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(root)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    line = child.stdout.readline() if child.stdout else ""
    assert line.strip().isdigit(), "the local index did not start"
    return child, int(line)


@pytest.mark.timeout(300)
def test_sigterm_stops_the_local_index(tmp_path: Path) -> None:
    child, server = _hold_index(tmp_path / "index", HOLD_INDEX_IN_A_RUN)
    try:
        child.send_signal(signal.SIGTERM)
        child.wait()
        _wait_for(lambda: not _running(server), "pypiserver ended with the run")
    finally:
        child.kill()
        _kill_all({server})


@pytest.mark.timeout(300)
def test_after_sigkill_the_next_start_stops_the_recorded_index(tmp_path: Path) -> None:
    from vllm_plugin_release.edges.index import LocalIndex

    root = tmp_path / "index"
    child, server = _hold_index(root)
    try:
        child.kill()
        child.wait()
        assert _running(server), "the SIGKILLed run's pypiserver should still be there"
        with LocalIndex(root):
            assert not _running(server), "the recorded pypiserver was not stopped"
        assert not (tmp_path / "index-server.pid").exists()
    finally:
        _kill_all({server})


# -- an index that accepts and never answers ------------------------------------------------


@pytest.mark.timeout(300)
def test_silent_index_times_out_with_waiting_lines(tmp_path: Path, index: Index) -> None:
    spec = tiny_spec(tmp_path, index, stamp='"S = 1\\n"')
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nobody ever answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        spec.write_text(spec.read_text().replace(index.url, url))
        done = vpr(
            "fetch", "--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"), cwd=tmp_path,
            env={"VPR_NET_TIMEOUT": "3", "VPR_NET_HEARTBEAT": "1"}, check=False,
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert f"{url}/vllm/" in done.stderr, done.stderr
    _gave_up_once(done.stderr, limit=3, beat=1)
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(120)
def test_silent_index_query_gives_up_naming_url_and_wait(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The publish side (`edges/index.py`): a Transient naming the URL and the wait, which
    publish's retries turn into exit 3."""
    from vllm_plugin_release.edges.index import Transient, remote_sha256

    monkeypatch.setenv("VPR_NET_TIMEOUT", "2")
    monkeypatch.setenv("VPR_NET_HEARTBEAT", "0.5")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple/"
        with pytest.raises(Transient) as caught:
            remote_sha256(url, "demo", "demo-1.0-py3-none-any.whl")
    assert f"{url}demo/" in str(caught.value)
    _gave_up_once(f"{capfd.readouterr().err}\n{caught.value}", limit=2, beat=0.5)


# A signal that lands while code run by exec() or eval() is on the stack: CPython then
# remembers an "unhandled" KeyboardInterrupt even once the CLI has handled it, and ends the
# process by SIGINT (-2) instead of the documented 130. Dataclasses and namedtuples exec
# code when a module is first imported, so a signal during a lazy import hit this in CI.
INTERRUPTED_IN_EXEC = r"""
import sys
from vllm_plugin_release import cli

def hang(args):
    exec("import os, signal, time\nos.kill(os.getpid(), signal.SIG{sig})\n"
         "while True:\n    time.sleep(0.01)\n")

built = cli.build_parser
def with_hang():
    parser = built()
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.add_parser("hang").set_defaults(func=hang)
    return parser
cli.build_parser = with_hang
sys.exit(cli.main(["hang"]))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", ["TERM", "INT"])
def test_a_signal_inside_exec_code_still_exits_130(tmp_path: Path, sig: str) -> None:
    # run as `python -m`, like the installed `vpr`: `python -c` exits another way
    (tmp_path / "hang_in_exec.py").write_text(INTERRUPTED_IN_EXEC.format(sig=sig))
    done = subprocess.run(
        [sys.executable, "-m", "hang_in_exec"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "interrupted; nothing was published" in done.stderr
    assert "Traceback" not in done.stderr
