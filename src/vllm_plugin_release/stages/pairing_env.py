"""The pairing environment: the core and plugin wheels installed with the hash-locked set
(`vpr lock`), the vendor runtime where the runner has it, and the plugin's checks (env.json)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
import zipfile
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from packaging.utils import canonicalize_name

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import jobanswer, progress, records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file, write_json
from vllm_plugin_release.core.envrecord import (
    SITES,
    EnvCheck,
    EnvChecks,
    EnvRecord,
    parse_checks,
    parse_found,
)
from vllm_plugin_release.core.errors import (
    BadInput,
    GateFailed,
    JobFailed,
    OutsideFailure,
    RecordProblem,
)
from vllm_plugin_release.core.lockfile import check_lock, locked_file, pins
from vllm_plugin_release.core.records import dist_dir, verified_wheel
from vllm_plugin_release.edges import envrun, proc
from vllm_plugin_release.edges.envrun import run_in_env
from vllm_plugin_release.edges.interpreters import Interpreter, Search
from vllm_plugin_release.edges.runner import Command, Runner, host_env
from vllm_plugin_release.edges.uv import find_link_args, uv_bin
from vllm_plugin_release.stages.requests import (
    RuntimePlan,
    env_left_out,
    env_lock_request,
    plan_from_lock,
    runtime_plan,
)
from vllm_plugin_release.stages.wheelbuild import runner_for

if TYPE_CHECKING:
    from vllm_plugin_release.edges.plugin_source import PluginSource

# Bump when the way an environment is made changes (it is part of the cache key).
ENV_RECIPE = 7
WHEELS_STEP = "install core and plugin wheels (--no-deps)"
LOCKED_STEP = "install locked requirements (hashes required)"
# The check that stands for an environment check whose job died, answered garbage or ran
# past its time: the plugin's modules are imported there, so it is a finding about the plugin.
JOB_CHECK = "environment check job"
# The checks of the stand-in overlay that say something the pairing env's cannot.
STAND_IN_CHECKS = ("platform_plugin()", "runtime modules", "platform activation", JOB_CHECK)


@dataclass(frozen=True)
class PairingContext:
    """The spec, its verified sources, where its records go and the site it is made for."""

    spec: Spec
    cache: Cache
    dist_root: Path  # the pairing's records go to dist_root/NAME
    plugin: PluginSource  # the plugin checkout at its pinned commit
    tree: Path  # the verified core source tree
    site: str = "cpu"  # one of SITES
    runtime_env: Path | None = None  # a Python environment bringing the vendor runtime
    search: Search | None = field(default=None, compare=False)  # the interpreter's, ahead
    _interpreters: dict[str, Interpreter] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise BadInput(f"unknown runner {self.site!r}; expected one of {', '.join(SITES)}")

    @property
    def dist(self) -> Path:
        """dist/NAME: the pairing's records and wheels."""
        return dist_dir(self.dist_root, self.spec.name)

    def interpreter(self, runner: Runner) -> Interpreter | None:
        """The CPython the environment is made from, resolved once; None with a runtime env."""
        if self.runtime_env is not None:
            return None
        key = self.spec.build.python
        if key not in self._interpreters:
            if self.search is not None:  # its answer is the runner's once it has ended
                self.search.wait()
            self._interpreters[key] = runner.interpreter(key)
        return self._interpreters[key]


def top_level_packages(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        tops = {
            n.split("/", 1)[0]
            for n in zf.namelist()
            if "/" in n and not n.split("/", 1)[0].endswith((".dist-info", ".data"))
        }
    return sorted(tops)


def _run(runner: Runner, cache: Cache, label: str, argv: list[str]) -> None:
    runner.run(
        Command(label=label, argv=tuple(argv), env=host_env(), downloads=label == LOCKED_STEP),
        cache.root / "logs" / "env.log",
    )


def create_env(
    pairing: PairingContext,
    *,
    conduct_gate: bool = True,
    on_installed: Callable[[Path, str | None], object] | None = None,
) -> EnvRecord:
    """Create and check the pairing environment from the wheels in dist/NAME; a new one calls
    `on_installed(python, runtime module or None)` once its packages are in."""
    spec, dist, plugin = pairing.spec, pairing.dist, pairing.plugin
    runtime_env = pairing.runtime_env
    core, built = (
        records.build_record(dist, name, records.producer(name, spec.path))
        for name in (records.BUILD_CORE, records.BUILD_PLUGIN)
    )
    lock_path = spec.resolve(spec.env_constraints)
    plan = _checked_plan(spec, pairing.site, runtime_env, lock_path)
    request = env_lock_request(spec, pairing.tree, plugin.root, plan, built.requires_list())
    check_lock(lock_path, request)
    stand_in = spec.runtime.stand_in if spec.runtime and pairing.site == "cpu" else None
    with runner_for(
        spec, pairing.cache, folders=(dist, plugin.root), network_isolation="off"
    ) as runner:
        make = _EnvBuild(
            spec,
            runner,
            pairing.cache,
            pairing.site,
            lock_path,
            sha256_file(lock_path),
            core,
            built,
            verified_wheel(dist, core, "vpr build-core"),
            verified_wheel(dist, built, "vpr build-plugin"),
            plan,
            runtime_env,
            stand_in,
            pairing.interpreter(runner),
            on_installed,
        )
        result = {**_made(make), "backend": runner.describe().to_json()}
    left = env_left_out(spec, plugin.root, built.requires_list())
    if left:  # never resolved here: what needs them waits for the runtime
        where = "--runtime-env" if runtime_env else "deferred to the hardware runner"
        result["runtime"] = {
            **result["runtime"],
            "left_out": {"requirements": left, "reason": f"provided by the vendor image ({where})"},
        }
    return _deliver(make, dist, result, conduct_gate)


def _checked_plan(
    spec: Spec, runner_kind: str, runtime_env: Path | None, lock_path: Path
) -> RuntimePlan:
    """The runtime's plan for this runner, the lock's word included; exit 3 on the hardware
    runner without it, 2 for a --runtime-env that is no Python environment."""
    plan = runtime_plan(spec, runner_kind, runtime_env)
    if runner_kind == "hardware" and plan.status in ("absent", "none"):
        raise OutsideFailure(
            f"hardware runner: vendor runtime {plan.name!r} is not available: {plan.reason}",
            hint="run on the hardware runner with the runtime installed, or pass --runtime-env",
        )
    if runtime_env is not None and not (runtime_env / "bin" / "python").exists():
        raise BadInput(f"{runtime_env}: no bin/python; --runtime-env takes a Python environment")
    if lock_path.is_file():
        plan = plan_from_lock(plan, lock_path.read_text(encoding="utf-8"))
    return plan


def _made(make: _EnvBuild) -> dict[str, Any]:
    """The environment's record: the cached one, or made now. Built in place (console
    scripts hold absolute paths), its record written last: a half-built one is never reused."""
    env_dir = make.work
    result_file = env_dir / ".vpr-env.json"
    with make.cache.lock(env_dir):
        kept = records.read_object(result_file, parse_found)  # unusable: made again
        if kept is not None:
            progress.info(f"env: cached environment reused ({env_dir})")
            return kept.to_json()
        shutil.rmtree(env_dir, ignore_errors=True)
        try:
            result = _build(make)
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise
        if make.interpreter is not None:
            result["interpreter"] = make.interpreter.record()
        if not any(c["name"].startswith(JOB_CHECK) for c in result["checks"]):
            write_json(result_file, result)  # else checked again next time (a job that hung)
        return result


def _deliver(
    make: _EnvBuild, dist: Path, result: dict[str, Any], conduct_gate: bool = True
) -> EnvRecord:
    """Write dist/NAME/env.json; GateFailed if a check failed. Without `conduct_gate` (the
    release), a finding about the platform plugin is left to the scorecard, not a stop."""
    spec = make.spec
    result = {**result, "checks": _plugin_findings(result, spec.runtime_module)}
    platform = _platform_class(result["checks"])
    record = {
        "stage": "env",
        "runner": make.runner_kind,
        "python": str(make.work / "bin" / "python"),
        "platform_class": platform,
        "lock_file": spec.env_constraints,
        "lock_sha256": make.lock_sha,
        "core_wheel": make.core.wheel_entry.to_json(),
        "plugin_wheel": make.built.wheel_entry.to_json(),
        **result,
    }
    # checked as every reader will check it before it is written
    written = records.parse_env(dist / records.ENV, record)
    write_json(dist / records.ENV, record)
    failed = [
        c
        for c in written.checks
        if c.status == "fail"
        and (conduct_gate or not (c.name.startswith("platform_plugin()") or c.finding))
    ]
    for check in written.checks:
        progress.info(f"env: {check.status:>8}  {check.name}: {check.detail}")
    if failed:
        raise GateFailed(
            f"env: {len(failed)} check(s) failed: " + "; ".join(c.name for c in failed),
            hint=f"see {dist / records.ENV}",
        )
    return written


def _platform_class(checks: list[dict[str, Any]]) -> str | None:
    """The platform class vLLM resolved, else the one platform_plugin() named; or None."""
    for prefix in ("platform activation", "platform_plugin() runtime present"):
        for check in checks:
            if check["name"].startswith(prefix) and check["status"] == "pass":
                return check.get("value")
    return None


def _plugin_findings(result: dict[str, Any], module: str | None) -> list[dict[str, Any]]:
    """`import vllm` failing for want of the absent runtime marked a finding about the plugin:
    vLLM never imports a vendor runtime, only the plugin's platform can have asked for it."""
    if not module or (result.get("runtime") or {}).get("status") != "absent":
        return list(result["checks"])
    parts = module.split(".")
    missing = {
        f"ModuleNotFoundError: No module named '{'.'.join(parts[:i])}'" for i in (1, len(parts))
    }
    out = []
    for check in result["checks"]:
        if (
            check["name"] == "import vllm"
            and check["status"] == "fail"
            and check.get("detail") in missing
        ):
            check = {
                **check,
                "detail": f"{check['detail']}: the platform plugin activates while vLLM imports "
                f"and needs {module}, so vLLM cannot be imported where the plugin is installed "
                "without its runtime (a finding about the plugin)",
                "finding": "plugin",
            }
        out.append(check)
    return out


def install_steps(
    uv: str,
    python: str,
    venv: Path,
    lock: Path,
    links: list[str],
    wheels: list[Path],
) -> list[tuple[str, list[str]]]:
    """venv, the lock with hashes required, then the two verified wheels with --no-deps."""
    create = [uv, "venv", "--quiet", "--no-python-downloads", "--python", python, str(venv)]
    pip = _pip(uv, venv / "bin" / "python")
    # not --quiet: uv's download lines go to the log (`edges/uv`)
    locked = [*pip[:3], *pip[4:], "--require-hashes", "--index-strategy", "unsafe-best-match"]
    return [
        ("create pairing environment", create),
        (LOCKED_STEP, [*locked, "-r", str(lock), *links]),
        (WHEELS_STEP, [*pip, *map(str, wheels)]),
    ]


def _pip(uv: str, python: Path) -> list[str]:
    return [uv, "pip", "install", "--quiet", "--python", str(python), "--no-deps"]


@dataclass(frozen=True)
class _EnvBuild:
    """What one pairing environment is made from (its key is theirs)."""

    spec: Spec
    runner: Runner
    cache: Cache
    runner_kind: str
    lock_path: Path
    lock_sha: str
    core: BuildRecord  # build-core.json
    built: BuildRecord  # build-plugin.json
    core_wheel: Path
    plugin_wheel: Path
    plan: RuntimePlan
    runtime_env: Path | None
    stand_in: str | None
    interpreter: Interpreter | None  # None with a runtime env (it brings its python)
    on_installed: Callable[[Path, str | None], object] | None = None

    @property
    def present(self) -> bool:
        return self.plan.status in ("install", "runtime-env")

    @property
    def python(self) -> str:
        if self.runtime_env is not None:
            return str(self.runtime_env / "bin" / "python")
        assert self.interpreter is not None
        return self.interpreter.path

    @functools.cached_property
    def _image(self) -> dict[str, Any]:
        env_key = self.runner.env_key
        return {"image": env_key} if env_key else {}

    @functools.cached_property
    def work(self) -> Path:
        """The environment's folder, named by the hash of everything it is made from."""
        interpreter = self.interpreter
        key = key_of(
            {
                # An environment made in an image is keyed by it (the local key is unchanged).
                **self._image,
                "recipe": ENV_RECIPE,
                "lock": self.lock_sha,
                "core": self.core.wheel.sha256,
                "plugin": self.built.wheel.sha256,
                "runner": self.runner_kind,
                "runtime_env": str(self.runtime_env) if self.runtime_env else None,
                "stand_in": self.stand_in,
                "python": self.spec.build.python,
                **({"interpreter": interpreter.identity()} if interpreter else {}),
            }
        )
        return self.cache.env_dir(f"pair-{self.spec.name}", key)

    @property
    def bytecode(self) -> Path:
        """Where bytecode of environments with the same third-party packages and core is kept."""
        kept = {
            "lock": self.lock_sha,
            "core": self.core.wheel.sha256,
            "python": self.spec.build.python,
        }
        return self.cache.root / "bytecode" / key_of({**self._image, **kept})[:16]


def _build(b: _EnvBuild) -> dict[str, Any]:
    present = b.present
    preload = b.plan.module if present else None  # the runtime, imported once by the worker
    overlay_check = not present and b.stand_in
    env_python = b.work / "bin" / "python"
    # The stand-in wheel needs nothing of the pairing env: built while it installs.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vpr-overlay") as pool:
        stand_in_wheel = (
            pool.submit(_stand_in_wheel, b.spec, b.stand_in, b.cache) if overlay_check else None
        )
        with contextlib.ExitStack() as stack:
            # The warm worker imports torch while the wheels install, unless one brings a .pth file.
            early = not (_has_pth(b.core_wheel) or _has_pth(b.plugin_wheel))
            # Outside a session too when the stand-in's check shares it with the env's.
            alone = not overlay_check

            def warm() -> None:
                stack.enter_context(envrun.warm(env_python, for_session=alone, runtime=preload))

            restored = _install(b, warm if early else None)
            packages = top_level_packages(b.plugin_wheel)
            envrun.remember_pyc_store(b.work, b.bytecode, tuple(packages))
            expect = "present" if present else "absent"
            job = EnvCheckJob(
                b.spec.core.version, tuple(packages), b.built.entry_points, b.plan.module, expect
            )
            if not early:
                warm()
            if b.on_installed is not None:  # within `vpr release`: the plugin's tests start
                b.on_installed(env_python, None if present else b.plan.module)
            overlay = (
                pool.submit(_stand_in_check, stand_in_wheel, b.cache, b.runner, b.work, job)
                if stand_in_wheel is not None
                else None
            )
            first = _env_checks(env_python, job)
            stand_in_result = overlay.result() if overlay is not None else None
    if not restored:  # the first of its lock: what the checks compiled, for the next one
        envrun.keep_bytecode(env_python)
    runtime = _runtime_record(b)
    checks = [c.to_json() for c in first.checks] + _runtime_checks(b, runtime, stand_in_result)
    return {
        "runtime": runtime,
        "checks": checks,
        "runtime_modules": [m.to_json() for m in first.runtime_modules],
        "plugin_modules": [m.to_json() for m in first.plugin_modules],
    }


@dataclass(frozen=True)
class EnvCheckJob:
    """The request of inenv/envcheck.py: does the installed pairing hold together?"""

    core_version: str
    packages: tuple[str, ...]  # the plugin's top-level packages
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object reference
    runtime_module: str | None  # the vendor runtime's module (e.g. "ttnn")
    expect_runtime: str  # "absent" | "present"

    module: ClassVar[str] = "envcheck"

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "packages": list(self.packages)}

    def parse_answer(self, answer: Any) -> EnvChecks:
        """The checks and module imports; BadInput naming a key envcheck.py does not write."""
        if not isinstance(answer, dict):
            raise jobanswer.problem(self.module, "(the answer)", answer, "an object")
        try:
            return parse_checks(answer)
        except RecordProblem as problem:
            raise jobanswer.malformed(self.module, str(problem)) from None


def _install(b: _EnvBuild, warm_early: Callable[[], None] | None) -> int:
    """The install steps, the kept bytecode linked in (`warm_early` called once the locked
    packages are in); how many modules' bytecode came from the same lock's env."""
    restored = seeded = 0
    with progress.status(f"env: creating the pairing environment for {b.spec.name}"):
        for label, argv in install_steps(
            b.runner.uv,
            b.python,
            b.work,
            b.lock_path,
            find_link_args(tuple(b.spec.build.find_links)),
            [b.core_wheel, b.plugin_wheel],
        ):
            if label == WHEELS_STEP and warm_early is not None:
                restored, seeded = _bytecode_in(b.work, b.bytecode, b.cache)
                warm_early()
            _run(b.runner, b.cache, label, argv)
            if label == "create pairing environment":
                b.runner.mark(b.work)  # its python runs where it was made (edges/container)
            if label == "create pairing environment" and b.runtime_env is not None:
                _layer_on(b.work, b.runtime_env)
    # the kept bytecode of the two wheels' modules (and all of it when not early)
    more, also = _bytecode_in(b.work, b.bytecode, b.cache, seed=warm_early is None)
    restored, seeded = restored + more, seeded + also
    if restored:
        progress.info(f"env: {restored} modules' bytecode from an environment of the same lock")
    if seeded:
        progress.info(f"env: {seeded} modules' bytecode from the build environment")
    return restored


def _runtime_record(b: _EnvBuild) -> dict[str, Any]:
    """The record's `runtime`: present, absent or none, and what the lock installed."""
    plan = b.plan
    runtime: dict[str, Any] = {"name": plan.name, "module": plan.module, "reason": plan.reason}
    runtime["status"] = "present" if b.present else ("none" if plan.status == "none" else "absent")
    if b.spec.runtime and b.spec.runtime.commit:
        runtime["commit"] = b.spec.runtime.commit
    if plan.requirement:
        runtime["requirement"] = plan.requirement
    if b.present and plan.status == "install":  # what the lock installed: version and wheel
        runtime.update(_runtime_files(b.spec, b.lock_path))
    return runtime


def _runtime_checks(
    b: _EnvBuild, runtime: dict[str, Any], stand_in_result: tuple[EnvChecks, Path, Path] | None
) -> list[dict[str, Any]]:
    """The checks the runtime adds: the stand-in overlay's, a pinned runtime no wheel
    installs here, or the deferral."""
    if stand_in_result is not None:
        second, wheel, overlay_py = stand_in_result
        runtime["stand_in"] = {
            "path": b.stand_in,
            "wheel_sha256": sha256_file(wheel),
            "status": "checked in an overlay environment (test double)",
            "python": str(overlay_py),
        }
        return [
            {
                **check.to_json(),
                "name": check.name + " [stand-in runtime]",
                "detail": check.detail + " (labelled stand-in, not the vendor runtime)",
            }
            for check in second.checks
            if check.name.startswith(STAND_IN_CHECKS)
        ]
    if b.plan.no_wheel:  # pinned, yet no wheel of it installs here: the pairing cannot hold
        return [
            {
                "name": "runtime installs",
                "status": "fail",
                "detail": f"runtime absent because {b.plan.reason}",
                "finding": "spec",
            }
        ]
    if not b.present:
        return [
            {
                "name": "platform_plugin() runtime present",
                "status": "deferred",
                "detail": f"deferred to the hardware runner: {b.plan.reason}",
            }
        ]
    return []


def _runtime_files(spec: Spec, lock_path: Path) -> dict[str, Any]:
    """The runtime's locked version and the wheel the lock's header names for it."""
    text = lock_path.read_text(encoding="utf-8")
    name = canonicalize_name((spec.runtime.package if spec.runtime else None) or "")
    version = pins(text).get(name)
    found = locked_file(text, name)
    return {
        "version": version,
        **({"wheel": found.record(version or "")} if found else {}),
    }


def _has_pth(wheel: Path) -> bool:
    """Whether a wheel installs a .pth file; True for one that cannot be read (its install
    then says what is wrong with it)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return any(name.endswith(".pth") and "/" not in name for name in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return True


def _bytecode_in(env: Path, kept: Path, cache: Cache, *, seed: bool = True) -> tuple[int, int]:
    """Link into `env` the bytecode kept for its lock and, with `seed`, the build envs'."""
    site = envrun.site_packages(env)
    if site is None:
        return 0, 0
    restored = envrun.restore_pyc(kept, site) if kept.is_dir() else 0
    return restored, bytecode_from_build_envs(cache, site) if seed else 0


def bytecode_from_build_envs(cache: Cache, site: Path) -> int:
    """Link into `site` the bytecode of this cache's build environments of the same Python (the
    same torch files), so a lock's first pairing env need not compile them."""
    seeded = 0
    for env in cache.complete_envs("build-core"):
        build_site = envrun.site_packages(env)
        if build_site is not None and build_site.parent.name == site.parent.name:
            seeded += envrun.restore_pyc(build_site, site)
    return seeded


def _stand_in_check(
    stand_in_wheel: Future[Path], cache: Cache, runner: Runner, work: Path, job: EnvCheckJob
) -> tuple[EnvChecks, Path, Path]:
    """(checks, stand-in wheel, overlay python) of the stand-in in an overlay venv that sees the
    pairing env's packages (.pth), which stays what a cpu runner has: no runtime. Each
    site-packages is found by folder (its python may run only in an image)."""
    wheel = stand_in_wheel.result()  # built while the pairing env was installed
    overlay, uv = work / "stand-in-overlay", runner.uv
    venv = [uv, "venv", "--quiet", "--python", str(work / "bin" / "python"), str(overlay)]
    _run(runner, cache, "create stand-in overlay", venv)
    purelib, over_lib = envrun.site_packages(work), envrun.site_packages(overlay)
    if purelib is None or over_lib is None:
        raise OutsideFailure(f"{overlay}: no single lib/python3.*/site-packages to layer on")
    Path(over_lib, "_vpr_pairing_env.pth").write_text(f"{purelib}\n")
    overlay_py = overlay / "bin" / "python"
    _run(
        runner, cache, "install stand-in runtime (test double)", [*_pip(uv, overlay_py), str(wheel)]
    )
    expect = dataclasses.replace(job, expect_runtime="present")
    return _env_checks(work / "bin" / "python", expect, overlay=overlay), wheel, overlay_py


def _env_checks(python: Path, job: EnvCheckJob, overlay: Path | None = None) -> EnvChecks:
    """inenv/envcheck.py's answer; a job that failed is one failed check (a finding about the
    plugin) saying how it ended and its last output line."""
    try:
        return run_in_env(python, job, overlay=overlay)
    except JobFailed as exc:
        last = next((x.strip() for x in reversed(exc.log.splitlines()) if x.strip()), "")
        detail = exc.message.splitlines()[0].rstrip(":") + (
            f"; last output: {last}" if last else ""
        )
        return EnvChecks([EnvCheck(JOB_CHECK, "fail", detail, "plugin")], [], [])


def _purelib(python: Path) -> str:
    purelib = proc.ask_python(
        python,
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        what="asking an interpreter for its site-packages",
    )
    if purelib is None:
        raise BadInput(f"{python}: cannot ask the interpreter for its site-packages")
    return purelib


def _layer_on(env: Path, runtime_env: Path) -> None:
    """The runtime env's packages importable in the pairing env after its own (a .pth line)."""
    lib = Path(_purelib(env / "bin" / "python"))
    lib.joinpath("_vpr_runtime_env.pth").write_text(_purelib(runtime_env / "bin" / "python") + "\n")


def _stand_in_wheel(spec: Spec, stand_in: str, cache: Cache) -> Path:
    """The stand-in runtime wheel (a test double), built reproducibly by `uv build`."""
    root = spec.resolve(stand_in)
    if not (root / "pyproject.toml").exists():
        raise BadInput(f"{root}: [runtime] stand_in has no pyproject.toml")
    epoch = str(spec.core.source_date_epoch)
    files = sorted(
        (p.relative_to(root).as_posix(), sha256_file(p))
        for p in root.rglob("*")
        if p.is_file() and "egg-info" not in p.as_posix() and "__pycache__" not in p.as_posix()
    )
    out = cache.root / "stand-in" / key_of({"files": files, "epoch": epoch})[:16]
    wheels = sorted(out.glob("*.whl"))
    if wheels:
        return wheels[0]
    done = proc.run(
        [uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(root)],
        what="building the stand-in runtime",
        env={**proc.inherited(), "SOURCE_DATE_EPOCH": epoch},
    )
    wheels = sorted(out.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise OutsideFailure(f"building the stand-in runtime failed:\n{done.stderr[-2000:]}")
    return wheels[0]
