"""The real `nox` carries vpr's exit code out (CI tells a bad input from an outside failure)
and retries an outside failure (exit 3) once. Runs the noxfile's own session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO

pytestmark = pytest.mark.skipif(not shutil.which("nox"), reason="nox is not installed here")


def _nox(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nox", "-f", str(REPO / "noxfile.py"), "-s", "build-core", "--", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def test_outside_failure_is_retried_once_and_exits_3(tmp_path: Path) -> None:
    text = REFERENCE_SPEC.read_text()
    text = text.replace('index = "https://pypi.org/simple"', 'index = "http://127.0.0.1:9/simple"')
    text = text.replace(
        "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502", "a" * 64
    )  # nothing in any cache: the index must be asked, and port 9 refuses
    spec = tmp_path / "unreachable.toml"
    spec.write_text(text)
    done = _nox("--spec", str(spec), "--cache-dir", str(tmp_path / "cache"))
    log = done.stdout + done.stderr
    assert done.returncode == 3, log[-2000:]
    assert log.count("package index unreachable") == 2  # the first run and one retry
    assert "retrying once" in log and "nox exits 3" in log


def test_bad_input_is_not_retried_and_exits_2(tmp_path: Path) -> None:
    done = _nox("--spec", str(tmp_path / "missing.toml"))
    log = done.stdout + done.stderr
    assert done.returncode == 2, log[-2000:]
    assert log.count("spec file not found") == 1 and "retrying" not in log


def test_sign_only_stages_the_wheels_alone(tmp_path: Path) -> None:
    """`nox -s publish -- --sign-only` hands trusted publishing a folder of wheels only."""
    nox_python = next(
        (
            python
            for python in filter(None, (shutil.which("python3"), shutil.which("python")))
            if subprocess.run([python, "-c", "import nox"], capture_output=True).returncode == 0
        ),
        None,
    )  # the Python nox runs in (CI installs nox with pip into the runner's Python)
    if nox_python is None:
        pytest.skip("no python on PATH imports nox")
    dist = tmp_path / "dist" / "reference"
    dist.mkdir(parents=True)
    for name in ("a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl", "manifest.json"):
        (dist / name).write_text(name)
    (dist / "upload").mkdir()
    (dist / "upload" / "stale-0.1-py3-none-any.whl").write_text("old")
    code = (
        "import runpy, sys; ns = runpy.run_path(sys.argv[1]);"
        "print(ns['stage_wheels'](['--spec', sys.argv[2], '--dist', sys.argv[3]]))"
    )
    done = subprocess.run(
        [nox_python, "-c", code, str(REPO / "noxfile.py"), str(REFERENCE_SPEC), str(dist.parent)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == dist / "upload"
    assert sorted(p.name for p in (dist / "upload").iterdir()) == [
        "a-1.0-py3-none-any.whl",
        "b-2.0-py3-none-any.whl",
    ]
