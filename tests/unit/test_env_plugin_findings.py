"""`import vllm` failing for want of the absent vendor runtime is a finding about the plugin
(vllm-ascend: its platform activates while vLLM 0.27.1 imports and imports torch_npu), so
`vpr release` records it in the scorecard and goes on; `vpr env` still stops on it. Any
other failure of `import vllm` stops both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO, env_build
from tests.unit import test_envrun
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import Context, Sources
from vllm_plugin_release.conform.checks import environment
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.envrecord import EnvRecord, parse
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.stages.pairing_env import JOB_CHECK, EnvCheckJob, _deliver, _env_checks


def _result(detail: str, runtime_status: str = "absent") -> dict:
    check = {"name": "import vllm", "status": "fail", "detail": detail}
    return {"checks": [check], "runtime": {"status": runtime_status}, "runtime_modules": []}


def _args(tmp_path: Path) -> tuple:
    spec = load_spec(REPO / "buildspec" / "ascend.toml")  # [runtime] module = "torch_npu"
    return (env_build(spec, tmp_path), tmp_path)


def test_runtime_missing_at_vllm_import_is_the_plugins_finding(tmp_path: Path) -> None:
    missing = _result("ModuleNotFoundError: No module named 'torch_npu'")
    record = _deliver(*_args(tmp_path), missing, False)
    (check,) = record.checks
    assert check.finding == "plugin" and "platform plugin activates" in check.detail
    with pytest.raises(GateFailed, match="import vllm"):
        _deliver(*_args(tmp_path), missing, True)  # `vpr env` stops on it


@pytest.mark.parametrize(
    "result",
    [
        _result("ModuleNotFoundError: No module named 'numpy'"),  # not the runtime
        _result("ImportError: cannot import name 'x' from 'torch_npu'"),  # runtime there, broken
        _result("ModuleNotFoundError: No module named 'torch_npu'", runtime_status="present"),
    ],
)
def test_other_failures_of_vllm_import_stop_the_release(tmp_path: Path, result: dict) -> None:
    with pytest.raises(GateFailed, match="import vllm"):
        _deliver(*_args(tmp_path), result, False)


def test_the_api_check_reports_the_unimportable_core_as_a_finding(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.checks.api import vllm_unimportable

    record = _deliver(
        *_args(tmp_path), _result("ModuleNotFoundError: No module named 'torch_npu'"), False
    )
    found = vllm_unimportable(record)
    assert found is not None and found.status == "fail" and "vllm serve" in found.summary
    assert "/" not in found.summary.split("(")[0]  # no absolute path of this machine
    # any other failure of `import vllm` is not the plugin's: the api check runs as before
    numpy = _result("ModuleNotFoundError: No module named 'numpy'")
    assert vllm_unimportable(_env(numpy)) is None
    assert vllm_unimportable(_env({"checks": [{"name": "import vllm", "status": "pass"}]})) is None


def _env(result: dict) -> EnvRecord:
    return parse({**result, "python": "/x/bin/python", "runner": "cpu"})


bare_python = test_envrun.bare_python  # a real venv without this package, shared

DYING_CHECK = """
import os, sys
print("vllm_dying_plugin: its import ends the process", file=sys.stderr, flush=True)
os._exit(0)
"""


def test_an_environment_check_whose_job_dies_is_a_failed_finding(
    bare_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment's check imports every module of the plugin: a job that one of them
    ends (no answer) is a failed check about the plugin, saying how it ended and what it
    said last. `vpr env` stops on it; the release goes on and its environment check fails
    (where it was an outside failure that stopped the release with exit 3)."""
    folder = tmp_path / "inenv"
    folder.mkdir()
    (folder / "envcheck.py").write_text(DYING_CHECK)  # stands in for inenv/envcheck.py
    monkeypatch.setattr(envrun, "INENV", folder)
    job = EnvCheckJob("0.27.1", ("vllm_dying_plugin",), {}, "torch_npu", "absent")
    found = _env_checks(bare_python, job)
    (check,) = found.checks
    assert (check.name, check.status, check.finding) == (JOB_CHECK, "fail", "plugin")
    assert check.detail == (
        "inenv envcheck exited 0, without an answer; "
        "last output: vllm_dying_plugin: its import ends the process"
    )
    result = {"checks": [c.to_json() for c in found.checks], "runtime": {"status": "absent"}}
    with pytest.raises(GateFailed, match=JOB_CHECK):
        _deliver(*_args(tmp_path), result, True)  # `vpr env`
    record = _deliver(*_args(tmp_path), result, False)  # the release: on to conform
    assert [c.name for c in record.checks] == [JOB_CHECK]
    spec = load_spec(REPO / "buildspec" / "ascend.toml")
    ctx = Context(spec, "cpu", Cache(tmp_path / "c"), tmp_path, Sources(Path, Path))
    checked = environment.run(ctx)
    assert checked.status == "fail"
    assert f"fail: {JOB_CHECK}: {check.detail}" in [e.note for e in checked.evidence]
