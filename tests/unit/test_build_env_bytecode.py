"""The build environment's bytecode step (stages/recipes.COMPILE_BYTECODE), run for real
on a small site-packages tree: compiled in parallel, the files dealt out as processes
are free, timestamp-checked even where SOURCE_DATE_EPOCH is set, test packages left out,
a file that does not compile is not an error of the step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_plugin_release.stages import recipes


def _site(tmp_path: Path) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    site = venv / "lib" / "python3.11" / "site-packages"
    for rel, text in {
        "pkg/__init__.py": "X = 1\n",
        "pkg/core.py": "def f():\n    return 2\n",
        "pkg/tests/__init__.py": "",
        "pkg/tests/test_core.py": "def test_f():\n    pass\n",
        "pkg/testing/helpers.py": "Y = 3\n",
        "pkg/test/conftest.py": "Z = 4\n",
        "pkg/contest.py": "W = 5\n",  # not a test package: only whole path parts count
        "pkg/broken.py": "def (:\n",
    }.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return venv, site


def _compiled(site: Path) -> set[str]:
    return {
        str(p.parent.parent.relative_to(site) / p.name.split(".")[0])
        for p in site.rglob("__pycache__/*.pyc")
    }


def test_the_bytecode_step_compiles_all_but_test_packages(tmp_path: Path) -> None:
    venv, site = _site(tmp_path)
    step = recipes.venv_commands(
        uv="uv", python="3.11", venv=str(venv), lock="lock.txt", find_links=[], env={}
    )[-1]
    assert step.network is False
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    done = subprocess.run(step.argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr  # broken.py: Python's error at import time
    assert _compiled(site) == {"pkg/__init__", "pkg/core", "pkg/contest"}
    pyc = next((site / "pkg" / "__pycache__").glob("core.*.pyc")).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0  # timestamp-checked, not hash-checked


def test_without_the_exclusion_every_package_would_be_compiled(tmp_path: Path) -> None:
    """The known-bad mutation: the same step with an exclusion that matches nothing
    compiles the test packages too (what the rule is there to leave out)."""
    venv, site = _site(tmp_path)
    argv = list(
        recipes.venv_commands(
            uv="uv", python="3.11", venv=str(venv), lock="l", find_links=[], env={}
        )[-1].argv
    )
    argv[-1] = r"^$nothing"
    subprocess.run(argv, check=True, capture_output=True)
    assert {"pkg/tests/test_core", "pkg/testing/helpers", "pkg/test/conftest"} <= _compiled(site)


# py_compile for the step, through PYTHONPATH: the real one, each compile logged (pid,
# file); the big module waits until every small one is compiled. Dealt out as processes
# are free, the others take them all meanwhile; with fixed shares the process that drew
# the big module holds small ones of its own and it waits in vain (the known-bad case).
SHIM = """
import importlib.util, os, sysconfig, time
_real_path = os.path.join(sysconfig.get_paths()["stdlib"], "py_compile.py")
_spec = importlib.util.spec_from_file_location("_real_py_compile", _real_path)
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
PycInvalidationMode, PyCompileError = _real.PycInvalidationMode, _real.PyCompileError
LOG = os.environ["VPR_TEST_COMPILE_LOG"]

def _log(line):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (line + "\\n").encode())
    os.close(fd)

def _small_done():
    with open(LOG) as f:
        return sum(1 for line in f if "small_" in line)

def compile(path, **kw):
    if path.endswith("a_big.py"):
        give_up = time.monotonic() + 60  # only the known-bad case waits this long
        while _small_done() < SMALL and time.monotonic() < give_up:
            time.sleep(0.01)
        if _small_done() < SMALL:
            _log(f"{os.getpid()} gave-up-waiting {path}")
    out = _real.compile(path, **kw)
    _log(f"{os.getpid()} compiled {path}")
    return out
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_files_are_taken_as_processes_are_free(tmp_path: Path) -> None:
    """One big module and 60 small ones: while one process compiles the big one (it waits
    for the event "every small one is compiled"), the others take every small one.
    Events only: no step depends on how fast a process runs."""
    venv, site = _site(tmp_path)
    pkg = site / "many"
    pkg.mkdir()
    (pkg / "a_big.py").write_text("".join(f"x{i} = {i}\n" for i in range(2000)))
    for i in range(60):
        (pkg / f"small_{i:03}.py").write_text(f"def f():\n    return {i}\n")
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "py_compile.py").write_text(SHIM.replace("SMALL", "60"))
    log = tmp_path / "compiled.log"
    log.touch()
    step = recipes.venv_commands(
        uv="uv", python="3.11", venv=str(venv), lock="lock.txt", find_links=[], env={}
    )[-1]
    env = {**os.environ, "PYTHONPATH": str(shim), "VPR_TEST_COMPILE_LOG": str(log)}
    subprocess.run(step.argv, check=True, capture_output=True, env=env)
    lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
    assert not [path for _, what, path in lines if what == "gave-up-waiting"]
    by = {path.rsplit("/", 1)[-1]: pid for pid, what, path in lines if "/many/" in path}
    assert len(by) == 61 and len(set(by.values())) >= 2
    assert by["a_big.py"] not in {pid for name, pid in by.items() if name != "a_big.py"}
