"""The run's child processes: `run`, and `spawn` (the one start of a child that outlives the
call); the registry that stops them all with the run; forked shares of a CPU-bound pass;
temporary folders a killed run leaves to the next; and a `vllm serve` server."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from vllm_plugin_release.core.cache import OWNER_FILE, owner_alive, owner_stamp, remove_tree
from vllm_plugin_release.core.errors import OutsideFailure, TimedOut


def inherited(*, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a child, without the variables named in `drop`."""
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(
    argv: Sequence[str | Path],
    *,
    what: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to completion with its output captured as text; never raises on exit status."""
    try:
        return subprocess.run(
            [str(a) for a in argv],
            cwd=cwd,
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        told = _text(exc.stdout) + _text(exc.stderr)
        raise TimedOut(f"{what} did not finish within {timeout:g} s", output=told) from None
    except OSError as exc:
        raise OutsideFailure(f"{what}: cannot start {argv[0]!s}: {exc.strerror or exc}")


def ended(returncode: int | None) -> str:
    """How a process ended, from its exit status (negative: the signal that killed it)."""
    if returncode is not None and returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited {returncode}"


def _text(output: bytes | str | None) -> str:
    """What a timed-out command had written (subprocess gives bytes, even for text=True)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


# Wide on purpose: stdout/stderr/stdin/env/cwd are subprocess.Popen's own independent options.
def spawn(
    argv: Sequence[str | Path],
    *,
    what: str,
    stdout: Any,
    stderr: Any = subprocess.STDOUT,
    stdin: Any = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    guard: bool = True,
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own process group, registered with the run; `guard`: behind the death
    guard. A program that cannot be started is an outside failure naming `what`."""
    args = [str(a) for a in argv]
    if guard and shutil.which(args[0]) is None:
        raise OutsideFailure(f"{what}: cannot start {args[0]}: no such program")
    try:
        popen = subprocess.Popen(
            guarded(args) if guard else args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except OSError as exc:
        raise OutsideFailure(f"{what}: cannot start {args[0]}: {exc.strerror or exc}") from None
    register(popen)
    return popen


class Started:
    """A command started now and waited for later (`finish`), or stopped (`cancel`); its output
    goes to two files in `folder`, which must outlive it."""

    def __init__(
        self,
        argv: Sequence[str | Path],
        *,
        what: str,
        folder: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        background: bool = False,
    ) -> None:
        self.what = what
        self.argv = [str(a) for a in argv]
        self.started = time.monotonic()
        self._out, self._err = folder / "stdout.txt", folder / "stderr.txt"
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self.popen = spawn(self.argv, what=what, stdout=out, stderr=err, env=env, cwd=cwd)
        if background:  # the whole group: the guard and the command it starts
            with contextlib.suppress(OSError, AttributeError):  # not on every platform
                os.setpriority(os.PRIO_PGRP, self.popen.pid, 19)

    def finish(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Its exit status and output, once it ends; `timeout` counts from its start (an
        outside failure past it, the command stopped)."""
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - self.started))
        try:
            code = self.popen.wait(left)
        except subprocess.TimeoutExpired:
            self.cancel()
            told = "".join(p.read_text(errors="replace") for p in (self._out, self._err))
            raise TimedOut(
                f"{self.what} did not finish within {timeout:g} s", output=told
            ) from None
        forget(self.popen)
        out, err = (p.read_text(errors="replace") for p in (self._out, self._err))
        return subprocess.CompletedProcess(self.argv, code, out, err)

    def cancel(self) -> None:
        """Stop its whole group (SIGTERM, then SIGKILL) and reap it, unless it has ended."""
        if self.popen.poll() is None:
            kill_group(self.popen.pid, grace=2.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(5)
        forget(self.popen)


@dataclass
class Taken:
    """A run started ahead, taken by the step it was started for: read its result
    (`started.finish`), then `close` it."""

    started: Started
    scratch: contextlib.ExitStack  # the folder its output goes to
    data: Any = None  # what the starter noted for the taker

    def close(self) -> None:
        """Stop it unless it has ended, and remove its folder."""
        try:
            self.started.cancel()
        finally:
            self.scratch.close()


class Ahead:
    """Commands started before the step that wants their result, held under its name and a key
    saying exactly what runs; leaving the `with` block stops every run nobody took."""

    def __init__(self) -> None:
        self._runs: list[tuple[str, object, Taken]] = []

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def add(
        self,
        step: str,
        key: object,
        started: Started,
        scratch: contextlib.ExitStack,
        data: Any = None,
    ) -> None:
        self._runs.append((step, key, Taken(started, scratch, data)))

    def started(self) -> list[Started]:
        """The runs held now."""
        return [run.started for _, _, run in self._runs]

    def take(self, step: str, key: object, *, ended: bool = False) -> Taken | None:
        """The run started for `step` with `key` (with `ended`: only if it has ended),
        which the caller closes; every other run for `step` is stopped."""
        found = None
        try:
            for at in reversed(range(len(self._runs))):
                held_step, held, run = self._runs[at]
                if held_step != step:
                    continue
                del self._runs[at]
                if (
                    found is None
                    and held == key
                    and (not ended or run.started.popen.poll() is not None)
                ):
                    found = run
                else:
                    run.close()
        except BaseException:
            if found is not None:
                found.close()
            raise
        return found

    def cancel(self, step: str | None = None) -> None:
        """Stop every run held (for `step` only, when given)."""
        for at in reversed(range(len(self._runs))):
            if step is None or self._runs[at][0] == step:
                self._runs.pop(at)[2].close()


def ask_python(python: Path, code: str, *, what: str) -> str | None:
    """What `python -c code` prints (stripped), or None when it exits non-zero."""
    done = run([python, "-c", code], what=what)
    return done.stdout.strip() if done.returncode == 0 else None


def copy_tree(src: Path, dst: Path) -> None:
    """`src` copied to the new folder `dst`, links as links, times and modes kept; with `cp -a`
    where there is one, so copies made from threads run side by side outside the GIL."""
    cp = shutil.which("cp")
    if cp is None:
        shutil.copytree(src, dst, symlinks=True)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)  # as copytree does
    done = run([cp, "-a", "--", src, dst], what=f"copying {src}")
    if done.returncode != 0:
        raise OutsideFailure(f"copying {src} to {dst} failed: {done.stderr.strip()[-500:]}")


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
    """Stop the groups registered after `mark()` returned `since`, not the older ones (an index
    server the command started before); how many were still running."""
    with _LOCK:
        procs = [p for pid, p in _LIVE.items() if _SEQ.get(pid, 0) > since]
    _stop(procs)
    return len(procs)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
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
    """The run was stopped by SIGINT or SIGTERM (exit 130). Not a KeyboardInterrupt on purpose:
    CPython remembers one passing through exec()'d code as unhandled, and `python -m` then ends by
    SIGINT."""


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


T = TypeVar("T")
R = TypeVar("R")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call here
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """A fork is safe here: the call exists and this process runs one thread."""
    return hasattr(os, "fork") and threading.active_count() == 1


def forked_map(fn: Callable[[T], R], shares: Sequence[T]) -> list[R]:
    """[fn(share) for share in shares], the first here and each other in a forked child (only with
    one thread: a fork copies other threads' locks); a child that dies: ChildProcessError."""
    if len(shares) <= 1 or not can_fork():
        return [fn(share) for share in shares]
    kids: list[tuple[int, int]] = []  # (pid, read end of its pipe), not yet collected
    try:
        for share in shares[1:]:
            kids.append(_fork(fn, share))
        results = [fn(shares[0])]
        while kids:
            results.append(_collect(*kids.pop(0)))
        return results
    finally:
        for pid, fd in kids:  # stopped early: the children still out are killed
            _stop_share(pid, fd)


def _stop_share(pid: int, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _fork(fn: Callable[[T], R], share: T) -> tuple[int, int]:
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child never leaves this block: it ends here, whatever happens
        try:
            os.close(read)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent's handlers are its own
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            data = _outcome(fn, share)
            with os.fdopen(write, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)  # no interpreter teardown in the child
    os.close(write)
    return pid, read


def _outcome(fn: Callable[[T], R], share: T) -> bytes:
    """(True, result) or (False, the exception, else its text), pickled."""
    try:
        return pickle.dumps((True, fn(share)))
    except BaseException as exc:  # every failure goes to the parent
        import traceback

        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-8)}"
        if isinstance(exc, Exception):
            try:
                data = pickle.dumps((False, exc))
                pickle.loads(data)  # some pickle but do not load (an __init__ of their own)
                return data
            except Exception:  # such an exception goes back as its text
                pass
        return pickle.dumps((False, text))


def _collect(pid: int, fd: int) -> object:
    """The child's result (its exception raised here); the pipe is closed, the child reaped
    (killed first when this is stopped while it reads)."""
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):  # to the end first: a full pipe blocks the child
            chunks.append(chunk)
    except BaseException:
        _stop_share(pid, fd)
        raise
    os.close(fd)
    data = b"".join(chunks)
    _, status = os.waitpid(pid, 0)
    if not data:
        raise ChildProcessError(f"a forked worker died ({_status(status)})")
    ok, value = pickle.loads(data)
    if ok:
        return value
    if isinstance(value, Exception):
        raise value
    raise ChildProcessError(f"a forked worker failed: {value}")


def _status(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"killed by signal {-code}" if code < 0 else f"exit {code}"


_MAX_OWNER_BYTES = 64  # "pid start-time": a longer file is not ours
_swept: set[tuple[str, str]] = set()  # (root, prefix): once a process is enough


def sweep_owned_tmp(prefix: str, root: Path | None = None) -> int:
    """Remove the folders `root/prefix*` of runs that are gone (this user's, owner process no longer
    running); how many. Errors are ignored: this is tidying."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            fd = os.open(Path(entry.path) / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                text = os.read(fd, _MAX_OWNER_BYTES + 1)
            finally:
                os.close(fd)
        except OSError:
            continue
        if len(text) <= _MAX_OWNER_BYTES and not owner_alive(text.decode("ascii", "replace")):
            remove_tree(Path(entry.path), ignore_errors=True)
            removed += not os.path.lexists(entry.path)
    return removed


def owned_tmp(prefix: str, root: Path | None = None) -> Path:
    """A new private folder `prefix*` in `root` marked as this process's, after removing (once a
    process) the folders of that prefix that killed runs left."""
    if (str(root), prefix) not in _swept:
        _swept.add((str(root), prefix))
        sweep_owned_tmp(prefix, root)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (folder / OWNER_FILE).write_text(owner_stamp())
    return folder


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session, stdout and stderr into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:  # no death guard: `stop` asks the server to end, politely
        return spawn(argv, what="vllm serve", stdout=out, env=env, guard=False)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session (its process group), politely first."""
    forget(proc)
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


def server_healthy(port: int) -> bool:
    """Whether the server on loopback `port` answers /health with 200."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log ('' when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


PROBE_SECONDS = 10.0


@functools.lru_cache(maxsize=1)
def can_unshare_network() -> bool:
    """True when `unshare -n` works here (root or user namespaces)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return False
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    try:
        pid = os.posix_spawn(unshare, [unshare, "-n", "true"], os.environ, file_actions=quiet)
    except OSError:
        return False
    deadline = time.monotonic() + PROBE_SECONDS
    delay = 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:  # a probe that hangs: no isolation
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
