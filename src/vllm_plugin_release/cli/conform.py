"""`vpr conform` (all checks, scorecard) and `vpr check NAME` (one check)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.cli.options import load_spec_for, refuse_other_env
from vllm_plugin_release.core import progress
from vllm_plugin_release.edges import settings


def _checks_epilog() -> str:
    """The checks, from the registry (imported only when a help text is shown)."""
    from vllm_plugin_release.conform import registry

    return "checks:\n" + registry.help_lines()


# What the checks run on: the pairing, its outputs, its plugin checkout, site and interpreter.
CONTEXT = (o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.SITE, o.INTERPRETER)


def register(sub: argparse._SubParsersAction) -> None:
    conform = sub.add_parser(
        "conform",
        help="run every conformance check; write dist/NAME/scorecard.{json,md,html}",
        description="Run every conformance check of the pairing and write the scorecard "
        "with its verdict (fleet, pilot or lab).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[*CONTEXT, o.FORCE],
    )
    conform.lazy_epilog = _checks_epilog
    conform.set_defaults(func=_conform)

    check = sub.add_parser(
        "check",
        help="run one conformance check (exit 1 on fail)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[*CONTEXT, o.JSON],
    )
    check.lazy_epilog = _checks_epilog
    check.add_argument("name", nargs="?", metavar="NAME", help="the check to run (see below)")
    check.add_argument(
        "--list",
        action="store_true",
        help="print the checks as a Markdown table (the one in docs/conformance.md) and exit",
    )
    check.set_defaults(func=_check)


def _context(args: argparse.Namespace):
    """The checks' context; refuses another interpreter than the recorded environment's."""
    from vllm_plugin_release.flows.sources import Inputs

    inputs = Inputs(load_spec_for(args), settings.cache_from_args(args), args.plugin_source)
    refuse_other_env(inputs, args)
    return inputs.context(args.runner, Path(args.dist))


def _conform(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.suite import conform_here
    from vllm_plugin_release.edges import ci

    ctx = _context(args)
    try:
        # No interpreter (or image) for the spec's Python: the checks that need no
        # environment, their scorecard, then exit 3 naming what is missing.
        card = conform_here(ctx, force=args.force)
    finally:
        ci.report_scorecard(ctx.dist)  # GitHub Actions: job summary, an ::error:: per failure
    return 1 if card.verdict == "lab" else 0


def _check(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform import registry
    from vllm_plugin_release.conform.suite import dumps, run_check
    from vllm_plugin_release.core.errors import BadInput

    if args.list:
        sys.stdout.write(registry.docs_table())
        return 0
    if args.name not in registry.SUITE:
        what = f"unknown check {args.name!r}" if args.name else "name the check to run"
        raise BadInput(f"vpr check: {what}", hint="one of: " + ", ".join(registry.SUITE))
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
