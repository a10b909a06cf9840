"""The plugin's tests started ahead of conform (within `vpr release`, once the pairing
env's packages are in): conform takes that very run, whose result is the run it would
have made; a run started for another command is stopped and not used, and one nobody
takes is stopped with the release. Real pytest on tests/plugins/eager_runtime."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.unit import test_plugin_tests_absence
from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.edges import proc

PYTHON = Path(sys.executable)
CFG = pt.settings({"cpu": ["tests"], "absence_signatures": ["EagerSDKUnavailable"]})


plugin = test_plugin_tests_absence.plugin  # the synthetic plugin, copied; its src on the path


@pytest.fixture
def ahead():
    """The runs one walk started ahead; what nobody took stops at its end."""
    with proc.Ahead() as held:
        yield held


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / ".vpr")


def _scratch(cache: Cache) -> list[Path]:
    return sorted((cache.root / "tmp").glob("conform-tests-*"))


def _no_run_now(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = pt.run_tests

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pt, "run_tests", spy)
    return calls


def test_conform_takes_the_run_started_ahead_and_gets_the_same_result(
    plugin: Path, cache: Cache, ahead: proc.Ahead, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = pt.Suite(plugin, "cpu", CFG, "eager_sdk")
    now = pt.tests_run(cache, PYTHON, suite, None)
    calls = _no_run_now(monkeypatch)
    assert pt.start_ahead(ahead, cache, PYTHON, suite)
    pid = ahead.started()[0].popen.pid
    taken = pt.tests_run(cache, PYTHON, suite, ahead)
    assert calls == []  # known-bad first: no second run was made, the one ahead was taken
    assert taken.to_json() == now.to_json() and taken.counts["deferred"] == 1
    assert ahead.started() == [] and _scratch(cache) == [] and pid not in proc._LIVE


def test_a_run_started_for_another_command_is_stopped_not_used(
    plugin: Path, cache: Cache, ahead: proc.Ahead, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _no_run_now(monkeypatch)
    present = pt.Suite(plugin, "cpu", CFG, None)  # the runtime "present": another command
    assert pt.start_ahead(ahead, cache, PYTHON, present)
    started = ahead.started()[0]
    run = pt.tests_run(cache, PYTHON, pt.Suite(plugin, "cpu", CFG, "eager_sdk"), ahead)
    assert calls == [1]  # run now, for the command conform needs
    assert started.popen.returncode is not None and started.popen.pid not in proc._LIVE
    assert "tests/test_ops.py" in run.deferred and _scratch(cache) == []


def test_a_run_nobody_took_is_stopped(plugin: Path, cache: Cache, ahead: proc.Ahead) -> None:
    assert pt.start_ahead(ahead, cache, PYTHON, pt.Suite(plugin, "cpu", CFG, "eager_sdk"))
    started = ahead.started()[0]
    ahead.cancel()
    assert started.popen.returncode is not None and started.popen.pid not in proc._LIVE
    assert ahead.started() == [] and _scratch(cache) == []


def test_bad_input_starts_nothing_ahead(plugin: Path, cache: Cache, ahead: proc.Ahead) -> None:
    cfg = pt.settings({"cpu": ["no-such-tests"]})
    assert not pt.start_ahead(ahead, cache, PYTHON, pt.Suite(plugin, "cpu", cfg, "eager_sdk"))
    assert ahead.started() == [] and _scratch(cache) == []
    with pytest.raises(pt.BadInput, match="test paths not found"):  # conform says it
        pt.tests_run(cache, PYTHON, pt.Suite(plugin, "cpu", cfg, "eager_sdk"), ahead)
