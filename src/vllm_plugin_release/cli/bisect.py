"""`vpr bisect`: the first core commit or published version that breaks the plugin's tests."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import EXIT_OK
from vllm_plugin_release.edges import cachedir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the first core commit (or published version) that breaks the plugin's tests",
        description="Between a core where the plugin's cpu tests pass (--good) and one where "
        "they fail (--bad), build the empty-target core at each step (cached), make the cpu "
        "pairing environment with the plugin wheel already built (`vpr build-plugin` first) "
        "and run the plugin's tests, halving the range each time. Candidates: the commits of "
        "the core's git history (--repo, or the spec's git core source) or the versions with "
        "an sdist on the spec's index (release candidates included). Writes "
        "dist/NAME/bisect.json and bisect.md. Exit 0 when the first bad candidate is found; "
        "2 when the good end fails, the bad end passes, a commit is not reachable or a "
        "version is not on the index (nearest versions named); 3 an outside failure.",
    )
    add_spec_argument(p)
    p.add_argument("--good", required=True, help="core where the tests pass (commit/tag/version)")
    p.add_argument("--bad", required=True, help="core where the tests fail (commit/tag/version)")
    p.add_argument(
        "--repo",
        default=None,
        metavar="URL",
        help="core git repository (URL or path): bisect its commits "
        "(default: the spec's git core source; else published versions on the index)",
    )
    p.add_argument("--index", default=None, help="simple API URL (default: the spec's index)")
    p.add_argument(
        "--final-only", action="store_true", help="versions: leave release candidates out"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_plugin_source(p)
    add_dirs(p)
    p.set_defaults(func=_bisect)


def _bisect(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.registry import load_spec
    from vllm_plugin_release.core.bisect import render_markdown
    from vllm_plugin_release.flows import bisect

    spec = load_spec(args.spec)
    opts = bisect.Options(
        cache=cachedir.from_args(args),
        dist_root=Path(args.dist),
        plugin_source=args.plugin_source,
        repo=args.repo,
        index=args.index,
        prereleases=not args.final_only,
    )
    report = bisect.bisect(spec, args.good, args.bad, opts)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_markdown(report))
    progress.info(
        f"bisect: first bad {report['mode']} candidate {report['first_bad']['candidate']}"
    )
    return EXIT_OK
