"""`[plugin] build_env` and what the vendor image provides, before anything builds: the
spec refuses a name that is not a variable or that the pipeline owns (exit 2, naming the
key), a build's own variables never win over the pipeline's, and the plugin's build
requirements leave the vendor image's packages out and take torch from `[build] torch`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.buildrecord import RunnerFacts
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.stages import recipes
from vllm_plugin_release.stages.requests import (
    plugin_build_plan,
    plugin_build_request,
    vendor_image_packages,
    without_vendor_image,
)

REFERENCE = REPO / "buildspec" / "reference.toml"


def _spec(tmp_path: Path, plugin_extra: str = "", runtime: str = "") -> Path:
    text = REFERENCE.read_text()
    old = 'installer = "install.sh"'
    assert old in text
    text = text.replace(old, f"{old}\n{plugin_extra}", 1)
    if runtime:
        head, _, tail = text.partition("\n[runtime]\n")
        rest = tail.split("\n[", 1)
        text = head + "\n[runtime]\n" + runtime + ("\n[" + rest[1] if len(rest) > 1 else "")
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("table", "expect"),
    [
        ('{ "1CHIP" = "a" }', "key '1CHIP' is invalid"),
        ('{ "SOC-VERSION" = "a" }', "key 'SOC-VERSION' is invalid"),
        ('{ PATH = "/opt/x" }', "key 'PATH' is refused"),
        ('{ SOURCE_DATE_EPOCH = "1" }', "key 'SOURCE_DATE_EPOCH' is refused"),
        ('{ PYTHONPATH = "/x" }', "key 'PYTHONPATH' is refused"),
        ('{ VLLM_TARGET_DEVICE = "cuda" }', "key 'VLLM_TARGET_DEVICE' is refused"),
        ('{ LD_PRELOAD = "/x.so" }', "key 'LD_PRELOAD' is refused"),
        ("{ SOC_VERSION = 910 }", "SOC_VERSION must be of type string"),
    ],
)
def test_bad_build_env_names_the_key(tmp_path: Path, table: str, expect: str) -> None:
    path = _spec(tmp_path, f"build_env = {table}")
    with pytest.raises(BadInput) as err:
        load_spec(path)
    line = path.read_text().splitlines().index(f"build_env = {table}") + 1
    assert f"{path}:{line}:" in str(err.value) and expect in str(err.value), str(err.value)


def test_spec_check_exit_2_for_a_bad_build_env_key(tmp_path: Path) -> None:
    bad = vpr("spec", "check", str(_spec(tmp_path, 'build_env = { PATH = "/x" }')), check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "[plugin.build_env]: key 'PATH' is refused" in bad.stderr
    good = _spec(
        tmp_path, 'build_env = { SOC_VERSION = "ascend910b1", COMPILE_CUSTOM_KERNELS = "0" }'
    )
    assert vpr("spec", "check", str(good), check=False).returncode == 0
    plugin = load_spec(good).plugin
    assert plugin is not None and plugin.build_env["COMPILE_CUSTOM_KERNELS"] == "0"


def test_a_build_variable_never_replaces_the_pipelines_own() -> None:
    env = recipes.build_env(
        base={"PATH": "/usr/bin", "HOME": "/h"},
        venv="/v",
        shim="/s",
        target_device="empty",
        source_date_epoch=1700000000,
        extra={"SOC_VERSION": "ascend910b1", "SOURCE_DATE_EPOCH": "1", "PATH": "/evil"},
    )
    assert env["SOC_VERSION"] == "ascend910b1"
    assert env["SOURCE_DATE_EPOCH"] == "1700000000" and env["PATH"] == "/s:/v/bin:/usr/bin"


def _plugin(tmp_path: Path, requires: list[str]) -> Path:
    root = tmp_path / "plugin"
    root.mkdir()
    listed = ", ".join(f'"{r}"' for r in requires)
    (root / "pyproject.toml").write_text(f"[build-system]\nrequires = [{listed}]\n")
    return root


RUNTIME = (
    'name = "CANN"\nmodule = "torch_npu"\npackage = "torch-npu"\nprovides = ["triton-ascend"]\n'
)


def test_vendor_image_packages_and_torch_in_the_plugin_build(tmp_path: Path) -> None:
    spec = load_spec(
        _spec(tmp_path, 'build_constraints = "constraints/build-plugin-x.txt"', RUNTIME)
    )
    assert vendor_image_packages(spec) == {"torch-npu", "triton-ascend"}
    declared = [
        "setuptools>=64",
        "torch==2.10.0",
        "torch_npu==2.10.0.post4",
        "triton-ascend==3.2.2",
    ]
    root = _plugin(tmp_path, declared)
    plan = plugin_build_plan(spec, root)
    assert plan.declared == tuple(declared)
    assert plan.left_out == ("torch_npu==2.10.0.post4", "triton-ascend==3.2.2")
    assert plan.torch == {"declared": "torch==2.10.0", "used": "torch==2.13.0+cpu"}
    assert plan.requirements == ("setuptools>=64", "torch==2.13.0+cpu")
    request = plugin_build_request(spec, root)
    assert request is not None
    assert request.requirements == ("build", "setuptools>=64", "torch==2.13.0+cpu")
    assert any("torch_npu==2.10.0.post4" in n for n in request.notes)
    assert any("'torch==2.10.0'" in n for n in request.notes)
    assert plan.record()["left_out"]["requirements"] == list(plan.left_out)


def test_a_runtime_the_index_installs_is_not_left_out(tmp_path: Path) -> None:
    """A pinned [runtime] version the build Python loads is installed from the index: only
    `provides` is the vendor image's then; with no [runtime] nothing is left out."""
    pinned = RUNTIME + 'version = "2.10.0.post4"\n'
    spec = load_spec(_spec(tmp_path, "", pinned))
    assert vendor_image_packages(spec) == {"triton-ascend"}
    kept, left = without_vendor_image(spec, ["torch-npu==2.10.0.post4", "attrs"])
    assert kept == ["torch-npu==2.10.0.post4", "attrs"] and left == []
    (tmp_path / "s.toml").unlink()
    bare = load_spec(_spec(tmp_path, "", 'name = "r"\n'))
    assert vendor_image_packages(bare) == frozenset()


class RecordingRunner:
    """TEST DOUBLE for a runner: no container engine runs here, so this records the
    `Command` each build hands its runner (LocalRunner and ContainerRunner both start it
    with `Command.env` as given) and leaves an empty stand-in wheel where a build would."""

    kind = "recording-double"
    isolate = False
    uv = "uv"
    env_key = None

    def __init__(self) -> None:
        self.commands: list = []

    def describe(self) -> RunnerFacts:
        return RunnerFacts(self.kind)

    def call(self, argv, **_: object):
        import subprocess

        return subprocess.CompletedProcess(list(map(str, argv)), 0, "3.11.9\n", "")

    def run(self, cmd, log: Path) -> None:
        self.commands.append(cmd)
        out = Path(cmd.argv[cmd.argv.index("--outdir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "synth-0.1.0-py3-none-any.whl").write_bytes(b"stand-in, not a wheel")


def test_the_build_command_carries_build_env_on_either_runner(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges.container import ContainerRunner
    from vllm_plugin_release.stages.wheelbuild import Builds, parallel_local_builds

    tree = tmp_path / "plugin"
    tree.mkdir()
    (tree / "setup.py").write_text("")
    runner = RecordingRunner()
    cache = Cache(tmp_path / "cache")
    variables = {"COMPILE_CUSTOM_KERNELS": "0", "SOC_VERSION": "ascend910b1"}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    parallel_local_builds(
        runner,  # type: ignore[arg-type]
        tmp_path / "venv",
        tree,
        scratch,
        cache,
        Builds(2, 1700000000, None, "build-plugin", variables),
    )
    assert len(runner.commands) == 2
    for cmd in runner.commands:
        assert {k: cmd.env[k] for k in variables} == variables
        assert cmd.env["SOURCE_DATE_EPOCH"] == "1700000000"
        # what the container runner gives the container: the same variables
        inside = ContainerRunner._env(SimpleNamespace(cert=None, uv_cache="/c"), cmd.env)  # type: ignore[arg-type]
        assert {k: inside[k] for k in variables} == variables
