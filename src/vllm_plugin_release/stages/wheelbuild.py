"""Independent wheel builds in parallel on the spec's runner, each in its own copy of the
source, HOME and TMPDIR, and their comparison; the runner for a spec and the build env."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release import __version__
from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import (
    ENV_COMPLETE,
    Cache,
    key_of,
    remove_tree,
    sha256_file,
    write_json,
)
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.wheelfacts import diff_wheels
from vllm_plugin_release.edges import interpreters, proc
from vllm_plugin_release.edges.container import ContainerRunner
from vllm_plugin_release.edges.interpreters import Interpreter
from vllm_plugin_release.edges.runner import LocalRunner, Runner, host_env
from vllm_plugin_release.edges.uv import machine_cache, pip_find_links
from vllm_plugin_release.stages import recipes
from vllm_plugin_release.stages.corememo import StageResult, deliver, reuse

LETTERS = "ab"


def python_version(runner: Runner, venv: Path) -> str:
    done = runner.call(
        [venv / "bin" / "python", "-c", "import platform; print(platform.python_version())"],
        network=False,
    )
    if done.returncode != 0:
        raise GateFailed(f"{venv}: the build environment's python does not run")
    return done.stdout.strip()


@dataclass(frozen=True)
class Builds:
    """How many builds of a tree run side by side, and what each is given (`extra_env`: the
    spec's `[plugin] build_env`)."""

    count: int
    source_date_epoch: int
    target_device: str | None
    log_name: str
    extra_env: Mapping[str, str] | None = None


def parallel_local_builds(
    runner: Runner, venv: Path, tree: Path, scratch: Path, cache: Cache, builds: Builds
) -> list[dict[str, Any]]:
    """`builds.count` wheel builds of `tree` in parallel: wheel, env and python of each."""
    shim = scratch / "shim"
    shim.mkdir(exist_ok=True)
    for tool in recipes.RUST_TOOLS:
        (shim / tool).write_text(recipes.RUST_SHIM)
        (shim / tool).chmod(0o755)
    logs = cache.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def one(index: int) -> dict[str, Any]:
        work = scratch / f"{builds.log_name}-{LETTERS[index]}"
        src = work / tree.name
        proc.copy_tree(tree, src)
        home = work / "home"
        home.mkdir()
        env = recipes.build_env(
            base=host_env(HOME=str(home), TMPDIR=str(work)),
            venv=str(venv),
            shim=str(shim),
            target_device=builds.target_device,
            source_date_epoch=builds.source_date_epoch,
            extra=builds.extra_env,
        )
        out = work / "out"
        log = logs / f"{builds.log_name}-{LETTERS[index]}.log"
        log.unlink(missing_ok=True)
        runner.run(
            recipes.wheel_command(venv=str(venv), src=str(src), outdir=str(out), env=env), log
        )
        found = sorted(out.glob("*.whl"))
        if len(found) != 1:
            raise GateFailed(
                f"{builds.log_name}: build {index + 1} produced {len(found)} wheels in {out}"
            )
        # This build's tail work, done here while the other build may still run: hash its
        # wheel, remove its copy of the tree (thousands of files; not needed any more).
        digest = sha256_file(found[0])
        remove_tree(src, ignore_errors=True)
        return {"wheel": found[0], "env": env, "sha256": digest}

    # The environment's python is asked while the trees are copied (in a container, a
    # container of its own, slow to start); its failure is the one reported, before a build's.
    with ThreadPoolExecutor(max_workers=builds.count + 1) as pool:
        asked = pool.submit(python_version, runner, venv)
        made = [pool.submit(one, index) for index in range(builds.count)]
        version = asked.result()
        return [{**done.result(), "python": version} for done in made]


def compare_builds(
    wheels: list[Path], stage: str, known: list[str | None] | None = None
) -> tuple[str, bool | None]:
    """sha256 of the first wheel and whether all builds are byte-identical (None: one build;
    `known`: digests already taken); GateFailed naming the differing members when not."""
    given = known or [None] * len(wheels)
    digests = [d or sha256_file(w) for w, d in zip(wheels, given, strict=True)]
    if len({w.name for w in wheels}) != 1:
        raise GateFailed(f"{stage}: the builds named their wheels differently: {wheels}")
    if len(wheels) < 2:
        return digests[0], None
    if len(set(digests)) == 1:
        return digests[0], True
    shown = "\n    ".join(diff_wheels(wheels[0], wheels[1])[:40])
    raise GateFailed(
        f"{stage}: not reproducible: two builds of {wheels[0].name} differ "
        f"({digests[0][:12]} vs {digests[1][:12]}); differing members:\n    {shown}",
        hint="a member that embeds time, path or host breaks reproducibility; "
        "nothing was written to dist/",
    )


@dataclass(frozen=True)
class WheelStage:
    """A wheel stage built on the spec's runner: its builds (named after the stage), the tree
    and build lock they use, and where its result is kept and delivered."""

    builds: Builds
    recipe: int
    record_name: str
    tree: Path
    lock_path: Path
    lock_sha: str
    stage_dir: Path
    dist: Path
    status: str  # what the progress line says while the builds run
    done: str  # what the line about the built wheel ends with


def build_stage(
    spec: Spec,
    cache: Cache,
    runner: Runner,
    job: WheelStage,
    force: bool,
    sections: Callable[[dict[str, Any], str], dict[str, Any]],
) -> StageResult:
    """The cached result of `job` or its builds, compared and stored with a record of the keys
    every such stage writes and `sections(first build, sha256)` (which may raise GateFailed)."""
    stage = job.builds.log_name
    named = named_interpreter(spec, runner)  # a cached wheel of another is not reused
    cached = None if force else reuse(job.stage_dir, job.dist, job.record_name, stage, named)
    if cached:
        return cached
    runner.interpreter(spec.build.python)  # exit 3 naming the missing interpreter/image
    venv = ensure_build_env(spec, job.lock_path, job.lock_sha, cache, runner)
    with cache.scratch(f"{stage}-", under=runner.scratch_root()) as scratch:
        with progress.status(job.status):
            results = parallel_local_builds(runner, venv, job.tree, scratch, cache, job.builds)
        wheels = [r["wheel"] for r in results]
        digest, reproducible = compare_builds(wheels, stage, [r["sha256"] for r in results])
        record = {
            **sections(results[0], digest),
            "stage": stage,
            "pipeline_version": __version__,
            "recipe": job.recipe,
            "reproducible": reproducible,
            "builds_compared": len(results),
            "isolated": runner.isolate,
            "python": results[0]["python"],
            "interpreter": runner.interpreter(spec.build.python).record(),
            "backend": runner.describe().to_json(),
        }
        result = store(cache, job.stage_dir, job.dist, wheels[0], record, job.record_name)
    progress.info(
        f"{stage}: {result.wheel.name} sha256 {digest} (reproducible: {reproducible}, {job.done})"
    )
    return result


def store(
    cache: Cache, stage_dir: Path, dist: Path, wheel: Path, record: dict[str, Any], record_name: str
) -> StageResult:
    """Keep a finished wheel stage under its key (atomically), then deliver it."""
    with cache.publish_dir(stage_dir) as work:
        shutil.copy2(wheel, work / wheel.name)
        # checked as every reader will check it before it is written
        typed = records.parse_build(work / record_name, record_name, record)
        write_json(work / record_name, record)
    delivered, rec = deliver(stage_dir, dist, typed, record_name)
    return StageResult(delivered, rec, typed, cached=False, stage_dir=stage_dir)


def named_interpreter(spec: Spec, runner: Runner) -> tuple[Interpreter, str] | None:
    """The interpreter `--interpreter` or $VPR_INTERPRETER names, checked on `runner`, and which
    named it; None when neither does or a container's image brings its python."""
    if spec.build.backend != "local":
        return None
    named = interpreters.named_by(spec.build.interpreter)
    if named is None:
        return None
    return runner.interpreter(spec.build.python), named[1]


def interpreter_ahead(spec: Spec) -> interpreters.Search | None:
    """Start looking for the spec's CPython now, for a local backend; None for a container."""
    if spec.build.backend != "local":
        return None
    return LocalRunner("off", spec.build.interpreter).interpreter_ahead(spec.build.python)


def runner_for(
    spec: Spec, cache: Cache, *, folders: tuple[Path, ...] = (), network_isolation: str = ""
) -> Runner:
    """The runner the spec's `[build] backend` names; a container mounts `folders` (what the
    commands use beyond the cache and the project) at the same paths."""
    backend = spec.build.backend
    if backend == "local":
        return LocalRunner(
            network_isolation or spec.build.network_isolation, spec.build.interpreter
        )
    if backend == "docker":
        links = [Path(link) for link in [*spec.build.find_links, *pip_find_links()]]
        uv_cache = machine_cache()  # downloads once per machine, shared with local runs
        uv_cache.mkdir(parents=True, exist_ok=True)
        mounts = [cache.root, spec.root, uv_cache, *folders, *(p for p in links if p.is_absolute())]
        return ContainerRunner(
            spec.build.base_image,
            spec.resolve(spec.build.dockerfile),
            mounts,
            uv_cache=uv_cache,
            probes=cache.root / "probes",  # the image's python, asked once per image
        )
    raise BadInput(f"unknown backend {backend!r}; expected 'local' or 'docker'")


# Part of the build env's key: environments made before bytecode was compiled at install
# time are not reused (they would re-compile torch in every build).
BYTECODE = "compiled-at-install"


def ensure_build_env(
    spec: Spec, lock_path: Path, lock_key: str, cache: Cache, runner: Runner
) -> Path:
    """The build venv for this lock, created once and reused (keyed by the lock, the python it
    is made from, and the runner's image)."""
    interpreter = runner.interpreter(spec.build.python)  # exit 3 naming where it looked
    identity: dict[str, object] = {
        "lock": lock_key,
        "python": spec.build.python,
        "bytecode": BYTECODE,
        "interpreter": interpreter.identity(),
    }
    if runner.env_key:
        identity["runner"] = runner.env_key
    venv = cache.env_dir("build-core", key_of(identity))
    marker = venv / ENV_COMPLETE
    if marker.exists():
        return venv
    with cache.lock(venv):  # a second run waits here, then reuses what the first made
        if not marker.exists():
            _create_build_env(spec, lock_path, cache, runner, venv, interpreter.path)
    python = venv / "bin" / "python"
    if not (python.exists() or python.is_symlink()):  # a container env's: its image's python
        raise BadInput(f"{venv}: build environment is incomplete; delete it and retry")
    return venv


def _create_build_env(
    spec: Spec, lock_path: Path, cache: Cache, runner: Runner, venv: Path, python: str
) -> None:
    # Built in place (a venv records its path); the marker is written last, so a
    # half-built environment is never reused.
    shutil.rmtree(venv, ignore_errors=True)
    try:
        with progress.status("build-core: creating build environment"):
            for cmd in recipes.venv_commands(
                uv=runner.uv,
                python=python,
                venv=str(venv),
                lock=str(lock_path),
                find_links=[*spec.build.find_links, *pip_find_links()],
                env=host_env(),
            ):
                runner.run(cmd, cache.root / "logs" / "build-core-env.log")
    except BaseException:
        shutil.rmtree(venv, ignore_errors=True)
        raise
    (venv / ENV_COMPLETE).write_text("ok\n")
