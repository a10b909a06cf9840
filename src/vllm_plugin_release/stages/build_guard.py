"""Guard build stage: the vpr-guard wheel (`guard/`, its own in-tree backend), built twice and
compared; the same wheel for every pairing, signed beside the core and the plugin."""

from __future__ import annotations

import hashlib
from pathlib import Path

from vllm_plugin_release import __version__
from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, key_of
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.wheelfacts import wheel_entry_points, wheel_metadata
from vllm_plugin_release.edges import guard
from vllm_plugin_release.stages.corememo import StageResult, reuse
from vllm_plugin_release.stages.wheelbuild import compare_builds, store

STAGE = "build-guard"
RECORD = records.BUILD_GUARD
RECIPE_VERSION = 1
GENERAL_PLUGINS = "vllm.general_plugins"
SOURCE_FILES = ("pyproject.toml", "README.md", "_build/*.py", "src/vpr_guard/*.py")


def source_digest(source: Path) -> str:
    """sha256 over the files the backend reads (relative path and bytes, sorted)."""
    files = sorted({p for pattern in SOURCE_FILES for p in source.glob(pattern) if p.is_file()})
    h = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        h.update(f"{path.relative_to(source).as_posix()}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def stage_key(digest: str) -> str:
    return key_of({"stage": STAGE, "recipe": RECIPE_VERSION, "source": digest})


def build_guard(spec: Spec, *, cache: Cache, dist_root: Path) -> StageResult:
    """The guard's wheel in dist/NAME/ with build-guard.json (cached by its source)."""
    source = guard.guard_source()
    digest = source_digest(source)
    stage_dir = cache.stage_dir(STAGE, stage_key(digest))
    dist = dist_dir(dist_root, spec.name)
    cached = reuse(stage_dir, dist, RECORD, STAGE)
    if cached:
        return cached
    with cache.scratch("build-guard-") as scratch:
        wheels = [guard.build_wheel(source, scratch / letter) for letter in "ab"]
        sha, reproducible = compare_builds(wheels, STAGE)
        meta = wheel_metadata(wheels[0])
        entry_points = wheel_entry_points(wheels[0])
        if not entry_points.get(GENERAL_PLUGINS):
            raise GateFailed(
                f"build-guard: {wheels[0].name} declares no {GENERAL_PLUGINS!r} entry point, so "
                "vLLM would never run it",
                hint=f"check {source / 'pyproject.toml'}",
            )
        record = {
            "stage": STAGE,
            "pipeline_version": __version__,
            "recipe": RECIPE_VERSION,
            "guard": {"name": meta.name, "version": meta.version, "source_sha256": digest},
            "wheel": {"filename": wheels[0].name, "sha256": sha},
            "entry_points": entry_points,
            "reproducible": reproducible,
            "builds_compared": len(wheels),
        }
        result = store(cache, stage_dir, dist, wheels[0], record, RECORD)
    progress.info(f"build-guard: {result.wheel.name} sha256 {sha} (reproducible: {reproducible})")
    return result
