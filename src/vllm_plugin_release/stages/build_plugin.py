"""Plugin build stage: the plugin wheel from its verified commit, built twice and compared in a
hash-locked build environment without network; it must declare a platform plugin."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vllm_plugin_release.buildspec.model import PluginSpec, Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.lockfile import check_lock, pins
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.wheelfacts import WheelMeta, wheel_entry_points, wheel_metadata
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.edges.runner import Runner
from vllm_plugin_release.stages.corememo import StageResult
from vllm_plugin_release.stages.requests import (
    PluginBuildPlan,
    build_request,
    plugin_build_plan,
    plugin_build_request,
)
from vllm_plugin_release.stages.wheelbuild import Builds, WheelStage, build_stage, runner_for

STAGE = "build-plugin"
RECORD = records.BUILD_PLUGIN
RECIPE_VERSION = 2
PLATFORM_GROUP = "vllm.platform_plugins"


def check_build_requirements(
    spec: Spec, root: Path, lock_text: str, lock_file: str
) -> PluginBuildPlan:
    """The plugin's build plan, whose requirements the core build lock's pins must meet; a
    conflict names the plugin's requirement and the lock's pin."""
    plan = plugin_build_plan(spec, root)
    pinned = {canonicalize_name(k): v for k, v in pins(lock_text).items()}
    source = "pyproject.toml" if (root / "pyproject.toml").is_file() else "setup.py"
    for raw in plan.requirements:
        req = Requirement(raw)
        have = pinned.get(canonicalize_name(req.name))
        if have is None or (req.specifier and not req.specifier.contains(have, prereleases=True)):
            where = f"{root / source} (or [plugin] build_requirements)"
            raise BadInput(
                f"{where}: build requirement {raw!r} conflicts with {lock_file}, "
                f"which pins {req.name}=={have}"
                if have
                else f"{where}: build requirement {raw!r} is not in {lock_file}",
                hint="the plugin is built in the core's locked build environment; give it its "
                "own with [plugin] build_constraints (then `vpr lock`), or relax the requirement",
            )
    return plan


def _plugin(spec: Spec) -> PluginSpec:
    """The spec's `[plugin]` (BadInput when it has none: there is nothing to build)."""
    if spec.plugin is None:
        raise BadInput(f"{spec.path}: no [plugin] table", hint="add [plugin] name and source")
    return spec.plugin


def _build_lock(spec: Spec, root: Path, tree: Path) -> tuple[str, PluginBuildPlan]:
    """The build lock the plugin is built in (checked current) and its build plan."""
    own = plugin_build_request(spec, root)
    own_lock = _plugin(spec).build_constraints
    if own is not None and own_lock:  # the plugin's own hash-locked build environment
        check_lock(spec.resolve(own_lock), own)
        return own_lock, plugin_build_plan(spec, root)
    # the core's build lock, which must meet the plugin's build requirements
    lock_file = spec.build.constraints
    request, _ = build_request(spec, tree)
    lock_text = check_lock(spec.resolve(lock_file), request)
    return lock_file, check_build_requirements(spec, root, lock_text, lock_file)


def build_plugin(
    spec: Spec,
    *,
    cache: Cache,
    dist_root: Path,
    plugin: PluginSource,
    tree: Path,
    force: bool = False,
) -> StageResult:
    """Build the plugin wheel from the resolved `plugin` checkout in the core's build lock
    (whose request comes from the verified core source `tree`); both handed in by the flow."""
    src = plugin
    with runner_for(spec, cache, folders=(src.root,)) as runner:
        try:
            lock_file, plan = _build_lock(spec, src.root, tree)
        except BadInput:  # no lock can help while the spec's Python is missing: say that first
            runner.interpreter(spec.build.python)
            raise
        lock_path = spec.resolve(lock_file)
        lock_sha = sha256_file(lock_path)
        variables = dict(sorted(_plugin(spec).build_env.items()))
        builds = 2 if spec.build.reproducibility_check else 1
        job = WheelStage(
            Builds(builds, src.source_date_epoch, None, STAGE, variables),
            RECIPE_VERSION,
            RECORD,
            src.root,
            lock_path,
            lock_sha,
            cache.stage_dir(STAGE, stage_key(spec, runner, src, lock_sha)),
            dist_dir(dist_root, spec.name),
            f"build-plugin: building {_plugin(spec).name} ({builds} builds)",
            f"commit {src.commit}",
        )
        build_env = {
            "lock_file": lock_file,
            "lock_sha256": lock_sha,
            **({"variables": variables} if variables else {}),
        }
        sections = functools.partial(_sections, spec, src, plan, build_env)
        return build_stage(spec, cache, runner, job, force, sections)


def _sections(
    spec: Spec,
    src: PluginSource,
    plan: PluginBuildPlan,
    build_env: dict[str, Any],
    first: dict[str, Any],
    digest: str,
) -> dict[str, Any]:
    """build-plugin.json's own keys, for the checked wheel (GateFailed for one that is not the
    plugin)."""
    wheel = first["wheel"]
    meta, entry_points = _checked_wheel(spec, wheel)
    return {
        "plugin": {
            "name": meta.name,
            "version": meta.version,
            "repository": src.repository,
            "commit": src.commit,
            "source_kind": src.kind,
            "requires_dist": list(meta.requires_dist),
            "build_requires": list(plan.declared),
            **plan.record(),
        },
        "source_date_epoch": src.source_date_epoch,
        "wheel": {"filename": wheel.name, "sha256": digest},
        "entry_points": entry_points,
        "build_env": build_env,
    }


def _checked_wheel(spec: Spec, wheel: Path) -> tuple[WheelMeta, dict[str, dict[str, str]]]:
    """The wheel's metadata and entry points; GateFailed when it is not the spec's plugin or
    declares no platform plugin."""
    meta = wheel_metadata(wheel)
    name = _plugin(spec).name
    if canonicalize_name(meta.name) != canonicalize_name(name):
        raise GateFailed(
            f"build-plugin: the wheel is {meta.name!r}, the spec names {name!r}",
            hint="check [plugin] name",
        )
    entry_points = wheel_entry_points(wheel)
    if not entry_points.get(PLATFORM_GROUP):
        raise GateFailed(
            f"build-plugin: {wheel.name} declares no {PLATFORM_GROUP!r} entry "
            "point, so vLLM would never load it as a platform plugin",
            hint=f'add [project.entry-points."{PLATFORM_GROUP}"] to the plugin\'s pyproject',
        )
    return meta, entry_points


def lock_for(spec: Spec, root: Path, tree: Path) -> Path:
    """The build lock the plugin at `root` is built in, checked current (BadInput)."""
    return spec.resolve(_build_lock(spec, root, tree)[0])


def stage_key(spec: Spec, runner: Runner, src: PluginSource, lock_sha: str) -> str:
    """The stage's cache key: the runner, the plugin's source and tree, the lock."""
    variables = dict(sorted(_plugin(spec).build_env.items()))
    return key_of(
        {
            "runner": runner.describe().to_json(),
            "recipe": RECIPE_VERSION,
            "source": src.record(),
            # in-repo sources: the folder name carries the tree hash; git sources: the commit
            "tree": src.root.parent.name if src.kind == "path" else (src.commit or ""),
            "lock_sha256": lock_sha,
            "python": spec.build.python,
            "reproducibility_check": spec.build.reproducibility_check,
            "isolated": runner.isolate,
            # only when set: the keys of plugins built without it are unchanged
            **({"build_env": variables} if variables else {}),
        }
    )
