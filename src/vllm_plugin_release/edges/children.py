"""Long-running children belong to the run: builders, the local index, `vllm serve`.

Each is started in its own process group (`start_new_session=True`) and registered
here while it runs. On SIGINT or SIGTERM the CLI calls `stop_all()` before turning the
signal into the ordinary interrupted exit, so no group outlives the run. A run that is
SIGKILLed cannot stop anything: builders are therefore started behind a guard
(`guarded`) that the kernel signals when the run dies (Linux `PR_SET_PDEATHSIG`) and
that then kills its whole group; what else such a run leaves (pid files, owner-stamped
scratch folders) is cleaned up by the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every CLI command loads this module: `vpr scan-core` starts no process
    import subprocess

# Started as `python -c GUARD RUN_PID ARGV...` in a new session (so it leads the group):
# asks the kernel for SIGTERM when its parent dies, and on SIGTERM kills the group. A
# command killed by a signal ends the guard by the same signal, so the caller sees how
# it ended (not the exit status 256 - N).
GUARD = r"""
import ctypes, os, signal, subprocess, sys
def _die(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, _die)
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):  # the run died before the request took effect
    _die()
code = subprocess.call(sys.argv[2:])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def guarded(argv: list[str]) -> list[str]:
    """`argv` behind the death guard: its process group dies with this run, even when the
    run is SIGKILLed. The guard's exit status is the command's."""
    return [sys.executable, "-c", GUARD, str(os.getpid()), *argv]


_LOCK = threading.Lock()
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_SEQ: dict[int, int] = {}  # pid -> when it was registered (`mark`)
_COUNT = [0]
_STOPPING = threading.Event()


def register(proc: subprocess.Popen[bytes]) -> None:
    """`proc` leads its own process group and is stopped with the run."""
    with _LOCK:
        _LIVE[proc.pid] = proc
        _COUNT[0] += 1
        _SEQ[proc.pid] = _COUNT[0]
    if _STOPPING.is_set():  # started by another thread while the run is being stopped
        stop_all()


def forget(proc: subprocess.Popen[bytes]) -> None:
    with _LOCK:
        _LIVE.pop(proc.pid, None)
        _SEQ.pop(proc.pid, None)


def mark() -> int:
    """Now, for `stop_since`: the children registered after this call are newer."""
    with _LOCK:
        return _COUNT[0]


def kill_group(pgid: int, *, grace: float = 5.0) -> None:
    """SIGTERM the process group `pgid`, then SIGKILL what is left after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        _reap(pgid)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop_all() -> None:
    """Stop every registered group (SIGTERM, then SIGKILL), e.g. on SIGINT/SIGTERM."""
    with _LOCK:
        procs = list(_LIVE.values())
    _stop(procs)


def stop_since(since: int) -> int:
    """Stop the groups registered after `mark()` returned `since` (the children of work
    started then, whichever thread started them), not the older ones (an index server
    the command started before); how many were still running."""
    with _LOCK:
        procs = [p for pid, p in _LIVE.items() if _SEQ.get(pid, 0) > since]
    _stop(procs)
    return len(procs)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    import subprocess  # loaded already by whoever started a registered process

    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the leader left behind in its group
        forget(proc)


class Interrupted(BaseException):
    """The run was stopped by SIGINT or SIGTERM (exit 130).

    Not a KeyboardInterrupt on purpose: CPython remembers any KeyboardInterrupt that
    passes through code run by exec() or eval() (dataclasses and namedtuples run such
    code while a module is imported) as unhandled, and a `python -m` process then ends by
    SIGINT even after the CLI handled it and returned 130."""


def _interrupted(signum: int, frame: FrameType | None) -> None:
    _STOPPING.set()
    stop_all()
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def stopped_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop the children, then raise `Interrupted` (the clean
    interrupted exit); the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        _STOPPING.clear()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
