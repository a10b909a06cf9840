"""A plugin whose build needs the spec's environment variables and whose vendor runtime is
the vendor image's to provide (vllm-ascend's shape), built for real from a git repository
made of tests/plugins/vendorimage_plugin.

Known-good: `[plugin] build_env` sets SYNTH_CHIP, `[runtime] package` names the runtime:
the runtime is left out of the plugin's own build lock (resolved by uv for real: the
distribution exists on no index, so a lock that kept it could not be written) and of the
pairing lock, the wheel carries what the build read, and build-plugin.json records both.
Known-bad: without build_env the build stops and its message names the variable; without
`[runtime] package` the runtime stays in the build lock's request.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tests.integration.test_plugin_build import build as _build
from tests.support import REPO, VLLM_SHA, committed_copy, spec_head
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.lockfile import check_lock, pins
from vllm_plugin_release.edges.uv import compile_lock
from vllm_plugin_release.stages.requests import (
    env_left_out,
    env_lock_request,
    plugin_build_request,
    runtime_plan,
)

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "vendorimage_plugin"
RUNTIME = "vpr-synth-vendor-runtime==9.9.9"
WITH_RUNTIME = (
    '\n[runtime]\nname = "synth"\nmodule = "vpr_synth_rt"\npackage = "vpr-synth-vendor-runtime"\n'
)


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "synth"
    return repo, committed_copy(PLUGIN, repo)


def _spec(tmp_path: Path, commit: str, own_lock: Path, *, build_env: str, runtime: str) -> Path:
    """The reference pairing's core with the synthetic plugin in its own build lock."""
    head = spec_head("synth", sha=VLLM_SHA)
    path = tmp_path / "synth.toml"
    path.write_text(
        f'{head}constraints = "{REPO / "constraints" / "build-core-py311.txt"}"\n\n'
        f'[plugin]\nname = "synth-vendorimage-plugin"\nbuild_constraints = "{own_lock}"\n'
        f'{build_env}\n[plugin.source]\nkind = "git"\n'
        f'url = "https://example.invalid/synth.git"\ncommit = "{commit}"\n{runtime}'
    )
    return path


def test_build_env_is_passed_and_the_vendor_runtime_left_out(
    tmp_path: Path, cache_root: Path
) -> None:
    repo, commit = _repo(tmp_path)
    own = tmp_path / "build-plugin-synth-py311.txt"
    env = 'build_env = { SYNTH_CHIP = "chip-a1" }\n'
    spec_file = _spec(tmp_path, commit, own, build_env=env, runtime=WITH_RUNTIME)
    spec = load_spec(spec_file)
    request = plugin_build_request(spec, repo)
    assert request is not None and RUNTIME not in request.requirements
    assert any("vendor image" in note and RUNTIME in note for note in request.notes)
    compile_lock(request, own, spec.build.find_links)  # uv, for real: no such runtime exists
    locked = check_lock(own, request)
    assert "setuptools" in pins(locked) and "vpr-synth-vendor-runtime" not in pins(locked)
    assert "Left out, provided by the vendor image ([runtime]): " + RUNTIME in locked
    _build(tmp_path, spec_file, repo, cache_root)
    dist = tmp_path / "dist" / "synth"
    record = json.loads((dist / "build-plugin.json").read_text())
    assert record["build_env"]["variables"] == {"SYNTH_CHIP": "chip-a1"}
    assert RUNTIME in record["plugin"]["build_requires"]  # declared, as the plugin says
    assert record["plugin"]["left_out"]["requirements"] == [RUNTIME]
    assert "hardware runner" in record["plugin"]["left_out"]["reason"]
    assert record["plugin"]["requires_dist"] == ["packaging>=23", RUNTIME]
    with zipfile.ZipFile(dist / record["wheel"]["filename"]) as zf:
        built = zf.read("synth_vendorimage_plugin/_build_info.py").decode()
    assert built == "CHIP = 'chip-a1'\n"  # what the build read, from the spec
    # the pairing lock leaves the runtime out too, and says so in its header
    core = tmp_path / "core"
    (core / "requirements").mkdir(parents=True)
    (core / "requirements" / "common.txt").write_text("requests>=2\n")
    deps = record["plugin"]["requires_dist"]
    env_request = env_lock_request(spec, core, repo, runtime_plan(spec, "cpu", None), deps)
    assert "packaging>=23" in env_request.requirements
    assert RUNTIME not in env_request.requirements
    assert any(RUNTIME in note for note in env_request.notes)
    assert env_left_out(spec, repo, deps) == [RUNTIME]


def test_without_build_env_the_build_stops_naming_the_variable(
    tmp_path: Path, cache_root: Path
) -> None:
    repo, commit = _repo(tmp_path)
    own = tmp_path / "build-plugin-synth-py311.txt"
    spec_file = _spec(tmp_path, commit, own, build_env="", runtime=WITH_RUNTIME)
    spec = load_spec(spec_file)
    request = plugin_build_request(spec, repo)
    assert request is not None
    compile_lock(request, own, spec.build.find_links)
    done = _build(tmp_path, spec_file, repo, cache_root, check=False)
    assert done.returncode == 1, done.stderr
    assert "SYNTH_CHIP is not set" in done.stderr, done.stderr
    assert not (tmp_path / "dist" / "synth" / "build-plugin.json").exists()
    # without [runtime] package naming it, the runtime stays in the build lock's request
    bare = load_spec(_spec(tmp_path, commit, own, build_env="", runtime=""))
    kept = plugin_build_request(bare, repo)
    assert kept is not None and RUNTIME in kept.requirements
