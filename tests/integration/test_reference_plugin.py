"""The reference plugin, built and installed for real, with and without its runtime.

Builds the two wheels (vllm-reference-plugin and the stand-in runtime
vllm-reference-runtime) from plugin/reference/, installs them into two fresh
virtual environments layered on the vLLM environment (`vllm_python`), one
without the runtime and one with it, and runs the plugin's own test suite in
both. The suite's outcomes then say whether the platform activated, whether
the runtime-needing modules imported, and whether the hardware tests ran or
were skipped.

The layering is a `.pth` line naming the vLLM environment's site-packages.
A directory named on a `.pth` line is only appended to sys.path: `.pth` files
inside it are not processed, so editable installs made in the vLLM
environment (this plugin or refrt, during development) stay invisible, and
"runtime absent" really is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import REPO

PLUGIN = REPO / "plugin" / "reference"
# What each environment runs: the whole suite with the runtime; without it, the
# tests whose outcome depends on the runtime (the scheduler and policy tests do
# not, and each costs a vLLM start-up on a busy CI machine).
SUITES = {
    "absent": ["test_entrypoints.py", "test_platform.py", "hw"],
    "present": ["."],
}


def _uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        pytest.skip("uv is not available")
    return find_uv_bin()


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise AssertionError(
            f"command failed ({done.returncode}): {' '.join(args)}\n{done.stdout}\n{done.stderr}"
        )
    return done


def _python_info(python: Path | str) -> dict[str, str]:
    code = (
        "import json, sys, sysconfig; "
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], "
        "'purelib': sysconfig.get_paths()['purelib']}))"
    )
    return json.loads(_run([str(python), "-c", code]).stdout)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from a copy of plugin/reference (setuptools writes build/ in place)."""
    out = tmp_path_factory.mktemp("wheels")
    source = out / "src"
    shutil.copytree(
        PLUGIN,
        source,
        ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"
        ),
    )
    uv = _uv()
    built: dict[str, Path] = {}
    for name, folder in (("plugin", source), ("runtime", source / "runtime")):
        dest = out / name
        _run([uv, "build", "--quiet", "--wheel", "--out-dir", str(dest), str(folder)])
        (wheel,) = dest.glob("*.whl")
        built[name] = wheel
    return built


def _make_env(root: Path, vllm_python: Path, install: list[Path]) -> Path:
    uv = _uv()
    base = _python_info(vllm_python)
    _run([uv, "venv", "--quiet", "--python", str(vllm_python), str(root)])
    python = root / "bin" / "python"
    info = _python_info(python)
    assert info["version"] == base["version"]
    Path(info["purelib"], "_vpr_vllm_env.pth").write_text(base["purelib"] + "\n")
    _run([uv, "pip", "install", "--quiet", "-p", str(python), "--no-deps", *map(str, install)])
    _run([uv, "pip", "install", "--quiet", "-p", str(python), "pytest>=8"])
    return python


def _probe(python: Path) -> dict[str, object]:
    code = (
        "import importlib.util, json, vllm_reference_plugin as p; "
        "print(json.dumps({'file': p.__file__, "
        "'refrt': importlib.util.find_spec('refrt') is not None}))"
    )
    return json.loads(_run([str(python), "-c", code]).stdout)


def _suite(python: Path, junit: Path, paths: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(PLUGIN),
            "-c",
            str(PLUGIN / "pyproject.toml"),
            f"--junitxml={junit}",
            *(str(PLUGIN / "tests" / path) for path in paths),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=PLUGIN,
        env=env,
    )


def _outcomes(junit: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("skipped") is not None:
            outcomes[name] = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = "failed"
        else:
            outcomes[name] = "passed"
    return outcomes


@pytest.fixture(scope="module")
def suites(
    wheels: dict[str, Path], vllm_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, object]]:
    root = tmp_path_factory.mktemp("envs")
    envs = {
        "absent": _make_env(root / "absent", vllm_python, [wheels["plugin"]]),
        "present": _make_env(root / "present", vllm_python, [wheels["plugin"], wheels["runtime"]]),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            case: pool.submit(_suite, python, root / f"{case}.xml", SUITES[case])
            for case, python in envs.items()
        }
        done = {case: future.result() for case, future in futures.items()}
    return {
        case: {
            "python": envs[case],
            "probe": _probe(envs[case]),
            "proc": done[case],
            "outcomes": _outcomes(root / f"{case}.xml"),
        }
        for case in envs
    }


def _passed(suite: dict[str, object]) -> None:
    proc = suite["proc"]
    assert isinstance(proc, subprocess.CompletedProcess)
    assert proc.returncode == 0, (
        f"plugin suite failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    )


def test_wheels_declare_the_contract(wheels: dict[str, Path]) -> None:
    import zipfile

    with zipfile.ZipFile(wheels["plugin"]) as whl:
        names = whl.namelist()
        meta = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        eps = whl.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "Name: vllm-reference-plugin" in meta
    assert "Requires-Dist: vllm" not in meta  # must never pull the CUDA wheel
    assert "[vllm.platform_plugins]" in eps
    assert "reference = vllm_reference_plugin.entrypoints:platform_plugin" in eps
    assert "[vllm.general_plugins]" in eps
    assert not any(n.startswith("refrt/") for n in names)
    with zipfile.ZipFile(wheels["runtime"]) as whl:
        assert "refrt/__init__.py" in whl.namelist()


def test_runtime_absent(suites: dict[str, dict[str, object]]) -> None:
    suite = suites["absent"]
    probe = suite["probe"]
    assert isinstance(probe, dict)
    assert str(suite["python"]).rsplit("/bin/", 1)[0] in str(probe["file"]), probe
    assert probe["refrt"] is False, (
        "refrt importable in the runtime-absent env: is it installed non-editable in the "
        f"vLLM env itself? {probe}"
    )
    _passed(suite)
    outcomes = suite["outcomes"]
    assert isinstance(outcomes, dict)
    assert outcomes["test_platform::test_is_not_the_current_platform_without_the_runtime"] == (
        "passed"
    )
    assert outcomes["test_entrypoints::test_runtime_modules_fail_to_import_without_runtime"] == (
        "passed"
    )
    assert outcomes["test_entrypoints::test_platform_plugin_follows_runtime_presence"] == "passed"
    hw = {k: v for k, v in outcomes.items() if k.startswith("test_device::")}
    assert hw and set(hw.values()) == {"skipped"}, hw


def test_runtime_present(suites: dict[str, dict[str, object]]) -> None:
    suite = suites["present"]
    probe = suite["probe"]
    assert isinstance(probe, dict)
    assert probe["refrt"] is True
    assert str(suite["python"]).rsplit("/bin/", 1)[0] in str(probe["file"]), probe
    _passed(suite)
    outcomes = suite["outcomes"]
    assert isinstance(outcomes, dict)
    assert (
        outcomes["test_platform::test_is_the_current_platform_when_the_runtime_is_installed"]
        == "passed"
    )
    hw = {k: v for k, v in outcomes.items() if k.startswith("test_device::")}
    assert hw and set(hw.values()) == {"passed"}, hw
    assert (
        outcomes["test_scheduler::test_reference_scheduler_never_mixes_prefill_and_decode"]
        == "passed"
    )


def test_runtime_dependent_tests_ran_in_both(suites: dict[str, dict[str, object]]) -> None:
    absent, present = suites["absent"]["outcomes"], suites["present"]["outcomes"]
    assert isinstance(absent, dict) and isinstance(present, dict)
    assert absent and set(absent) <= set(present)
    assert any(k.startswith("test_scheduler::") for k in present)
    assert any(k.startswith("test_policy::") for k in present)
