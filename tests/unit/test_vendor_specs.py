"""The vendor specs load, and a plugin's declared core range is not resolved from the
index (the core is our built wheel) but must contain the spec's core."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO, env_build
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.stages.requests import env_lock_request, runtime_plan


@pytest.mark.parametrize(
    ("name", "core", "runtime", "python"),
    [
        ("ascend.toml", "0.27.1", "torch_npu", "3.12"),
        ("spyre.toml", "0.19.0", "torch_sendnn", "3.11"),
    ],
)
def test_vendor_specs_load(name: str, core: str, runtime: str, python: str) -> None:
    spec = load_spec(REPO / "buildspec" / name)
    assert spec.core.version == core and spec.runtime_module == runtime
    assert spec.build.python == python  # the vendor image's
    assert spec.plugin is not None
    assert str(spec.plugin.build_constraints).startswith("constraints/build-plugin-")
    xy = python.replace(".", "")
    assert spec.build.constraints == f"constraints/build-core-{core}-py{xy}.txt"


def _tree(tmp_path: Path) -> Path:
    core = tmp_path / "core"
    (core / "requirements").mkdir(parents=True)
    (core / "requirements" / "common.txt").write_text("requests>=2\n")
    return core


def _plugin(tmp_path: Path, declared: str) -> Path:
    root = tmp_path / "plugin"
    root.mkdir()
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1"\ndependencies = ["{declared}", "attrs"]\n'
    )
    return root


def test_declared_core_range_is_dropped_from_the_env_lock(tmp_path: Path) -> None:
    spec = load_spec(REPO / "buildspec" / "spyre.toml")
    request = env_lock_request(
        spec,
        _tree(tmp_path),
        _plugin(tmp_path, "vllm>=0.19.0,<0.19.1"),
        runtime_plan(spec, "cpu", None),
    )
    assert "attrs" in request.requirements
    assert not any(r.startswith("vllm") for r in request.requirements)


def test_declared_core_range_that_excludes_the_core_is_bad_input(tmp_path: Path) -> None:
    spec = load_spec(REPO / "buildspec" / "spyre.toml")
    with pytest.raises(BadInput, match=r"'vllm>=0\.20', which excludes vllm 0\.19\.0"):
        env_lock_request(
            spec, _tree(tmp_path), _plugin(tmp_path, "vllm>=0.20"), runtime_plan(spec, "cpu", None)
        )


def test_release_leaves_the_platform_plugins_answer_to_the_scorecard(tmp_path: Path) -> None:
    """`vpr env` gates on it; `vpr release` records it for the environment check (a finding
    about the plugin, e.g. vllm-spyre's register() that answers without its runtime)."""
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.stages.pairing_env import _deliver

    spec = load_spec(REPO / "buildspec" / "spyre.toml")
    conduct = {"name": "platform_plugin() runtime absent", "status": "fail", "detail": "x"}
    result = {"checks": [conduct], "runtime": {"name": "r"}, "runtime_modules": []}
    args = (env_build(spec, tmp_path), tmp_path)
    record = _deliver(*args, result, False)
    assert [c.to_json() for c in record.checks] == [conduct]
    assert (tmp_path / "env.json").is_file()
    with pytest.raises(GateFailed, match=r"platform_plugin\(\) runtime absent"):
        _deliver(*args, result, True)
    broken = {**result, "checks": [{"name": "import vllm", "status": "fail", "detail": "x"}]}
    with pytest.raises(GateFailed, match="import vllm"):
        _deliver(*args, broken, False)


def test_a_wrong_name_is_bad_input_a_broken_import_is_an_outside_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay names the plugin's classes: a name that does not exist is exit 2; a
    module that exists but fails to import here (vllm-spyre's scheduler on this machine:
    `operator torchvision::nms does not exist`) is exit 3, not the spec's fault."""
    from vllm_plugin_release.inenv import replay

    (tmp_path / "broken_sched.py").write_text(
        "raise RuntimeError('operator x::nms does not exist')\n"
    )
    (tmp_path / "needs_dep.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(replay.BadRequest, match="does not import"):
        replay.load_object("no_such_module_xyz:Sched", what="scheduler")
    with pytest.raises(replay.ImportFailure, match="exists but its import fails"):
        replay.load_object("broken_sched:Sched", what="scheduler")
    with pytest.raises(replay.ImportFailure, match="no_such_dependency_xyz"):
        replay.load_object("needs_dep:Sched", what="scheduler")
