"""A function over a few shares of work side by side: the first share in this process,
each other one in a forked child, so a CPU-bound pass (the isolation scan) uses every
core without a new interpreter (a fork shares what is already imported and built).

Only from a process with one thread: a fork copies the locks other threads hold, so
with more than one thread (a live display, the conformance suite's checks) the shares
run one after another here instead. Results come back pickled over a pipe from a child
this process forked itself; a child that raises has its exception raised here (the
child's traceback in the message), a child that dies is a ChildProcessError. The
children are killed when this process stops early (Ctrl-C, SIGTERM, an exception in its
own share); one whose parent was killed outright ends when it writes its answer, as the
pipe then has no reader. (No PR_SET_PDEATHSIG: importing ctypes would slow scan-core's start.)
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

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
    """[fn(share) for share in shares], the shares side by side (see the module doc)."""
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
            _stop(pid, fd)


def _stop(pid: int, fd: int) -> None:
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
        _stop(pid, fd)
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
