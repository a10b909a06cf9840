"""`vpr conform` (all checks, scorecard) and `vpr check NAME` (one check)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_plugin_release.cli.build import (
    add_dirs,
    add_plugin_source,
    add_runner,
    add_spec_argument,
)
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache


def register(sub: argparse._SubParsersAction) -> None:
    conform = sub.add_parser(
        "conform", help="run every conformance check; write dist/NAME/scorecard.{json,md,html}"
    )
    add_spec_argument(conform)
    add_dirs(conform)
    add_plugin_source(conform)
    add_runner(conform)
    conform.add_argument("--force", action="store_true", help="ignore the cached scorecard")
    conform.set_defaults(func=_conform)

    check = sub.add_parser("check", help="run one conformance check (exit 1 on fail)")
    check.add_argument(
        "name", help="cadence, isolation, pinning, scheduler, api, environment, plugin_tests"
    )
    add_spec_argument(check)
    add_dirs(check)
    add_plugin_source(check)
    add_runner(check)
    check.add_argument("--json", action="store_true", help="print the check's JSON object")
    check.set_defaults(func=_check)


def _context(args: argparse.Namespace):
    from vllm_plugin_release.conform.suite import Context
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.spec.model import load

    if args.runner not in ("cpu", "hardware"):
        raise BadInput(f"unknown runner {args.runner!r}; expected cpu or hardware")
    spec = load(args.spec)
    return Context(
        spec=spec,
        runner=args.runner,
        cache=Cache.from_args(args),
        dist=Path(args.dist) / spec.name,
        plugin_source=args.plugin_source,
    )


def _conform(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.suite import conform_cached

    ctx = _context(args)
    card = conform_cached(ctx, force=args.force)
    progress.info(
        f"conform: verdict {card['verdict']} ({ctx.dist / 'scorecard.md'}); "
        + ", ".join(f"{n} {s}" for s, n in card["summary"].items() if n)
    )
    return 1 if card["verdict"] == "lab" else 0


def _check(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.suite import dumps, run_check

    result = run_check(_context(args), args.name)
    if args.json:
        sys.stdout.write(dumps(result) + "\n")
    else:
        progress.info(f"{result.name}: {result.status}: {result.summary}")
        for item in result.evidence[:50]:
            progress.info(
                f"  {item.file or ''}{':' + str(item.line) if item.line else ''} {item.note}"
            )
    return 1 if result.status == "fail" else 0
