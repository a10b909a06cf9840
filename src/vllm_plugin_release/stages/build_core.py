"""Core build stage: vLLM from verified source, VLLM_TARGET_DEVICE=empty, twice, compared.

Inputs: the spec (source pin, target, SOURCE_DATE_EPOCH, python, backend) and the
hash-locked build requirements. Output: `dist/NAME/<wheel>` and
`dist/NAME/build-core.json`. The result is cached under `.vpr/stages/build-core/<key>`
where key is the hash of every input, so a re-run with nothing changed does no work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_plugin_release import __version__
from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.lockfile import check_lock, locked_file, pins
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.edges.fetch import Fetcher
from vllm_plugin_release.edges.runner import Runner
from vllm_plugin_release.stages import recipes
from vllm_plugin_release.stages.requests import build_request
from vllm_plugin_release.stages.wheelbuild import (
    StageResult,
    compare_builds,
    ensure_build_env,
    parallel_local_builds,
    reuse,
    runner_for,
    store,
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


def prepare_build_env(spec: Spec, cache: Cache) -> bool:
    """Make the build environment ahead of the build: it needs only the lock, so it can be
    made while the source is still being fetched. Nothing when the stage's result is
    cached or the environment exists. What goes wrong here (no such Python, no lock, a
    failed install) is left to the stage, which meets it again and says so: False.
    Local runner only: in a container the image may first have to be built, which is the
    stage's own business (progress, errors)."""
    if spec.build.backend != "local":
        return False
    try:
        with runner_for(spec, cache) as runner:
            lock_path = spec.resolve(spec.build.constraints)
            lock_sha = sha256_file(lock_path)
            key = stage_key(spec, lock_sha, runner.isolate)
            if (cache.stage_dir(STAGE, key) / RECORD).exists():
                return True
            runner.require_python(spec.build.python)
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
        isolated = runner.isolate
        lock_path = spec.resolve(spec.build.constraints)
        request, declared_torch = build_request(spec, tree)
        try:
            lock_text = check_lock(lock_path, request)
        except BadInput:  # no lock can help while the spec's Python is missing: say that first
            runner.require_python(spec.build.python)
            raise
        lock_sha = sha256_file(lock_path)
        key = stage_key(spec, lock_sha, isolated)
        stage_dir = cache.stage_dir(STAGE, key)
        cached = None if force else reuse(stage_dir, dist, RECORD, STAGE)
        if cached:
            return cached
        runner.require_python(spec.build.python)  # exit 3 naming the missing interpreter/image

        torch_pin = pins(lock_text).get("torch", "")
        with cache.scratch("build-core-", under=runner.scratch_root()) as scratch:
            builds = 2 if spec.build.reproducibility_check else 1
            with progress.status(
                f"build-core: building vLLM {spec.core.version} (empty target), "
                f"{builds} build{'s' if builds > 1 else ''} in parallel"
            ):
                results = runner_build(
                    runner, spec, tree, lock_path, scratch, cache, builds=builds, lock_key=lock_sha
                )
            wheels = [r["wheel"] for r in results]
            digest, reproducible = compare_builds(wheels, STAGE, [r.get("sha256") for r in results])
            expected_suffix = f"+{spec.core.target_device}"
            if expected_suffix not in wheels[0].name:
                raise GateFailed(
                    f"build-core: wheel {wheels[0].name} lacks the {expected_suffix} local version",
                    hint="VLLM_TARGET_DEVICE did not reach setup.py",
                )
            env = results[0]["env"]
            record = {
                "stage": STAGE,
                "pipeline_version": __version__,
                "recipe": RECIPE_VERSION,
                "core": {
                    "name": spec.core.name,
                    "version": spec.core.version,
                    "target_device": spec.core.target_device,
                    "source_date_epoch": spec.core.source_date_epoch,
                    "source": source_record(spec, fetcher),
                },
                "wheel": {
                    "filename": wheels[0].name,
                    "sha256": digest,
                    "platform_tag": wheels[0].stem.split("-", 2)[-1],
                    "size": wheels[0].stat().st_size,
                },
                "reproducible": reproducible,
                "builds_compared": builds,
                "isolated": isolated,
                "python": results[0]["python"],
                "interpreter": runner.interpreter(spec.build.python).record(),
                "build_env": {
                    "lock_file": spec.build.constraints,
                    "lock_sha256": lock_sha,
                    "torch": torch_pin,
                    # the file for this Python and platform (`vpr lock` records it; None for
                    # a lock written before it did)
                    "torch_file": (
                        found.record(torch_pin)
                        if (found := locked_file(lock_text, "torch"))
                        else None
                    ),
                    "core_declared_torch": declared_torch,
                    "torch_differs_from_core_pin": bool(declared_torch)
                    and not declared_torch.replace(" ", "").endswith(torch_pin),
                },
                "env": {k: env[k] for k in recipes.RECORDED_ENV if k in env},
                "rust_extensions": (
                    "not built (optional; cargo/rustc disabled for the empty target)"
                ),
                "backend": runner.describe(),
            }
            result = store(cache, stage_dir, dist, wheels[0], record, RECORD)
        progress.info(
            f"build-core: {result.wheel.name} sha256 {digest} "
            f"(reproducible: {reproducible}, isolated: {isolated})"
        )
        return result


def runner_build(
    runner: Runner,
    spec: Spec,
    tree: Path,
    lock_path: Path,
    scratch: Path,
    cache: Cache,
    *,
    builds: int,
    lock_key: str,
) -> list[dict[str, Any]]:
    """Run `builds` independent builds through the runner (in parallel); return their wheels."""
    venv = ensure_build_env(spec, lock_path, lock_key, cache, runner)
    return parallel_local_builds(
        runner,
        venv,
        tree,
        scratch,
        cache,
        builds=builds,
        source_date_epoch=spec.core.source_date_epoch,
        target_device=spec.core.target_device,
        log_name=STAGE,
    )
