"""The pairing environment's checks against the real vLLM 0.26.0 and the reference plugin:
vLLM's own platform discovery (`current_platform`) must resolve to the plugin's platform
where the runtime is present, and say why not where it is not; every module of the
plugin is imported, each failure a finding named with its module and error."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_envrun import Probe
from vllm_plugin_release.edges.envrun import run_in_env


def _checks(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


def _request(packages: list[str], runtime: str, expect: str) -> dict:
    return {
        "core_version": "0.26.0",
        "packages": packages,
        "entry_points": {},
        "runtime_module": runtime,
        "expect_runtime": expect,
    }


def test_activation_resolves_to_the_plugin_with_the_stand_in_runtime(reference_env: dict) -> None:
    checks = {c["name"]: c for c in reference_env["checks"]}
    # the pairing env itself has no runtime: not expected to activate, and said so
    plain = checks["platform activation (vllm.platforms.current_platform)"]
    assert plain["status"] == "skipped" and "refrt is absent here" in plain["detail"]
    # the labelled stand-in's overlay: vLLM's own discovery resolves the plugin's platform
    stand_in = checks["platform activation (vllm.platforms.current_platform) [stand-in runtime]"]
    assert stand_in["status"] == "pass"
    assert stand_in["value"] == "vllm_reference_plugin.platform.ReferencePlatform"
    assert "labelled stand-in" in stand_in["detail"]
    assert reference_env["platform_class"] == "vllm_reference_plugin.platform.ReferencePlatform"


def test_without_the_runtime_activation_fails_naming_the_cause(vllm_python: Path) -> None:
    """Known-bad: the runtime expected present but removed (the pairing env without the
    overlay): vLLM falls back to another platform, and the check says why."""
    result = run_in_env(
        vllm_python, Probe("envcheck", _request(["vllm_reference_plugin"], "refrt", "present"))
    )
    check = _checks(result)["platform activation (vllm.platforms.current_platform)"]
    assert check["status"] == "fail" and check["finding"] == "plugin"
    assert (
        "not a platform of the plugin" in check["detail"] and "silent fallback" in check["detail"]
    )
    assert "platform_plugin() returned None" in check["detail"]
    assert "import refrt: ModuleNotFoundError" in check["detail"]
    assert not check["value"].startswith("vllm_reference_plugin")


def test_every_module_of_the_plugin_is_imported(vllm_python: Path, tmp_path: Path) -> None:
    package = tmp_path / "vprmods"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text("import vllm\nVALUE = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "stale.py").write_text(
        "from vllm.v1.engine.utils import NoSuchLauncher\n"  # an API the core no longer has
    )
    (package / "leaves.py").write_text("import sys\nsys.exit(3)\n")  # must not end the job
    result = run_in_env(
        vllm_python,
        Probe("envcheck", _request(["vprmods"], "", "absent")),
        env={"PYTHONPATH": str(tmp_path)},
    )
    check = _checks(result)["plugin modules import"]
    assert check["status"] == "fail" and check["finding"] == "plugin"
    assert check["detail"].startswith("3 of 5 modules import")
    by_module = {m["module"]: m for m in result["plugin_modules"]}
    assert by_module["vprmods.good"]["status"] == "imported"
    stale = by_module["vprmods.sub.stale"]
    assert stale["status"] == "failed" and "cannot import name 'NoSuchLauncher'" in stale["reason"]
    assert "<env>/lib/" in stale["reason"] and str(vllm_python.parent.parent) not in stale["reason"]
    assert by_module["vprmods.leaves"] == {
        "module": "vprmods.leaves",
        "status": "failed",
        "reason": "SystemExit: 3",
    }
    # known-good: without the broken modules every one imports
    (package / "sub" / "stale.py").unlink()
    (package / "leaves.py").unlink()
    result = run_in_env(
        vllm_python,
        Probe("envcheck", _request(["vprmods"], "", "absent")),
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert _checks(result)["plugin modules import"]["status"] == "pass"
