"""The plugin's pytest run (`pytest_command`) is `python -m pytest` without the
interpreter's teardown: the same tests, outcomes, exit code, junit file and sys.path
(the working folder first, as -m puts it), and no atexit hook runs after pytest returns.
Real pytest in a real subprocess on a toy plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.edges import proc

CONFTEST = """\
import atexit, pathlib
atexit.register(lambda: pathlib.Path("{mark}").write_text("torn down"))
"""
TESTS = """\
import json, os, sys
import helper  # at the working folder's top: found only with it on sys.path

def test_path_is_as_with_dash_m():
    with open(os.environ["TOY_PATH_OUT"], "w") as f:
        json.dump(sys.path, f)
    assert helper.VALUE == 1

def test_fails():
    assert {fails} is False
"""


def _toy(tmp_path: Path, fails: bool) -> Path:
    root = tmp_path / "plugin"
    (root / "tests").mkdir(parents=True)
    (root / "helper.py").write_text("VALUE = 1\n")
    (root / "tests" / "conftest.py").write_text(CONFTEST.format(mark=tmp_path / "mark"))
    (root / "tests" / "test_toy.py").write_text(TESTS.format(fails=fails))
    return root


def _run(root: Path, argv: list[str], path_out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOY_PATH_OUT": str(path_out)}
    return subprocess.run(
        argv, cwd=root, env=env, capture_output=True, text=True, check=False, timeout=120
    )


@pytest.mark.parametrize(("fails", "code"), [(False, 0), (True, 1)])
def test_the_run_is_pytests_own_and_ends_without_teardown(
    tmp_path: Path, fails: bool, code: int
) -> None:
    root = _toy(tmp_path, fails)
    junit = tmp_path / "j.xml"
    argv = pt.pytest_command(Path(sys.executable), root, ["tests"], [], junit)
    done = _run(root, argv, tmp_path / "path.json")
    assert done.returncode == code, done.stdout + done.stderr
    counts, _, _ = pt.classify_junit(junit, pt.Deferrals())
    assert counts["passed"] == 2 - fails and counts["failed"] == int(fails)
    assert ("1 failed, 1 passed" if fails else "2 passed") in done.stdout
    assert not (tmp_path / "mark").exists(), "the interpreter tore down after pytest"
    # the tests saw the sys.path `python -m pytest` gives them
    dash_m = _run(root, [argv[0], "-m", "pytest", *argv[3:]], tmp_path / "dash-m.json")
    assert dash_m.returncode == code
    ours = json.loads((tmp_path / "path.json").read_text())
    assert ours == json.loads((tmp_path / "dash-m.json").read_text())
    assert str(root) in ours


def test_plain_dash_m_pytest_tears_down_and_the_marker_shows_it(tmp_path: Path) -> None:
    # Known-bad for the check above: `python -m pytest` itself runs the atexit hook, and
    # gives the same outcome.
    root = _toy(tmp_path, False)
    argv = pt.pytest_command(Path(sys.executable), root, ["tests"], [], tmp_path / "j.xml")
    done = _run(root, [argv[0], "-m", "pytest", *argv[3:]], tmp_path / "path.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "mark").read_text() == "torn down"


DYING = """\
import os, signal, sys, time

def test_fine():
    pass

def test_ends_the_run():
    if os.environ.get("TOY_DEATH") == "hang":
        time.sleep(600)
    os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.mark.parametrize("ahead", [False, True], ids=["run now", "started ahead"])
@pytest.mark.parametrize(
    ("death", "headline"),
    [
        ("segv", "the plugin's pytest run was killed by SIGSEGV, without a report"),
        ("hang", "the plugin's pytest run did not finish within 5 s"),
    ],
)
def test_a_pytest_run_the_plugins_test_ends_is_a_failure_not_a_deferral(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, death: str, headline: str, ahead: bool
) -> None:
    """A test that crashes pytest's process (or hangs past `timeout`) gives no report to
    classify: JobFailed (the check fails, with pytest's last output: here faulthandler's
    stack naming the test), never an outside failure (the check would be deferred)."""
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.core.errors import JobFailed

    root = tmp_path / "plugin"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_dying.py").write_text(DYING)
    monkeypatch.setenv("TOY_DEATH", death)
    cfg = pt.settings({"cpu": ["tests"], "timeout": 5})
    cache = Cache(tmp_path / ".vpr")
    suite = pt.Suite(root, "cpu", cfg, None)
    with proc.Ahead() as held:
        if ahead:
            assert pt.start_ahead(held, cache, Path(sys.executable), suite)
        with pytest.raises(JobFailed) as failed:
            pt.tests_run(cache, Path(sys.executable), suite, held)
    assert failed.value.message.startswith(headline) and failed.value.exit_code == 1
    if death == "segv":
        assert "in test_ends_the_run" in failed.value.log
