"""Core build stage: vLLM from verified source, VLLM_TARGET_DEVICE=empty, built twice and
compared; the wheel and build-core.json go to dist/NAME, cached under the hash of every input."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.lockfile import check_lock, locked_file, pins
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.edges.fetch import Fetcher
from vllm_plugin_release.edges.interpreters import Search
from vllm_plugin_release.stages import recipes
from vllm_plugin_release.stages.corememo import StageResult
from vllm_plugin_release.stages.requests import build_request
from vllm_plugin_release.stages.wheelbuild import (
    Builds,
    WheelStage,
    build_stage,
    ensure_build_env,
    runner_for,
)

STAGE = "build-core"
RECORD = records.BUILD_CORE
# Bump when the recipe changes in a way that changes the output.
RECIPE_VERSION = 1


def source_record(spec: Spec, fetcher: Fetcher | None = None) -> dict[str, Any]:
    src = spec.core.source
    if isinstance(src, SdistSource):
        record = {
            "kind": "sdist",
            "index": src.index,
            "filename": src.filename,
            "sha256": src.sha256,
        }
        url = fetcher.sdist_url(src) if fetcher else None
        if url:
            record["url"] = url
        return record
    assert isinstance(src, GitSource)
    return {"kind": "git", "url": src.url, "tag": src.tag, "commit": src.commit}


def stage_key(spec: Spec, lock_sha: str, isolated: bool) -> str:
    return key_of(
        {
            "recipe": RECIPE_VERSION,
            "source": source_record(spec),
            "version": spec.core.version,
            "target_device": spec.core.target_device,
            "source_date_epoch": spec.core.source_date_epoch,
            "python": spec.build.python,
            "backend": spec.build.backend,
            "base_image": spec.build.base_image if spec.build.backend == "docker" else None,
            "lock_sha256": lock_sha,
            "reproducibility_check": spec.build.reproducibility_check,
            "isolated": isolated,
        }
    )


def prepare_build_env(spec: Spec, cache: Cache, search: Search | None = None) -> bool:
    """Make the local build environment ahead of the build (it needs only the lock); False when
    anything goes wrong (the stage meets it again). `search`: the interpreter search ahead."""
    if spec.build.backend != "local":
        return False
    try:
        with runner_for(spec, cache) as runner:
            lock_path = spec.resolve(spec.build.constraints)
            lock_sha = sha256_file(lock_path)
            if (
                cache.stage_dir(STAGE, stage_key(spec, lock_sha, runner.isolate)) / RECORD
            ).exists():
                return True
            if search is not None:
                search.wait()
            runner.interpreter(spec.build.python)
            ensure_build_env(spec, lock_path, lock_sha, cache, runner)
    except Exception:  # whatever it is, the stage meets it again and reports it
        return False
    return True


def build_core(
    spec: Spec,
    *,
    cache: Cache,
    dist_root: Path,
    tree: Path,
    fetcher: Fetcher | None = None,
    force: bool = False,
) -> StageResult:
    """Build the core wheel from the verified source `tree` (handed in by the flow)."""
    fetcher = fetcher or Fetcher(cache)
    dist = dist_dir(dist_root, spec.name)
    with runner_for(spec, cache, folders=(tree,)) as runner:
        lock_path = spec.resolve(spec.build.constraints)
        request, declared_torch = build_request(spec, tree)
        try:
            lock_text = check_lock(lock_path, request)
        except BadInput:  # no lock can help while the spec's Python is missing: say that first
            runner.interpreter(spec.build.python)
            raise
        lock_sha = sha256_file(lock_path)
        builds = 2 if spec.build.reproducibility_check else 1
        job = WheelStage(
            Builds(builds, spec.core.source_date_epoch, spec.core.target_device, STAGE),
            RECIPE_VERSION,
            RECORD,
            tree,
            lock_path,
            lock_sha,
            cache.stage_dir(STAGE, stage_key(spec, lock_sha, runner.isolate)),
            dist,
            f"build-core: building vLLM {spec.core.version} (empty target), "
            f"{builds} build{'s' if builds > 1 else ''} in parallel",
            f"isolated: {runner.isolate}",
        )
        build_env = _build_env(spec, lock_sha, lock_text, declared_torch)
        sections = functools.partial(_sections, spec, fetcher, build_env)
        return build_stage(spec, cache, runner, job, force, sections)


def _build_env(spec: Spec, lock_sha: str, lock_text: str, declared: str) -> dict[str, Any]:
    """build-core.json's `build_env`: the build lock, its torch and the torch the core declares."""
    torch_pin = pins(lock_text).get("torch", "")
    return {
        "lock_file": spec.build.constraints,
        "lock_sha256": lock_sha,
        "torch": torch_pin,
        # the file for this Python and platform (`vpr lock` records it; None for a lock
        # written before it did)
        "torch_file": (
            found.record(torch_pin) if (found := locked_file(lock_text, "torch")) else None
        ),
        "core_declared_torch": declared,
        "torch_differs_from_core_pin": bool(declared)
        and not declared.replace(" ", "").endswith(torch_pin),
    }


def _sections(
    spec: Spec, fetcher: Fetcher, build_env: dict[str, Any], first: dict[str, Any], digest: str
) -> dict[str, Any]:
    """build-core.json's own keys: the source, the wheel and the build env; GateFailed for a
    wheel without the target device's local version."""
    wheel, env = first["wheel"], first["env"]
    expected_suffix = f"+{spec.core.target_device}"
    if expected_suffix not in wheel.name:
        raise GateFailed(
            f"build-core: wheel {wheel.name} lacks the {expected_suffix} local version",
            hint="VLLM_TARGET_DEVICE did not reach setup.py",
        )
    return {
        "core": {
            "name": spec.core.name,
            "version": spec.core.version,
            "target_device": spec.core.target_device,
            "source_date_epoch": spec.core.source_date_epoch,
            "source": source_record(spec, fetcher),
        },
        "wheel": {
            "filename": wheel.name,
            "sha256": digest,
            "platform_tag": wheel.stem.split("-", 2)[-1],
            "size": wheel.stat().st_size,
        },
        "build_env": build_env,
        "env": {k: env[k] for k in recipes.RECORDED_ENV if k in env},
        "rust_extensions": "not built (optional; cargo/rustc disabled for the empty target)",
    }
