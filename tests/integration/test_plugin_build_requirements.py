"""A setup.py plugin with its own build requirements and dynamic dependencies,
built for real from a git repository made of tests/plugins/setuppy_plugin.

Known-bad: built in the core's build lock, its `setuptools<80` conflicts with the lock's
pin, and the message names both. Known-good: with `[plugin] build_constraints` it gets its
own hash-locked build environment, and its dependencies come from the wheel's Requires-Dist.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.test_plugin_build import build as _build
from tests.support import REFERENCE_SPEC, REPO, git
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import check_lock
from vllm_plugin_release.edges.uv import compile_lock
from vllm_plugin_release.stages import lock as lock_stage
from vllm_plugin_release.stages.requests import plugin_build_request, plugin_dependencies

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "setuppy_plugin"


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "synth"
    shutil.copytree(PLUGIN, repo)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "synth", cwd=repo, date="2026-08-01T12:00:00+00:00")
    return repo, git("rev-parse", "HEAD", cwd=repo)


def _spec(tmp_path: Path, commit: str, own_lock: Path | None) -> Path:
    text = REFERENCE_SPEC.read_text().split("\n[plugin]")[0]
    text = text.replace(
        'constraints = "constraints/build-core-py311.txt"',
        f'constraints = "{REPO / "constraints" / "build-core-py311.txt"}"',
    )
    text += '\n[plugin]\nname = "synth-setuppy-plugin"\n'
    if own_lock is not None:
        text += f'build_constraints = "{own_lock}"\n'
    text += (
        '\n[plugin.source]\nkind = "git"\n'
        f'url = "https://example.invalid/synth.git"\ncommit = "{commit}"\n'
    )
    path = tmp_path / "synth.toml"
    path.write_text(text)
    return path


def test_conflict_with_the_core_build_lock_names_both_pins(
    tmp_path: Path, cache_root: Path
) -> None:
    repo, commit = _repo(tmp_path)
    done = _build(tmp_path, _spec(tmp_path, commit, None), repo, cache_root, check=False)
    assert done.returncode == 2, done.stderr
    assert "'setuptools>=64,<80'" in done.stderr, done.stderr
    assert "setuptools==80.10.2" in done.stderr and "build-core-py311.txt" in done.stderr
    assert "build_constraints" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "dist").exists()


def test_own_build_lock_and_dependencies_from_the_wheel(tmp_path: Path, cache_root: Path) -> None:
    repo, commit = _repo(tmp_path)
    own = tmp_path / "build-plugin-synth-py311.txt"
    spec_file = _spec(tmp_path, commit, own)
    spec = load_spec(spec_file)
    request = plugin_build_request(spec, repo)
    assert request is not None and "attrs" in request.requirements
    compile_lock(request, own, spec.build.find_links)
    assert "setuptools==79." in check_lock(own, request)  # resolved on its own: < 80
    _build(tmp_path, spec_file, repo, cache_root)
    record = json.loads((tmp_path / "dist" / "reference" / "build-plugin.json").read_text())
    assert record["build_env"]["lock_file"].endswith("/build-plugin-synth-py311.txt")
    assert record["plugin"]["build_requires"] == ["setuptools>=64,<80", "wheel", "attrs"]
    assert record["plugin"]["requires_dist"] == ["attrs>=23.1", "packaging>=23"]
    assert record["entry_points"]["vllm.platform_plugins"] == {
        "synth": "synth_setuppy_plugin:register"
    }
    # the dependencies come from the wheel; without it they are not guessed
    deps = plugin_dependencies(repo, record["plugin"]["requires_dist"])
    assert deps == ["attrs>=23.1", "packaging>=23"]
    with pytest.raises(BadInput, match=r"in setup\.py"):
        plugin_dependencies(repo)
    core = tmp_path / "core"  # only its [build-system] is read for the core's build lock
    core.mkdir()
    (core / "pyproject.toml").write_text('[build-system]\nrequires = ["torch == 2.11.0"]\n')
    locks = lock_stage.pairing_locks(spec, core, repo)
    assert [path for _, path in locks][-1] == own  # no env lock before the wheel exists
