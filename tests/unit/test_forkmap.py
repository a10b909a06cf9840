"""edges/proc: shares of work side by side in forked children, results in order, a
child's failure raised here, nothing left running when the caller stops early, and no
fork at all from a process that runs more than one thread."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.proc import can_fork, forked_map, usable_cores


def _pid_and_sum(share: list[int]) -> tuple[int, int]:
    return os.getpid(), sum(share)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_shares_run_in_forked_children_and_come_back_in_order() -> None:
    assert can_fork()
    out = forked_map(_pid_and_sum, [[1, 2], [3], [4, 5, 6]])
    assert [total for _, total in out] == [3, 3, 15]
    pids = [pid for pid, _ in out]
    assert pids[0] == os.getpid()  # the first share runs here
    assert len(set(pids)) == 3  # each other one in its own child
    assert not any(_exists(pid) for pid in pids[1:])  # and every child is reaped


def test_with_another_thread_running_the_shares_run_here_one_after_another() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
        out = forked_map(_pid_and_sum, [[1], [2], [3]])
    finally:
        stop.set()
        thread.join()
    assert out == [(os.getpid(), 1), (os.getpid(), 2), (os.getpid(), 3)]


def _bad_in_child(share: int) -> int:
    if share == 1:
        raise BadInput("member x cannot be read", hint="rebuild the wheel")
    return share


def test_a_childs_exception_is_raised_here_as_its_own_class() -> None:
    with pytest.raises(BadInput) as caught:
        forked_map(_bad_in_child, [0, 1])
    assert "member x cannot be read" in str(caught.value)
    assert caught.value.hint == "rebuild the wheel"


class _Unpicklable(Exception):
    def __init__(self, a: str, b: str) -> None:  # pickle calls cls(*args): one arg, fails
        super().__init__(a)
        self.b = b


def _raise_unpicklable(share: int) -> int:
    if share:
        raise _Unpicklable("cannot pickle me", "x")
    return share


def test_an_exception_that_does_not_pickle_comes_back_as_its_text() -> None:
    with pytest.raises(ChildProcessError, match=r"_Unpicklable: cannot pickle me"):
        forked_map(_raise_unpicklable, [0, 1])


def _die(share: int) -> int:
    if share:
        os.kill(os.getpid(), signal.SIGKILL)
    return share


def test_a_child_that_dies_is_an_error_not_a_missing_result() -> None:
    with pytest.raises(ChildProcessError, match="killed by signal 9"):
        forked_map(_die, [0, 1])


def test_stopping_early_kills_and_reaps_the_children(tmp_path) -> None:
    pidfile = tmp_path / "child"

    def slow_or_fail(share: int) -> int:
        if share:  # the child: says who it is, then works for a long time
            part = pidfile.with_suffix(".part")
            part.write_text(str(os.getpid()))
            part.rename(pidfile)
            time.sleep(20)
            return share
        while not pidfile.exists():  # this process: fails once the child is up
            pass
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        forked_map(slow_or_fail, [0, 1])
    child = int(pidfile.read_text())
    assert not _exists(child)  # killed and reaped: not even a zombie is left


def test_one_share_or_none_needs_no_fork() -> None:
    assert forked_map(_pid_and_sum, [[7]]) == [(os.getpid(), 7)]
    assert forked_map(_pid_and_sum, []) == []


def test_usable_cores_follows_the_affinity() -> None:
    assert usable_cores() == len(os.sched_getaffinity(0))
