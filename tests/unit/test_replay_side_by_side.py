"""The schedulers' replays: one in-env run imports vLLM once, then replays each scheduler
in its own forked child, side by side, the results in the request's order.

`forked` is tested here with plain functions (the real replays need vLLM:
tests/integration/test_replay_in_env.py); the host side with a test double of the
in-env run, which checks what is asked of it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.edges import envrun
from vllm_plugin_release.inenv import replay as inenv_replay
from vllm_plugin_release.replay import config, mix, runner


def _job() -> runner.ReplayJob:
    """A replay of four requests, each scheduler bounded to 60 s."""
    request_mix = mix.RequestMix((0.0,) * 4, (5,) * 4, (2,) * 4, 0)
    return runner.ReplayJob(
        request_mix, config.resolve({"policy": "reference", "timeout_s": 60}, Path("."))
    )


def _meet(folder: Path, me: str, other: str) -> dict[str, Any]:
    """In a child: say it runs, and wait (10 s at most) until the other one runs too."""
    (folder / me).write_text(str(os.getpid()))
    deadline = time.monotonic() + 10
    while not (folder / other).exists():
        if time.monotonic() > deadline:
            return {"me": me, "met": False}
        time.sleep(0.01)
    return {"me": me, "met": True, "pid": os.getpid()}


def test_each_scheduler_replays_in_its_own_child_at_the_same_time(
    tmp_path: Path, monkeypatch
) -> None:
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    results = inenv_replay.forked(
        [
            lambda: _meet(tmp_path, "plugin", "upstream"),
            lambda: _meet(tmp_path, "upstream", "plugin"),
        ]
    )
    assert [r["me"] for r in results] == ["plugin", "upstream"]  # the calls' order
    assert all(r["met"] for r in results)  # a child that waited for the other to end would not
    assert len({r["pid"] for r in results} | {os.getpid()}) == 3
    assert not list((tmp_path / "tmp").iterdir())  # the children's result files are gone


def test_bad_input_in_a_child_is_raised_in_the_run() -> None:
    def bad() -> dict[str, Any]:
        raise inenv_replay.BadRequest("m:plugin is not a vLLM scheduler")

    with pytest.raises(inenv_replay.BadRequest, match="not a vLLM scheduler"):
        inenv_replay.forked(
            [lambda: {"fine": True}, bad], (inenv_replay.BadRequest, inenv_replay.ImportFailure)
        )


def test_a_child_that_dies_fails_the_run() -> None:
    def dies() -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGKILL)
        return {}

    with pytest.raises(RuntimeError, match="status"):
        inenv_replay.forked([dies, lambda: {"fine": True}])


@pytest.mark.parametrize(("cores", "together", "timeout"), [(2, True, 360), (1, False, 420)])
def test_the_host_asks_one_run_side_by_side_where_there_are_cores(
    monkeypatch, cores: int, together: bool, timeout: int
) -> None:
    monkeypatch.setattr(runner, "_cores", lambda: cores)
    asked: list[tuple[dict[str, Any], float]] = []

    def in_env(python, job, *, timeout=None, **_: Any) -> None:  # double
        asked.append((job.to_json(), timeout))

    monkeypatch.setattr(envrun, "run_in_env", in_env)
    runner.side_by_side(Path("python"), _job())
    ((request, asked_timeout),) = asked
    assert [s["label"] for s in request["schedulers"]] == ["plugin", "upstream"]
    assert request["side_by_side"] is together and asked_timeout == timeout


def test_a_result_that_cannot_be_sent_back_fails_the_run(tmp_path: Path) -> None:
    """The child must end inside `forked` whatever happens there: a result that is not
    JSON is a failure of the run, not a second copy of the caller going on."""
    marker = tmp_path / "went-on"
    with pytest.raises(RuntimeError, match="not JSON serializable"):
        inenv_replay.forked([lambda: {"value": object()}, lambda: {"fine": True}])
        marker.write_text(str(os.getpid()))  # only a child that escaped would get here
    time.sleep(0.2)
    assert not marker.exists()
