"""`vpr fetch`, `vpr lock`, `vpr build-core`."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_plugin_release import progress


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


def register(sub: argparse._SubParsersAction) -> None:
    fetch = sub.add_parser("fetch", help="download and verify the core source into the cache")
    add_spec_argument(fetch)
    add_dirs(fetch)
    fetch.set_defaults(func=_fetch)

    lock = sub.add_parser("lock", help="resolve the hash-locked build requirements")
    add_spec_argument(lock)
    add_dirs(lock)
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


def _cache(args: argparse.Namespace):
    from vllm_plugin_release.cache import Cache

    return Cache(args.cache_dir) if args.cache_dir else Cache.from_env()


def _fetch(args: argparse.Namespace) -> int:
    from vllm_plugin_release.build_core import source_tree
    from vllm_plugin_release.fetch import Fetcher
    from vllm_plugin_release.spec import load

    spec = load(args.spec)
    tree = source_tree(spec, Fetcher(_cache(args)))
    progress.info(f"fetch: verified source at {tree}")
    print(tree)
    return 0


def _lock(args: argparse.Namespace) -> int:
    from vllm_plugin_release.build_core import lock_request, source_tree
    from vllm_plugin_release.fetch import Fetcher
    from vllm_plugin_release.lock import check_lock, compile_lock
    from vllm_plugin_release.spec import load

    spec = load(args.spec)
    tree = source_tree(spec, Fetcher(_cache(args)))
    request, _ = lock_request(spec, tree)
    dest = spec.resolve(spec.build.constraints)
    if args.check:
        check_lock(dest, request)
        progress.info(f"lock: {dest} is current")
        return 0
    with progress.status(f"lock: resolving {request.name} for Python {request.python}"):
        compile_lock(request, dest, spec.build.find_links)
    progress.info(f"lock: wrote {dest}")
    return 0


def _build_core(args: argparse.Namespace) -> int:
    from vllm_plugin_release.build_core import build_core
    from vllm_plugin_release.spec import load

    spec = load(args.spec)
    result = build_core(spec, cache=_cache(args), dist_root=Path(args.dist), force=args.force)
    print(result.wheel)
    return 0
