"""edges/proc.Started: a command started now and waited for later, stopped with its whole
process group when it is past its time or cancelled, registered with the run meanwhile."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import OutsideFailure, TimedOut
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.proc import Started

pytestmark = pytest.mark.timeout(120)  # a hang fails with a stack; the tests wait on events

SPAWN_AND_WAIT = """
import subprocess, sys, time
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "w").write(str(kid.pid))
time.sleep(60)
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie (not reaped by its parent) is gone too
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def _wait_for(path: Path, started: Started) -> int:
    """The child's pid, once the command has written it (the event); a command that ended
    first fails here, and a hang is pytest-timeout's (the module's bound)."""
    while not (path.exists() and path.read_text()):
        assert started.popen.poll() is None, "the command ended without starting its child"
        time.sleep(0.02)
    return int(path.read_text())


def _spawning(tmp_path: Path, what: str) -> tuple[Started, int]:
    """A command that starts a child of its own and waits: (it, its child's pid)."""
    script = tmp_path / "spawn.py"
    script.write_text(SPAWN_AND_WAIT)
    started = Started(
        [sys.executable, str(script), str(tmp_path / "kid")], what=what, folder=tmp_path
    )
    return started, _wait_for(tmp_path / "kid", started)


def test_finish_gives_the_exit_status_and_both_outputs(tmp_path: Path) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    started = Started([sys.executable, "-c", code], what="a probe", folder=tmp_path)
    assert started.popen.pid in proc._LIVE  # stopped with the run on a signal
    done = started.finish(30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert started.popen.pid not in proc._LIVE


def test_a_command_killed_by_a_signal_says_so_through_the_guard(tmp_path: Path) -> None:
    """The death guard between us and the command ends by the command's signal: the caller
    reads -11 (SIGSEGV), as from the command itself, not the guard's exit status 245."""
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    started = Started([sys.executable, "-c", code], what="a probe", folder=tmp_path)
    assert started.finish(30).returncode == -signal.SIGSEGV


def test_past_its_time_the_whole_group_is_stopped(tmp_path: Path) -> None:
    started, kid = _spawning(tmp_path, "a slow probe")
    with pytest.raises(TimedOut, match=r"a slow probe did not finish within 0\.5 s"):
        started.finish(0.5)
    assert started.popen.returncode is not None and _gone(kid)
    assert started.popen.pid not in proc._LIVE


def test_cancel_stops_the_group_and_leaves_an_ended_command_alone(tmp_path: Path) -> None:
    started, kid = _spawning(tmp_path, "a probe")
    started.cancel()
    assert started.popen.returncode is not None and _gone(kid)
    ended = Started([sys.executable, "-c", "pass"], what="a probe", folder=tmp_path)
    assert ended.finish(30).returncode == 0
    ended.cancel()  # nothing to stop: no signal for a group id that may be reused
    assert ended.popen.returncode == 0


def test_a_command_that_cannot_start_is_an_outside_failure(tmp_path: Path) -> None:
    with pytest.raises(OutsideFailure, match="cannot start"):
        Started([str(tmp_path / "no-such-program")], what="a probe", folder=tmp_path)


def test_every_long_lived_child_is_spawned_the_same_way(tmp_path: Path) -> None:
    """`spawn`, behind the runner's commands, the warm worker, the local index and `vllm
    serve`: its own session, registered with the run; a missing program is an outside
    failure naming what was being started, with or without the death guard."""
    from vllm_plugin_release.edges import proc
    from vllm_plugin_release.edges.proc import spawn

    for guard in (True, False):
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        popen = spawn(sleeper, what="a probe", stdout=None, guard=guard)
        try:
            assert os.getpgid(popen.pid) == popen.pid  # leads its own group
            assert popen.pid in proc._LIVE  # stopped with the run on a signal
        finally:
            proc.forget(popen)
            proc.kill_group(popen.pid, grace=0)
            popen.wait(30)
        with pytest.raises(OutsideFailure, match=r"a probe: cannot start .*no-such-program"):
            spawn([tmp_path / "no-such-program"], what="a probe", stdout=None, guard=guard)
    with pytest.raises(OutsideFailure, match="vllm serve: cannot start"):
        proc.start_server([str(tmp_path / "no-such-vllm")], {}, tmp_path / "proc.log")


def test_a_build_command_that_cannot_start_is_an_outside_failure(tmp_path: Path) -> None:
    """Before, the death guard started in its place and failed with a traceback in the
    log: a gate failure (exit 1) that blamed the build."""
    from vllm_plugin_release.edges.runner import Command, LocalRunner

    command = Command(label="build wheel", argv=(str(tmp_path / "no-such-tool"), "--version"))
    with pytest.raises(OutsideFailure, match=r"build wheel: cannot start .*no-such-tool"):
        LocalRunner("off").run(command, tmp_path / "logs" / "build.log")
