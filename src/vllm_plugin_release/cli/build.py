"""`vpr fetch`, `vpr lock`, `vpr build-core`, `vpr build-plugin`, `vpr env`, `vpr plugin-tests`.

Argument parsing only: each command loads the spec, gathers the pairing's sources
once (`flows/sources.py`) and hands them to its stage."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_plugin_release.core import progress, records
from vllm_plugin_release.edges import settings


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


def add_backend(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        dest="runner_backend",
        choices=("local", "docker"),
        default=None,
        help="where the stages run: local (this machine) or docker (the pinned "
        "[build] base_image); default: the spec's [build] backend",
    )
    add_interpreter(parser)


def add_interpreter(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interpreter",
        default=None,
        metavar="PATH",
        help="the CPython to build and check with (it must be the spec's [build] python); "
        "default: $VPR_INTERPRETER, else uv, pyenv, asdf/mise, /usr/bin in that order",
    )


def load_spec_for(args: argparse.Namespace):
    """The spec `--spec` names, with `--backend` and `--interpreter` applied; the interpreter
    `--interpreter` or $VPR_INTERPRETER names is checked at once (`named_interpreter`)."""
    from vllm_plugin_release.buildspec.load import load_spec

    spec = load_spec(args.spec).with_backend(getattr(args, "runner_backend", None))
    spec = spec.with_interpreter(getattr(args, "interpreter", None))
    named_interpreter(spec)
    return spec


def named_interpreter(spec):
    """The interpreter `--interpreter` or $VPR_INTERPRETER names, checked by every command
    that takes them, whether or not it needs it (exit 2 naming the flag or variable and the
    path: not there, not the spec's CPython, its files not readable here); None when
    neither names one. Asked as the runner asks it, so a later ask takes this answer."""
    from vllm_plugin_release.core.errors import OutsideFailure
    from vllm_plugin_release.edges import interpreters, uv

    if interpreters.named_by(spec.build.interpreter) is None:
        return None
    try:
        found_with = uv.uv_bin()
    except OutsideFailure:  # not needed for a named interpreter
        found_with = None
    return interpreters.find(spec.build.python, spec.build.interpreter, found_with)


RUNNERS = ("cpu", "hardware")  # conform.registry.RUNNERS, not imported to keep start-up quick


def add_runner(parser: argparse.ArgumentParser) -> None:
    """`--site`, refused by argparse when not a site: before anything is fetched."""
    parser.add_argument(
        "--site",
        dest="runner",
        default="cpu",
        choices=RUNNERS,
        help="cpu (default: no accelerator, runtime checks deferred) or hardware",
    )


def register(sub: argparse._SubParsersAction) -> None:
    _register_sources(sub)
    _register_builds(sub)
    _register_env(sub)


def _register_sources(sub: argparse._SubParsersAction) -> None:
    fetch = sub.add_parser("fetch", help="download and verify the core source into the cache")
    add_spec_argument(fetch)
    add_dirs(fetch)
    fetch.set_defaults(func=_fetch)

    lock = sub.add_parser("lock", help="resolve the hash-locked build requirements")
    add_spec_argument(lock)
    add_dirs(lock)
    add_plugin_source(lock)
    mode = lock.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="only check that the lock is current (exit 2 if not)"
    )
    mode.add_argument(
        "--upgrade",
        action="store_true",
        help="resolve every lock again, also a current one (today's releases within the "
        "requirements); without it only a missing or stale lock is written",
    )
    lock.set_defaults(func=_lock)


def _register_builds(sub: argparse._SubParsersAction) -> None:
    build = sub.add_parser(
        "build-core", help="build the vLLM wheel (empty target), twice, and compare"
    )
    add_spec_argument(build)
    add_dirs(build)
    add_backend(build)
    build.add_argument("--force", action="store_true", help="ignore the cached result")
    build.set_defaults(func=_build_core)

    plugin = sub.add_parser(
        "build-plugin", help="build the plugin wheel from its pinned commit, twice, and compare"
    )
    add_spec_argument(plugin)
    add_dirs(plugin)
    add_plugin_source(plugin)
    add_backend(plugin)
    plugin.add_argument("--force", action="store_true", help="ignore the cached result")
    plugin.set_defaults(func=_build_plugin)

    guard = sub.add_parser(
        "build-guard",
        help="build the vpr-guard wheel (vLLM's start-up check of a certified set), twice, "
        "and compare",
    )
    add_spec_argument(guard)
    add_dirs(guard)
    guard.set_defaults(func=_build_guard)


def _register_env(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="create and check the pairing environment for a runner")
    add_spec_argument(env)
    add_dirs(env)
    add_plugin_source(env)
    add_runner(env)
    add_backend(env)
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
    add_interpreter(tests)
    tests.add_argument(
        "--baseline",
        metavar="VERSION",
        default=None,
        help="also run against this core version and report regressions "
        "('auto': the version the plugin's installer pins)",
    )
    tests.set_defaults(func=_plugin_tests)


def _inputs(args: argparse.Namespace):
    from vllm_plugin_release.flows.sources import Inputs

    spec = load_spec_for(args)
    return Inputs(spec, settings.cache_from_args(args), getattr(args, "plugin_source", None))


def _fetch(args: argparse.Namespace) -> int:
    tree = _inputs(args).tree
    progress.info(f"fetch: verified source at {tree}")
    print(tree)
    return 0


def _lock(args: argparse.Namespace) -> int:
    from vllm_plugin_release.stages.lock import lock

    inputs = _inputs(args)
    # A plugin with dynamic dependencies: they come from its built wheel, when built.
    built = Path(args.dist) / inputs.spec.name / records.BUILD_PLUGIN
    requires_dist = (
        records.build_record(built.parent, records.BUILD_PLUGIN).requires_list()
        if built.is_file()
        else None
    )
    plugin_root, from_locks = _plugin_for_lock(inputs, args.check, requires_dist)
    lock(
        inputs.spec,
        inputs.tree,
        plugin_root,
        check=args.check,
        upgrade=args.upgrade,
        requires_dist=requires_dist,
        from_locks=from_locks,
    )
    return 0


def _plugin_for_lock(inputs, check: bool, requires_dist: list[str] | None):
    """(plugin checkout, from_locks): `vpr lock --check` where the plugin's git source
    cannot be reached (no --plugin-source, its host unreachable) checks the locks with the
    plugin's inputs as they recorded them, and says so."""
    from vllm_plugin_release.core.errors import OutsideFailure

    spec = inputs.spec
    if not spec.plugin:
        return None, False
    try:
        root = inputs.plugin.root
    except OutsideFailure as exc:
        if not check:
            raise
        progress.warn(
            f"lock --check: the plugin source is not reachable ({exc.message.splitlines()[0]}); "
            "checking with its inputs as the locks recorded them (every stage that has the "
            "source checks the locks against it)"
        )
        return None, True
    if check and requires_dist is None:
        from vllm_plugin_release.stages.requests import static_dependencies

        if static_dependencies(root) is None:  # from the built wheel, which is not here
            return root, True
    return root, False


def _build_core(args: argparse.Namespace) -> int:
    # A warm run: the memo of the last full run with this command line, every part of it
    # checked again (stages/corememo); else the full path, which then writes the memo.
    from vllm_plugin_release.stages import corememo

    cache = settings.cache_from_args(args)
    ask = corememo.Ask(Path(args.spec), args.runner_backend, args.interpreter)
    memo = corememo.memo_name(ask)
    warm = memo and not args.force
    hit = corememo.warm_hit(cache, memo, Path(args.dist), ask.named) if warm else None
    if hit:
        print(hit.wheel)
        return 0
    from vllm_plugin_release.flows.sources import Inputs
    from vllm_plugin_release.stages.build_core import build_core

    inputs = Inputs(load_spec_for(args), cache)
    result = build_core(
        inputs.spec,
        cache=inputs.cache,
        dist_root=Path(args.dist),
        tree=inputs.tree,
        fetcher=inputs.fetcher,
        force=args.force,
    )
    if memo and memo == corememo.memo_name(ask):  # the spec the run read, not a later one
        corememo.remember(cache, memo, inputs.spec, result)
    print(result.wheel)
    return 0


def _env(args: argparse.Namespace) -> int:
    from vllm_plugin_release.stages.pairing_env import create_env
    from vllm_plugin_release.stages.pairingctx import PairingContext
    from vllm_plugin_release.stages.wheelbuild import interpreter_ahead

    inputs = _inputs(args)
    if args.runtime_env is None:  # found while the sources are fetched and checked
        interpreter_ahead(inputs.spec)
    pairing = PairingContext(
        inputs.spec,
        inputs.cache,
        Path(args.dist),
        inputs.plugin,
        inputs.tree,
        site=args.runner,
        runtime_env=args.runtime_env,
    )
    record = create_env(pairing)
    print(record.python)
    return 0


def _build_plugin(args: argparse.Namespace) -> int:
    from vllm_plugin_release.stages.build_plugin import build_plugin

    inputs = _inputs(args)
    result = build_plugin(
        inputs.spec,
        cache=inputs.cache,
        dist_root=Path(args.dist),
        plugin=inputs.plugin,
        tree=inputs.tree,
        force=args.force,
    )
    print(result.wheel)
    return 0


def _build_guard(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.stages.build_guard import build_guard

    result = build_guard(
        load_spec(args.spec), cache=settings.cache_from_args(args), dist_root=Path(args.dist)
    )
    print(result.wheel)
    return 0


def _plugin_tests(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows.plugin_tests import run_plugin_tests

    inputs = _inputs(args)
    refuse_other_env(inputs, args)
    return run_plugin_tests(inputs, Path(args.dist), args.runner, args.baseline)


def refuse_other_env(inputs, args: argparse.Namespace) -> None:
    """Exit 2 when `--interpreter` or $VPR_INTERPRETER names an interpreter other than the
    one the recorded pairing environment was made from (local backend): its tests and
    checks are never run in that environment in the named one's stead."""
    from vllm_plugin_release.edges.interpreters import named_by

    spec = inputs.spec
    named = named_by(spec.build.interpreter)
    if named is None or spec.build.backend != "local":
        return
    ctx = inputs.context(args.runner, Path(args.dist))
    ctx.refuse_other_interpreter(named_interpreter(spec), named[1])
