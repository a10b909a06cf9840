"""The reference pairing built, installed and tested on CPython 3.10 and 3.12, from the
interpreters the machine has (pyenv's on these machines, `actions/setup-python` on
GitHub's): locked for that Python (PyPI's torch 2.13.0 build: no +cpu file for it
here), then `vpr release --no-publish` end to end. `.ci/run` sets VPR_REQUIRE_PYTHONS,
so there a missing interpreter fails instead of skipping."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import REPO, git, interpreter_or_skip, vpr


@pytest.mark.parametrize("python", ["3.10", "3.12"])
def test_the_reference_pairing_on_another_python(
    python: str, tmp_path: Path, cache_root: Path
) -> None:
    found = interpreter_or_skip(python)
    proj = tmp_path / "proj"
    shutil.copytree(REPO / "plugin" / "reference", proj / "plugin" / "reference")
    shutil.copytree(REPO / "buildspec" / "contracts", proj / "buildspec" / "contracts")
    spec = proj / "buildspec" / "reference.toml"
    shutil.copy(REPO / "buildspec" / "reference.toml", spec)
    xy = python.replace(".", "")
    for key, value in (
        ("build.python", f'"{python}"'),
        ("build.torch", f'{{ "{python}" = "2.13.0" }}'),
        ("build.constraints", f'"constraints/build-core-py{xy}.txt"'),
    ):
        vpr("spec", "set", str(spec), key, value)
    _commit(proj)  # a path plugin is read from the project's git history
    common = ("--spec", str(spec), "--cache-dir", str(cache_root))
    vpr("lock", *common)
    lock = (proj / "constraints" / f"build-core-py{xy}.txt").read_text()
    assert f"# python: {python}" in lock and f"torch-2.13.0-cp{xy}-cp{xy}-" in lock
    dist = tmp_path / "dist"
    done = vpr("release", *common, "--dist", str(dist), "--no-publish", check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = dist / "reference"
    core = json.loads((out / "build-core.json").read_text())
    assert core["python"] == found.version and core["interpreter"]["path"] == found.path
    assert core["interpreter"]["sha256"] == found.sha256
    assert core["wheel"]["filename"].endswith(f"-cp{xy}-cp{xy}-linux_x86_64.whl")
    assert core["build_env"]["torch_file"]["local"] is None  # the index's build
    env = json.loads((out / "env.json").read_text())
    assert env["interpreter"]["version"] == found.version
    tests = json.loads((out / "plugin-tests.json").read_text())
    assert tests["counts"]["passed"] > 0 and not tests["failing"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["core"]["interpreter"]["version"] == found.version
    assert manifest["conformance"]["verdict"] == "pilot"


def _commit(proj: Path) -> None:
    git("init", "-q", "-b", "main", cwd=proj)
    git("add", ".", cwd=proj)
    git("commit", "-q", "-m", "project", cwd=proj, date="2026-08-01T12:00:00+00:00")
