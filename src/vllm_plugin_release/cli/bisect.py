"""`vpr bisect` (the first core commit or published version that breaks the plugin's tests)
and `vpr nightly` (the plugin against a core git commit, with a last-known-good pointer)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import EXIT_OK
from vllm_plugin_release.edges import settings


def register(sub: argparse._SubParsersAction) -> None:
    _register_bisect(sub)
    _register_nightly(sub)


def _register_bisect(sub: argparse._SubParsersAction) -> None:
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
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.bisect import render_markdown
    from vllm_plugin_release.flows import bisect

    spec = load_spec(args.spec)
    opts = bisect.Options(
        cache=settings.cache_from_args(args),
        dist_root=Path(args.dist),
        plugin_source=args.plugin_source,
        repo=args.repo,
        index=args.index,
        prereleases=not args.final_only,
    )
    report = bisect.bisect_report(spec, args.good, args.bad, opts)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_markdown(report))
    progress.info(f"bisect: first bad {report.mode} candidate {report.first_bad.candidate}")
    return EXIT_OK


def _register_nightly(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "nightly",
        help="the plugin against a core git commit (vLLM main): last-known-good pointer, backoff",
        description="Unless the schedule says wait (every --interval hours while passing, "
        "--backoff hours while failing; --force runs anyway), resolve --ref in the core "
        "repository, build the empty-target core at that commit, make the cpu pairing "
        "environment with the plugin wheel already built (`vpr build-plugin` first), run the "
        "plugin's cpu tests, write the NAME-nightly manifest (never published) and a ledger "
        "entry of kind nightly. On pass the store's signed last-known-good pointer "
        "(lkg/NAME.json) moves to the commit; on failure the report names the failing tests, "
        "their first error lines and the commits since the last-known-good one. Exit 0 pass "
        "or skipped, 1 the tests fail, 2 bad input (an unreachable ref), 3 outside failure.",
    )
    add_spec_argument(p)
    p.add_argument(
        "--repo",
        default=None,
        metavar="URL",
        help="core git repository (default: the spec's git core source)",
    )
    p.add_argument("--ref", default="main", help="branch, tag or commit to test (default: main)")
    p.add_argument("--store", default=None, help="manifest store folder (default: as publish)")
    p.add_argument("--signing-key", default=None, help="ed25519 private key (as manifest build)")
    p.add_argument("--force", action="store_true", help="run even when the schedule says wait")
    p.add_argument("--interval", type=int, default=8, help="hours between passing runs (8)")
    p.add_argument("--backoff", type=int, default=24, help="hours between failing runs (24)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_plugin_source(p)
    add_dirs(p)
    p.set_defaults(func=_nightly)


def _nightly(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.errors import EXIT_GATE
    from vllm_plugin_release.flows import nightly

    spec = load_spec(args.spec)
    opts = nightly.Options(
        cache=settings.cache_from_args(args),
        dist_root=Path(args.dist),
        repo=args.repo,
        ref=args.ref,
        store=args.store,
        signing_key=args.signing_key,
        plugin_source=args.plugin_source,
        force=args.force,
        interval=args.interval,
        backoff=args.backoff,
    )
    report = nightly.nightly(spec, opts)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(nightly.render_text(report) + "\n")
    return EXIT_GATE if report.status == "fail" else EXIT_OK
