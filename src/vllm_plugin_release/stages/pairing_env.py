"""Pairing environment: the core and plugin wheels "compiled against" the vendor runtime.

The dependency set is vLLM's requirements/common.txt from the verified sdist (never
fetched separately), the plugin's declared dependencies, torch from the spec and
[env] requirements, with [env] overrides winning; resolved once by `vpr lock` into
a hash-locked file and installed with hashes required. The two wheels follow with
--no-deps after their sha256 is checked against the build records.

Runners: `cpu` continues without a runtime that cannot be installed here and
reports the checks that need it as deferred; `hardware` fails (exit 3) without it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import zipfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file, write_json
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.lockfile import check_lock, locked_file, pins
from vllm_plugin_release.core.records import dist_dir, verified_wheel
from vllm_plugin_release.edges import envbytecode, envrun, proc
from vllm_plugin_release.edges.envrun import run_in_env
from vllm_plugin_release.edges.plugin_source import PluginSource
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

RUNNERS = ("cpu", "hardware")
ENV_RECORD = records.ENV
# Bump when the way an environment is made changes (it is part of the cache key).
ENV_RECIPE = 7  # 5: platform activation, every plugin module imported; 6, 7: its crash


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
    spec: Spec,
    *,
    cache: Cache,
    dist_root: Path,
    runner_kind: str = "cpu",
    runtime_env: Path | None = None,
    plugin: PluginSource,
    tree: Path,
    conduct_gate: bool = True,
    on_installed: Callable[[Path, str | None], object] | None = None,
) -> dict[str, Any]:
    """Create and check the pairing environment from the wheels in dist/NAME; the plugin
    checkout and the verified core source tree are handed in by the flow. A new
    environment calls `on_installed(python, runtime module or None)` once its packages
    are in, before it is checked (the runtime module: when the runtime is not there)."""
    if runner_kind not in RUNNERS:
        raise BadInput(f"unknown runner {runner_kind!r}; expected one of {', '.join(RUNNERS)}")
    dist = dist_dir(dist_root, spec.name)
    core = records.read(dist, records.BUILD_CORE, records.producer(records.BUILD_CORE, spec.path))
    built = records.read(
        dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN, spec.path)
    )
    core_wheel = verified_wheel(dist, core, "vpr build-core")
    plugin_wheel = verified_wheel(dist, built, "vpr build-plugin")
    plan = runtime_plan(spec, runner_kind, runtime_env)
    if runner_kind == "hardware" and plan.status in ("absent", "none"):
        raise OutsideFailure(
            f"hardware runner: vendor runtime {plan.name!r} is not available: {plan.reason}",
            hint="run on the hardware runner with the runtime installed, or pass --runtime-env",
        )
    if runtime_env is not None and not (runtime_env / "bin" / "python").exists():
        raise BadInput(f"{runtime_env}: no bin/python; --runtime-env takes a Python environment")
    lock_path = spec.resolve(spec.env_constraints)
    if lock_path.is_file():  # a runtime that no wheel installs here: absent, and why
        plan = plan_from_lock(plan, lock_path.read_text(encoding="utf-8"))
    request = env_lock_request(spec, tree, plugin.root, plan, built["plugin"].get("requires_dist"))
    check_lock(lock_path, request)
    lock_sha = sha256_file(lock_path)
    stand_in = spec.runtime.get("stand_in") if runner_kind == "cpu" else None
    with runner_for(spec, cache, folders=(dist, plugin.root), network_isolation="off") as runner:
        # exit 3 naming every place searched; a --runtime-env brings its own python
        interpreter = runner.interpreter(spec.build.python) if runtime_env is None else None
        key = key_of(
            {
                # An environment made in an image is keyed by it (the local key is unchanged).
                **({"image": runner.env_key} if runner.env_key else {}),
                "recipe": ENV_RECIPE,
                "lock": lock_sha,
                "core": core["wheel"]["sha256"],
                "plugin": built["wheel"]["sha256"],
                "runner": runner_kind,
                "runtime_env": str(runtime_env) if runtime_env else None,
                "stand_in": stand_in,
                "python": spec.build.python,
                **({"interpreter": interpreter.identity()} if interpreter else {}),
            }
        )
        env_dir = cache.env_dir(f"pair-{spec.name}", key)
        # The bytecode kept from environments with the same third-party packages and core.
        bytecode = (
            cache.root
            / "bytecode"
            / key_of(
                {
                    **({"image": runner.env_key} if runner.env_key else {}),
                    "lock": lock_sha,
                    "core": core["wheel"]["sha256"],
                    "python": spec.build.python,
                }
            )[:16]
        )
        result_file = env_dir / ".vpr-env.json"
        with cache.lock(env_dir):  # a second run waits here, then reuses the env
            if result_file.exists():
                result = json.loads(result_file.read_text())
                progress.info(f"env: cached environment reused ({env_dir})")
            else:
                # Built in place (console scripts hold absolute paths); the marker file is
                # written last, so a half-built environment is never reused.
                shutil.rmtree(env_dir, ignore_errors=True)
                python = str(runtime_env / "bin" / "python") if runtime_env else interpreter.path
                try:
                    result = _build(
                        spec,
                        python,
                        env_dir,
                        runner,
                        cache,
                        lock_path,
                        core_wheel,
                        plugin_wheel,
                        built,
                        plan,
                        runtime_env,
                        stand_in,
                        bytecode,
                        on_installed,
                    )
                except BaseException:
                    shutil.rmtree(env_dir, ignore_errors=True)
                    raise
                if interpreter is not None:
                    result["interpreter"] = interpreter.record()
                write_json(result_file, result)
        result = {**result, "backend": runner.describe()}  # where the environment runs
        left = env_left_out(spec, plugin.root, built["plugin"].get("requires_dist"))
        if left:  # never resolved here: what needs them waits for the runtime
            where = "--runtime-env" if runtime_env else "deferred to the hardware runner"
            result["runtime"] = {
                **result["runtime"],
                "left_out": {
                    "requirements": left,
                    "reason": f"provided by the vendor image ({where})",
                },
            }
        return _deliver(
            spec, dist, runner_kind, env_dir, lock_sha, core, built, result, conduct_gate
        )


def _deliver(
    spec: Spec,
    dist: Path,
    runner_kind: str,
    env_dir: Path,
    lock_sha: str,
    core: dict[str, Any],
    built: dict[str, Any],
    result: dict[str, Any],
    conduct_gate: bool = True,
) -> dict[str, Any]:
    """Write dist/NAME/env.json for the environment's checks; GateFailed if one failed.
    Without `conduct_gate` (the release), how the platform plugin answers is left to the
    scorecard's environment check: a finding about the plugin, not a stop."""
    result = {**result, "checks": _plugin_findings(result, spec.runtime.get("module"))}
    platform = _platform_class(result["checks"])
    record = {
        "stage": "env",
        "runner": runner_kind,
        "python": str(env_dir / "bin" / "python"),
        "platform_class": platform,
        "lock_file": spec.env_constraints,
        "lock_sha256": lock_sha,
        "core_wheel": core["wheel"],
        "plugin_wheel": built["wheel"],
        **result,
    }
    write_json(dist / ENV_RECORD, record)
    failed = [
        c
        for c in record["checks"]
        if c["status"] == "fail"
        and (conduct_gate or not (c["name"].startswith("platform_plugin()") or c.get("finding")))
    ]
    for check in record["checks"]:
        progress.info(f"env: {check['status']:>8}  {check['name']}: {check['detail']}")
    if failed:
        raise GateFailed(
            f"env: {len(failed)} check(s) failed: " + "; ".join(c["name"] for c in failed),
            hint=f"see {dist / ENV_RECORD}",
        )
    return record


def _platform_class(checks: list[dict[str, Any]]) -> str | None:
    """The platform class vLLM resolved to the plugin's (its own discovery: `platform
    activation`), else the one the plugin's platform_plugin() named; None when neither."""
    for prefix in ("platform activation", "platform_plugin() runtime present"):
        for check in checks:
            if check["name"].startswith(prefix) and check["status"] == "pass":
                return check.get("value")
    return None


def _plugin_findings(result: dict[str, Any], module: str | None) -> list[dict[str, Any]]:
    """The checks, with `import vllm` failing for want of the absent runtime marked as a
    finding about the plugin: vLLM itself never imports a vendor runtime, so only the
    plugin's platform (activated while vLLM imports) can have asked for it."""
    if not module or result.get("runtime", {}).get("status") != "absent":
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
            and check["detail"] in missing
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
    """The commands that make a pairing environment: venv, the lock with hashes required,
    then the two verified wheels with --no-deps."""
    create = [uv, "venv", "--quiet", "--no-python-downloads", "--python", python, str(venv)]
    py = str(venv / "bin" / "python")
    pip = [uv, "pip", "install", "--quiet", "--python", py, "--no-deps"]
    return [
        ("create pairing environment", create),
        (
            LOCKED_STEP,
            [
                *pip[:3],
                *pip[4:],  # not --quiet: uv's download lines go to the log (`edges/uvwatch`)
                "--require-hashes",
                "--index-strategy",
                "unsafe-best-match",
                "-r",
                str(lock),
                *links,
            ],
        ),
        (WHEELS_STEP, [*pip, *map(str, wheels)]),
    ]


def _build(
    spec: Spec,
    python: str,
    work: Path,
    runner: Runner,
    cache: Cache,
    lock_path: Path,
    core_wheel: Path,
    plugin_wheel: Path,
    plugin: dict[str, Any],
    plan: RuntimePlan,
    runtime_env: Path | None,
    stand_in: str | None,
    bytecode: Path,
    on_installed: Callable[[Path, str | None], object] | None = None,
) -> dict[str, Any]:
    uv = runner.uv
    present = plan.status in ("install", "runtime-env")
    preload = plan.module if present else None  # the runtime, imported once by the worker
    overlay_check = not present and stand_in
    # The stand-in wheel needs nothing of the pairing env: built while it installs.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vpr-overlay") as pool:
        stand_in_wheel = (
            pool.submit(_stand_in_wheel, spec, stand_in, cache) if overlay_check else None
        )
        with contextlib.ExitStack() as stack:
            # In the env's warm worker (within `vpr release`: it stays for conform's in-env
            # checks; outside it, for the two env checks), started as soon as the locked
            # packages and their bytecode are in:
            # it imports torch while the two wheels are installed (unless a wheel brings a
            # .pth file, which only an interpreter started after it would have read).
            early = not (_has_pth(core_wheel) or _has_pth(plugin_wheel))
            # Outside a session too when the stand-in's check shares it with the env's.
            alone = not overlay_check
            restored = seeded = 0
            with progress.status(f"env: creating the pairing environment for {spec.name}"):
                for label, argv in install_steps(
                    uv,
                    python,
                    work,
                    lock_path,
                    find_link_args(tuple(spec.build.find_links)),
                    [core_wheel, plugin_wheel],
                ):
                    if label == WHEELS_STEP and early:
                        restored, seeded = _bytecode_in(work, bytecode, cache)
                        stack.enter_context(
                            envrun.warm(work / "bin" / "python", for_session=alone, runtime=preload)
                        )
                    _run(runner, cache, label, argv)
                    if label == "create pairing environment":
                        runner.mark(work)  # its python runs where it was made (edges/container)
                    if label == "create pairing environment" and runtime_env is not None:
                        _layer_on(work, runtime_env)
            # the kept bytecode of the two wheels' modules (and all of it when not early)
            more, also = _bytecode_in(work, bytecode, cache, seed=not early)
            restored, seeded = restored + more, seeded + also
            if restored:
                progress.info(
                    f"env: {restored} modules' bytecode from an environment of the same lock"
                )
            if seeded:
                progress.info(f"env: {seeded} modules' bytecode from the build environment")
            packages = top_level_packages(plugin_wheel)
            envbytecode.remember(work, bytecode, tuple(packages))
            request = {
                "core_version": spec.core.version,
                "packages": packages,
                "entry_points": plugin["entry_points"],
                "runtime_module": plan.module,
            }
            if not early:
                stack.enter_context(
                    envrun.warm(work / "bin" / "python", for_session=alone, runtime=preload)
                )
            if on_installed is not None:  # within `vpr release`: the plugin's tests start
                on_installed(work / "bin" / "python", None if present else plan.module)
            # The stand-in overlay is made and checked while the pairing env is checked, side
            # by side: two forked copies of the warm worker when it is up, else two
            # interpreters. (Results are put together in order.)
            overlay = (
                pool.submit(_stand_in_check, stand_in_wheel, cache, runner, work, request)
                if stand_in_wheel is not None
                else None
            )
            first = run_in_env(
                work / "bin" / "python",
                "envcheck",
                {**request, "expect_runtime": "present" if present else "absent"},
            )
            stand_in_result = overlay.result() if overlay is not None else None
    if not restored:  # the first of its lock: what the checks compiled, for the next one
        envrun.keep_bytecode(work / "bin" / "python")
    checks = list(first["checks"])
    runtime: dict[str, Any] = {"name": plan.name, "module": plan.module, "reason": plan.reason}
    runtime["status"] = "present" if present else ("none" if plan.status == "none" else "absent")
    if spec.runtime.get("commit"):
        runtime["commit"] = spec.runtime["commit"]
    if plan.requirement:
        runtime["requirement"] = plan.requirement
    if present and plan.status == "install":  # what the lock installed: version and wheel
        runtime.update(_runtime_files(spec, lock_path))
    if stand_in_result is not None:
        second, wheel, overlay_py = stand_in_result
        for check in second["checks"]:
            if check["name"].startswith(STAND_IN_CHECKS):
                check = {
                    **check,
                    "name": check["name"] + " [stand-in runtime]",
                    "detail": check["detail"] + " (labelled stand-in, not the vendor runtime)",
                }
                checks.append(check)
        runtime["stand_in"] = {
            "path": stand_in,
            "wheel_sha256": sha256_file(wheel),
            "status": "checked in an overlay environment (test double)",
            "python": str(overlay_py),
        }
    elif plan.no_wheel:  # pinned, yet no wheel of it installs here: the pairing cannot hold
        checks.append(
            {
                "name": "runtime installs",
                "status": "fail",
                "detail": f"runtime absent because {plan.reason}",
                "finding": "spec",
            }
        )
    elif not present:
        checks.append(
            {
                "name": "platform_plugin() runtime present",
                "status": "deferred",
                "detail": f"deferred to the hardware runner: {plan.reason}",
            }
        )
    return {
        "runtime": runtime,
        "checks": checks,
        "runtime_modules": first["runtime_modules"],
        "plugin_modules": first.get("plugin_modules", []),
    }


WHEELS_STEP = "install core and plugin wheels (--no-deps)"
# The checks of the stand-in overlay that say something the pairing env's cannot.
STAND_IN_CHECKS = ("platform_plugin()", "runtime modules", "platform activation")
LOCKED_STEP = "install locked requirements (hashes required)"


def _runtime_files(spec: Spec, lock_path: Path) -> dict[str, Any]:
    """The runtime's locked version and the wheel the lock installs for this Python
    (named in the lock's header by `vpr lock`)."""
    text = lock_path.read_text(encoding="utf-8")
    name = canonicalize_name(spec.runtime.get("package", ""))
    version = pins(text).get(name)
    found = locked_file(text, name)
    return {
        "version": version,
        **({"wheel": found.record(version or "")} if found else {}),
    }


def _has_pth(wheel: Path) -> bool:
    """Whether a wheel installs a .pth file (read by `site` when an interpreter starts);
    True for one that cannot be read (its install then says what is wrong with it)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return any(name.endswith(".pth") and "/" not in name for name in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return True


def _bytecode_in(env: Path, kept: Path, cache: Cache, *, seed: bool = True) -> tuple[int, int]:
    """Link into `env` the bytecode kept for its lock (for the files installed so far:
    `envbytecode.restore` links a pyc only beside the very file it was written for) and,
    with `seed`, the build environments'; (restored, seeded)."""
    site = envbytecode.site_packages(env)
    if site is None:
        return 0, 0
    restored = envbytecode.restore(kept, site) if kept.is_dir() else 0
    return restored, bytecode_from_build_envs(cache, site) if seed else 0


def bytecode_from_build_envs(cache: Cache, site: Path) -> int:
    """Link into `site` the bytecode of this cache's build environments (installed with
    their bytecode): torch and its dependencies are the very same files there, linked
    from uv's cache, so a lock's first pairing env need not compile them again.
    `envbytecode.restore` puts a pyc only beside the very file it was written for."""
    seeded = 0
    for env in cache.complete_envs("build-core"):
        build_site = envbytecode.site_packages(env)
        if build_site is not None:
            seeded += envbytecode.restore(build_site, site)
    return seeded


def _stand_in_check(
    stand_in_wheel: Future[Path],
    cache: Cache,
    runner: Runner,
    work: Path,
    request: dict[str, Any],
) -> tuple[dict[str, Any], Path, Path]:
    """The stand-in goes into an overlay environment layered on the pairing env, so the
    pairing env itself stays exactly what a cpu runner has: no runtime. (envcheck result,
    stand-in wheel, overlay python). With the pairing env's warm worker up, the check
    runs in a forked copy of it with the overlay's site-packages first, as the overlay's
    python would run it (`run_in_env(overlay=...)`): torch and the rest are not imported
    a second time."""
    wheel = stand_in_wheel.result()  # built while the pairing env was installed
    overlay_py = _overlay(runner, cache, runner.uv, work, work / "stand-in-overlay", wheel)
    second = run_in_env(
        work / "bin" / "python",
        "envcheck",
        {**request, "expect_runtime": "present"},
        overlay=work / "stand-in-overlay",
    )
    return second, wheel, overlay_py


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
    """Make the runtime environment's packages importable in the pairing env, after its own
    (a .pth line is appended to sys.path, so the pairing's pinned packages win)."""
    lib = Path(_purelib(env / "bin" / "python"))
    lib.joinpath("_vpr_runtime_env.pth").write_text(_purelib(runtime_env / "bin" / "python") + "\n")


def _overlay(runner: Runner, cache: Cache, uv: str, base: Path, overlay: Path, wheel: Path) -> Path:
    """A venv that sees the pairing env's packages (.pth) plus the stand-in runtime. Each
    site-packages is the environment's own (its Python's version, not vpr's: a 3.10 pairing
    env has lib/python3.10), found in its folder (its python may run only in an image)."""
    _run(
        runner,
        cache,
        "create stand-in overlay",
        [uv, "venv", "--quiet", "--python", str(base / "bin" / "python"), str(overlay)],
    )
    purelib, over_lib = envbytecode.site_packages(base), envbytecode.site_packages(overlay)
    if purelib is None or over_lib is None:
        raise OutsideFailure(f"{overlay}: no single lib/python3.*/site-packages to layer on")
    Path(over_lib, "_vpr_pairing_env.pth").write_text(f"{purelib}\n")
    _run(
        runner,
        cache,
        "install stand-in runtime (test double)",
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(overlay / "bin" / "python"),
            "--no-deps",
            str(wheel),
        ],
    )
    return overlay / "bin" / "python"


def _stand_in_wheel(spec: Spec, stand_in: str, cache: Cache) -> Path:
    """Build the stand-in runtime wheel (a test double) with `uv build`, reproducibly: the
    same sources and SOURCE_DATE_EPOCH (the spec's) give the same wheel bytes."""
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
