"""`vpr fetch`, `vpr lock`, `vpr build-core`."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache


def add_spec_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec",
        default="buildspec/reference.toml",
        help="buildspec file (default: buildspec/reference.toml)",
    )


def add_dirs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dist", default="dist", help="output root (default: dist)")
    parser.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $VPR_CACHE_DIR or .vpr)"
    )


def add_plugin_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin-source",
        type=Path,
        default=None,
        metavar="PATH",
        help="a local git checkout of the plugin (must contain the pinned commit), "
        "used instead of [plugin.source] url",
    )


def add_runner(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runner",
        default="cpu",
        help="cpu (default: no accelerator, runtime checks deferred) or hardware",
    )


def register(sub: argparse._SubParsersAction) -> None:
    fetch = sub.add_parser("fetch", help="download and verify the core source into the cache")
    add_spec_argument(fetch)
    add_dirs(fetch)
    fetch.set_defaults(func=_fetch)

    lock = sub.add_parser("lock", help="resolve the hash-locked build requirements")
    add_spec_argument(lock)
    add_dirs(lock)
    add_plugin_source(lock)
    lock.add_argument(
        "--check", action="store_true", help="only check that the lock is current (exit 2 if not)"
    )
    lock.set_defaults(func=_lock)

    build = sub.add_parser(
        "build-core", help="build the vLLM wheel (empty target), twice, and compare"
    )
    add_spec_argument(build)
    add_dirs(build)
    build.add_argument("--force", action="store_true", help="ignore the cached result")
    build.set_defaults(func=_build_core)

    plugin = sub.add_parser(
        "build-plugin", help="build the plugin wheel from its pinned commit, twice, and compare"
    )
    add_spec_argument(plugin)
    add_dirs(plugin)
    add_plugin_source(plugin)
    plugin.add_argument("--force", action="store_true", help="ignore the cached result")
    plugin.set_defaults(func=_build_plugin)

    env = sub.add_parser("env", help="create and check the pairing environment for a runner")
    add_spec_argument(env)
    add_dirs(env)
    add_plugin_source(env)
    add_runner(env)
    env.add_argument(
        "--runtime-env",
        type=Path,
        default=None,
        metavar="PATH",
        help="an existing vendor runtime Python environment (e.g. TT-Metal's python_env)",
    )
    env.set_defaults(func=_env)

    tests = sub.add_parser(
        "plugin-tests", help="run the plugin's own tests in the pairing environment (JUnit XML)"
    )
    add_spec_argument(tests)
    add_dirs(tests)
    add_plugin_source(tests)
    add_runner(tests)
    tests.add_argument(
        "--baseline",
        metavar="VERSION",
        default=None,
        help="also run against this core version and report regressions "
        "('auto': the version the plugin's installer pins)",
    )
    tests.set_defaults(func=_plugin_tests)


def _fetch(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges.fetch import Fetcher
    from vllm_plugin_release.spec.model import load
    from vllm_plugin_release.stages.build_core import source_tree

    spec = load(args.spec)
    tree = source_tree(spec, Fetcher(Cache.from_args(args)))
    progress.info(f"fetch: verified source at {tree}")
    print(tree)
    return 0


def _lock(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges.fetch import Fetcher
    from vllm_plugin_release.spec.model import load
    from vllm_plugin_release.stages.build_core import lock_request, source_tree
    from vllm_plugin_release.stages.lock import check_lock, compile_lock

    spec = load(args.spec)
    cache = Cache.from_args(args)
    tree = source_tree(spec, Fetcher(cache))
    request, _ = lock_request(spec, tree)
    locks = [(request, spec.resolve(spec.build.constraints))]
    if spec.plugin:
        from vllm_plugin_release.edges.plugin_source import resolve
        from vllm_plugin_release.stages.pairing_env import env_lock_request, runtime_plan

        src = resolve(spec, cache, args.plugin_source)
        plan = runtime_plan(spec, "cpu", None)
        locks.append(
            (env_lock_request(spec, tree, src.root, plan), spec.resolve(spec.env_constraints))
        )
    for req, dest in locks:
        if args.check:
            check_lock(dest, req)
            progress.info(f"lock: {dest} is current")
            continue
        with progress.status(f"lock: resolving {req.name} for Python {req.python}"):
            compile_lock(req, dest, spec.build.find_links)
        progress.info(f"lock: wrote {dest}")
    return 0


def _build_core(args: argparse.Namespace) -> int:
    from vllm_plugin_release.spec.model import load
    from vllm_plugin_release.stages.build_core import build_core

    spec = load(args.spec)
    result = build_core(
        spec, cache=Cache.from_args(args), dist_root=Path(args.dist), force=args.force
    )
    print(result.wheel)
    return 0


def _env(args: argparse.Namespace) -> int:
    from vllm_plugin_release.spec.model import load
    from vllm_plugin_release.stages.pairing_env import create_env

    spec = load(args.spec)
    record = create_env(
        spec,
        cache=Cache.from_args(args),
        dist_root=Path(args.dist),
        runner_kind=args.runner,
        runtime_env=args.runtime_env,
        plugin_source=args.plugin_source,
    )
    print(record["python"])
    return 0


def _build_plugin(args: argparse.Namespace) -> int:
    from vllm_plugin_release.spec.model import load
    from vllm_plugin_release.stages.build_plugin import build_plugin

    spec = load(args.spec)
    result = build_plugin(
        spec,
        cache=Cache.from_args(args),
        dist_root=Path(args.dist),
        plugin_source=args.plugin_source,
        force=args.force,
    )
    print(result.wheel)
    return 0


def _plugin_tests(args: argparse.Namespace) -> int:
    import json

    from vllm_plugin_release.conform import plugin_tests as pt
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.edges.plugin_source import resolve
    from vllm_plugin_release.spec.model import load

    spec = load(args.spec)
    cache = Cache.from_args(args)
    dist = Path(args.dist) / spec.name
    env_file = dist / "env.json"
    try:
        env = json.loads(env_file.read_text())
    except FileNotFoundError:
        raise BadInput(f"{env_file}: not found", hint=f"run `vpr env --spec {args.spec}` first")
    if env.get("runner") != args.runner:
        raise BadInput(
            f"{env_file}: the environment is for runner {env.get('runner')!r}, not {args.runner!r}",
            hint=f"run `vpr env --spec {args.spec} --runner {args.runner}` first",
        )
    cfg = pt.settings(spec.conformance, str(spec.path))
    src = resolve(spec, cache, args.plugin_source)
    with cache.scratch("plugin-tests-") as tmp:
        module = env.get("runtime", {}).get("module")
        if env.get("runtime", {}).get("status") == "present":
            module = None  # a present runtime never excuses a failure
        run = pt.run_tests(
            Path(env["python"]), src.root, args.runner, cfg, tmp / "junit.xml", module
        )
        (dist / f"plugin-tests-{args.runner}.xml").write_bytes((tmp / "junit.xml").read_bytes())
        base_run = None
        version = None
        if args.baseline:
            from vllm_plugin_release.flows.baseline import baseline_python

            version = args.baseline
            if version == "auto":
                version = installer_pin(spec, src.root)
            python = baseline_python(
                spec, version, cache=cache, dist=dist, plugin_source=args.plugin_source
            )
            base_run = pt.run_tests(python, src.root, "cpu", cfg, tmp / "baseline.xml", module)
    record = pt.write_record(dist, run, base_run, version, spec.core.version)
    c = run.counts
    progress.info(
        f"plugin-tests ({args.runner}): {c['passed']} passed, {c['failed']} failed, "
        f"{c['error']} errors, {c['skipped']} skipped, {c['deferred']} deferred (need the runtime)"
    )
    for test in run.failing:
        progress.info(f"  failing: {test}")
    for path in run.deferred:
        progress.info(f"  deferred to the hardware runner: {path}")
    if base_run is not None:
        progress.info(f"  regressions vs vLLM {version}: {len(record['regressions'])}")
        for test in record["regressions"]:
            progress.info(f"    {test}")
    return 1 if run.failing or record.get("regressions") else 0


def installer_pin(spec, root: Path) -> str:
    """The core version the plugin's installer pins exactly (read by the pinning check)."""
    from vllm_plugin_release.conform import pinning
    from vllm_plugin_release.core.errors import BadInput

    options = pinning.conformance_table(spec, "pinning", pinning.PINNING_SCHEMA)
    report = pinning.scan(root, pinning.input_files(spec, options), spec.core.name)
    pin = report.core_pin
    if not pin or not pin.get("exact") or not pin.get("version"):
        raise BadInput(
            f"{root}: the plugin's installer pins no exact {spec.core.name} version",
            hint="pass --baseline VERSION",
        )
    return str(pin["version"])
