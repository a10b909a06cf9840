"""A `vllm serve` process: a free port, start in its own session, /health, stop, log tail."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from vllm_plugin_release.edges import children
from vllm_plugin_release.edges.proc import spawn


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session, stdout and stderr into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:  # no death guard: `stop` asks the server to end, politely
        return spawn(argv, what="vllm serve", stdout=out, env=env, guard=False)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session (its process group), politely first."""
    children.forget(proc)
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def healthy(port: int) -> bool:
    """Whether the server on loopback `port` answers /health with 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log ('' when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
