"""Two parallel builds do their own tail work (hash the wheel, remove their copy of the
tree) as each ends, so the second build's run hides the first's; the comparison uses
those hashes and still catches a difference."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.stages.wheelbuild import (
    Builds,
    compare_builds,
    ensure_build_env,
    parallel_local_builds,
)


def test_each_build_hashes_its_wheel_and_removes_its_tree(tmp_path: Path, cache_root: Path) -> None:
    spec = load_spec(REFERENCE_SPEC)
    cache = Cache(cache_root)
    lock = spec.resolve(spec.build.constraints)
    runner = LocalRunner("off")
    venv = ensure_build_env(spec, lock, sha256_file(lock), cache, runner)
    tree = tmp_path / "reference"
    shutil.copytree(REPO / "plugin" / "reference", tree)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    results = parallel_local_builds(
        runner,
        venv,
        tree,
        scratch,
        cache,
        Builds(2, spec.core.source_date_epoch, None, "tail-test"),
    )
    wheels = [r["wheel"] for r in results]
    for result in results:
        assert result["sha256"] == sha256_file(result["wheel"])
    # The copies of the tree are gone once the builds return; the wheels stay.
    assert not (scratch / "tail-test-a" / tree.name).exists()
    assert not (scratch / "tail-test-b" / tree.name).exists()
    assert all(w.is_file() for w in wheels)
    assert tree.is_dir()  # the caller's tree is never touched

    digest, reproducible = compare_builds(wheels, "tail-test", [r["sha256"] for r in results])
    assert (digest, reproducible) == (results[0]["sha256"], True)
    # Known-bad: a second build whose hash differs is not reproducible.
    with pytest.raises(GateFailed, match="not reproducible"):
        compare_builds(wheels, "tail-test", [results[0]["sha256"], "0" * 64])


def test_the_build_env_carries_bytecode_for_what_setup_py_imports(cache_root: Path) -> None:
    """Builds run with PYTHONDONTWRITEBYTECODE: without .pyc files made at install time,
    vLLM's setup.py would compile torch again in every build."""
    spec = load_spec(REFERENCE_SPEC)
    lock = spec.resolve(spec.build.constraints)
    venv = ensure_build_env(spec, lock, sha256_file(lock), Cache(cache_root), LocalRunner("off"))
    site = next((venv / "lib").glob("python3.*/site-packages"))
    compiled = list((site / "torch" / "__pycache__").glob("__init__.cpython-*.pyc"))
    assert compiled, f"{site / 'torch'} has no bytecode: the build env was made without it"
