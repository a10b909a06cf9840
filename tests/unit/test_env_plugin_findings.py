"""`import vllm` failing for want of the absent vendor runtime is a finding about the plugin
(vllm-ascend: its platform activates while vLLM 0.27.1 imports and imports torch_npu), so
`vpr release` records it in the scorecard and goes on; `vpr env` still stops on it. Any
other failure of `import vllm` stops both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO, env_build
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.envrecord import EnvRecord, parse
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.stages.pairing_env import _deliver


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
    from vllm_plugin_release.conform.checks.api.check import vllm_unimportable

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
