"""The commands that run one stage (`vpr fetch`, `lock`, `build-core`, `build-plugin`,
`build-guard`, `env`, `plugin-tests`, `build-image`) and `vpr spec`: argument parsing only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.cli.options import load_spec_for, named_interpreter, refuse_other_env
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.edges import settings


def register(sub: argparse._SubParsersAction) -> None:
    _register_spec(sub)
    _register_sources(sub)
    _register_builds(sub)
    _register_env(sub)
    _register_image(sub)


def _register_sources(sub: argparse._SubParsersAction) -> None:
    fetch = sub.add_parser(
        "fetch",
        parents=[o.SPEC, o.DIST, o.CACHE],
        help="download and verify the core source into the cache",
    )
    fetch.set_defaults(func=_fetch)

    lock = sub.add_parser(
        "lock",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE],
        help="resolve the hash-locked build requirements",
    )
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
        "build-core",
        parents=[o.SPEC, o.DIST, o.CACHE, o.BACKEND, o.INTERPRETER, o.FORCE],
        help="build the vLLM wheel (empty target), twice, and compare",
    )
    build.set_defaults(func=_build_core)

    plugin = sub.add_parser(
        "build-plugin",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.BACKEND, o.INTERPRETER, o.FORCE],
        help="build the plugin wheel from its pinned commit, twice, and compare",
    )
    plugin.set_defaults(func=_build_plugin)

    guard = sub.add_parser(
        "build-guard",
        parents=[o.SPEC, o.DIST, o.CACHE],
        help="build the vpr-guard wheel (vLLM's start-up check of a certified set), twice, "
        "and compare",
    )
    guard.set_defaults(func=_build_guard)


def _register_env(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser(
        "env",
        parents=[
            *(o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.SITE),
            *(o.BACKEND, o.INTERPRETER, o.RUNTIME_ENV),
        ],
        help="create and check the pairing environment for a runner",
    )
    env.set_defaults(func=_env)

    tests = sub.add_parser(
        "plugin-tests",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.SITE, o.INTERPRETER],
        help="run the plugin's own tests in the pairing environment (JUnit XML)",
    )
    tests.add_argument(
        "--baseline",
        metavar="VERSION",
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
    """(plugin checkout, from_locks): where the plugin's git source cannot be reached, `vpr lock
    --check` checks the locks with the plugin's inputs as they recorded them, and says so."""
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
    from vllm_plugin_release.stages.pairing_env import PairingContext, create_env
    from vllm_plugin_release.stages.wheelbuild import interpreter_ahead

    inputs = _inputs(args)
    # found while the sources are fetched and checked
    search = interpreter_ahead(inputs.spec) if args.runtime_env is None else None
    pairing = PairingContext(
        inputs.spec,
        inputs.cache,
        Path(args.dist),
        inputs.plugin,
        inputs.tree,
        site=args.runner,
        runtime_env=args.runtime_env,
        search=search,
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
    from vllm_plugin_release.flows.baseline import run_plugin_tests

    inputs = _inputs(args)
    refuse_other_env(inputs, args)
    return run_plugin_tests(inputs, Path(args.dist), args.runner, args.baseline)


def _register_spec(sub: argparse._SubParsersAction) -> None:
    spec = sub.add_parser("spec", help="validate, explain or edit a buildspec")
    ssub = spec.add_subparsers(dest="spec_command", metavar="ACTION", required=True)

    check = ssub.add_parser("check", help="validate a buildspec (exit 2 with every error)")
    check.add_argument("file", help="the buildspec file")
    check.set_defaults(func=_spec_check)

    schema = ssub.add_parser("schema", help="print the buildspec JSON Schema")
    schema.set_defaults(func=_spec_schema)

    docs = ssub.add_parser("docs", help="print docs/buildspec.md (generated from the schema)")
    docs.set_defaults(func=_spec_docs)

    setter = ssub.add_parser(
        "set", help="set KEY (dotted) to VALUE (TOML syntax), keeping comments and order"
    )
    setter.add_argument("file", help="the buildspec file, edited in place")
    setter.add_argument("key", help="dotted key, e.g. core.version")
    setter.add_argument("value", help='TOML value, e.g. "0.26.0" or 1784975730 or true')
    setter.set_defaults(func=_spec_set)

    listing = sub.add_parser(
        "settings", help="list the VPR_* environment variables: each one's value here and doc"
    )
    listing.add_argument(
        "--markdown", action="store_true", help="print docs/settings.md (their defaults) instead"
    )
    listing.set_defaults(func=_settings)


def _spec_check(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec

    spec = load_spec(args.file)
    progress.info(f"{args.file}: valid (pairing {spec.name!r}, vLLM {spec.core.version})")
    return 0


def _spec_schema(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.registry import spec_schema

    json.dump(spec_schema(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def _spec_set(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import set_value

    set_value(args.file, args.key, args.value)
    progress.info(f"{args.file}: {args.key} updated")
    return 0


def _spec_docs(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.model import render
    from vllm_plugin_release.conform.registry import spec_schema

    sys.stdout.write(render(spec_schema()))
    return 0


def _settings(args: argparse.Namespace) -> int:
    from vllm_plugin_release.edges import settings

    sys.stdout.write(settings.markdown() if args.markdown else "\n".join(settings.lines()) + "\n")
    return 0


def _register_image(sub: argparse._SubParsersAction) -> None:
    image = sub.add_parser(
        "build-image",
        parents=[o.SPEC, o.CACHE, o.INTERPRETER, o.JSON],
        help="make the container runner's image [build] base_image pins from Debian packages "
        "(mmdebstrap, SOURCE_DATE_EPOCH) and load it into the engine; exit 1 when its digest "
        "is not the pinned one",
    )
    image.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    image.add_argument(
        "--mirror",
        default="http://deb.debian.org/debian",
        help="Debian mirror; a snapshot.debian.org URL keeps the digest for ever",
    )
    image.add_argument(
        "--write-spec",
        action="store_true",
        help="pin the image made here in the spec's [build] base_image",
    )
    image.set_defaults(func=_build_image)


def _build_image(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec, set_value
    from vllm_plugin_release.core import progress
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.stages.container_build import build_image, compare_pin

    spec = load_spec(args.spec).with_interpreter(args.interpreter)
    named_interpreter(spec)  # checked also where Debian's python is used instead
    made = build_image(spec, settings.cache_from_args(args), suite=args.suite, mirror=args.mirror)
    print(json.dumps(made.to_json(), indent=2) if args.json else made.image)
    if args.write_spec:
        set_value(args.spec, "build.base_image", json.dumps(made.image))
        progress.info(f"image: {args.spec} [build] base_image = {made.image}")
        return 0
    differs = compare_pin(spec, made.image)
    if differs:
        raise GateFailed(
            differs, hint="`vpr build-image --write-spec` pins it, if this change is expected"
        )
    progress.info(f"image: {made.image} loaded")
    return 0
