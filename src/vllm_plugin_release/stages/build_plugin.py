"""Plugin build stage: the plugin wheel from its verified commit, built twice and compared in a
hash-locked build environment without network; it must declare a platform plugin."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vllm_plugin_release import __version__
from vllm_plugin_release.buildspec.model import PluginSpec, Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.lockfile import check_lock, pins
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.wheelfacts import WheelMeta, wheel_entry_points, wheel_metadata
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.edges.runner import Runner
from vllm_plugin_release.stages.corememo import StageResult, reuse
from vllm_plugin_release.stages.requests import (
    PluginBuildPlan,
    build_request,
    plugin_build_plan,
    plugin_build_request,
)
from vllm_plugin_release.stages.wheelbuild import (
    Builds,
    compare_builds,
    ensure_build_env,
    named_interpreter,
    parallel_local_builds,
    runner_for,
    store,
)

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
        stage_dir = cache.stage_dir(STAGE, stage_key(spec, runner, src, lock_sha))
        dist = dist_dir(dist_root, spec.name)
        # a cached result needs no interpreter unless one is named: it must be the one used
        named = named_interpreter(spec, runner)
        cached = None if force else reuse(stage_dir, dist, RECORD, STAGE, named)
        if cached:
            return cached
        runner.interpreter(spec.build.python)  # exit 3 naming the missing interpreter/image

        venv = ensure_build_env(spec, lock_path, lock_sha, cache, runner)
        builds = 2 if spec.build.reproducibility_check else 1
        plan_builds = Builds(builds, src.source_date_epoch, None, STAGE, variables)
        with cache.scratch("build-plugin-", under=runner.scratch_root()) as scratch:
            with progress.status(f"build-plugin: building {_plugin(spec).name} ({builds} builds)"):
                results = parallel_local_builds(runner, venv, src.root, scratch, cache, plan_builds)
            wheels = [r["wheel"] for r in results]
            digest, reproducible = compare_builds(wheels, STAGE)
            b = _PluginBuild(spec, runner, src, lock_file, lock_sha, plan, variables)
            record = _record(b, results, digest, reproducible)
            result = store(cache, stage_dir, dist, wheels[0], record, RECORD)
        progress.info(
            f"build-plugin: {result.wheel.name} sha256 {digest} (reproducible: {reproducible}, "
            f"commit {src.commit})"
        )
        return result


@dataclass(frozen=True)
class _PluginBuild:
    """What one plugin build is made from, handed to its record."""

    spec: Spec
    runner: Runner
    src: PluginSource
    lock_file: str
    lock_sha: str
    plan: PluginBuildPlan  # the plugin's build requirements against the lock
    variables: dict[str, str]


def _record(
    b: _PluginBuild, results: list[dict[str, Any]], digest: str, reproducible: bool | None
) -> dict[str, Any]:
    """build-plugin.json, for the checked wheel (GateFailed for one that is not the plugin)."""
    spec, src, wheel = b.spec, b.src, results[0]["wheel"]
    meta, entry_points = _checked_wheel(spec, wheel)
    return {
        "stage": STAGE,
        "pipeline_version": __version__,
        "recipe": RECIPE_VERSION,
        "plugin": {
            "name": meta.name,
            "version": meta.version,
            "repository": src.repository,
            "commit": src.commit,
            "source_kind": src.kind,
            "requires_dist": list(meta.requires_dist),
            "build_requires": list(b.plan.declared),
            **b.plan.record(),
        },
        "source_date_epoch": src.source_date_epoch,
        "wheel": {"filename": wheel.name, "sha256": digest},
        "entry_points": entry_points,
        "reproducible": reproducible,
        "builds_compared": len(results),
        "isolated": b.runner.isolate,
        "python": results[0]["python"],
        "interpreter": b.runner.interpreter(spec.build.python).record(),
        "build_env": {
            "lock_file": b.lock_file,
            "lock_sha256": b.lock_sha,
            **({"variables": b.variables} if b.variables else {}),
        },
        "backend": b.runner.describe().to_json(),
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
