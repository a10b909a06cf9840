"""`vpr upstream`, `vpr bump`, `vpr pr-body`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.errors import EXIT_OK
from vllm_plugin_release.edges import settings
from vllm_plugin_release.edges.ci import github_output, output_text

PR_BODY_LIMIT = 60_000


def register(sub: argparse._SubParsersAction) -> None:
    _register_upstream(sub)
    _register_bump(sub)
    _register_pr_body(sub)


def _register_upstream(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser(
        "upstream",
        help="list the core releases newer than the spec's pin (text or --json)",
        description="Core releases on the spec's index newer than the pinned one, from the "
        "simple API (final releases only unless --include-prereleases), each with its upload "
        "time, sdist file name and sha256. Exit 0 also when there is none.",
    )
    add_spec_argument(up)
    up.add_argument("--json", action="store_true", help="print the releases as JSON")
    up.add_argument(
        "--include-prereleases",
        action="store_true",
        default=settings.flag("VPR_UPSTREAM_PRERELEASES"),
        help="also list rc/beta/dev releases (default: $VPR_UPSTREAM_PRERELEASES)",
    )
    up.add_argument("--index", default=None, help="simple API URL (default: the spec's index)")
    up.add_argument(
        "--version",
        default=None,
        metavar="VERSION",
        help="only this release (must be on the index and newer than the pin); "
        "an empty value means all (for CI inputs)",
    )
    up.add_argument(
        "--github-output",
        action="store_true",
        help="also append versions=<JSON list>, count=N and pinned=VERSION to $GITHUB_OUTPUT, "
        "and the version matrix's columns: columns=<JSON list>, column_count=N and name=NAME "
        "(the spec's, its records are in dist/NAME/matrix/; `vpr matrix run --only VERSION` "
        "runs one column)",
    )
    up.add_argument(
        "--lowest",
        default=None,
        metavar="VERSION",
        help="the matrix's first column (default: the lowest core the plugin's installer "
        "allows, read from the plugin source)",
    )
    up.add_argument("--newest", default=None, metavar="VERSION", help="the matrix's last column")
    add_plugin_source(up)
    up.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $VPR_CACHE_DIR or .vpr)"
    )
    up.set_defaults(func=_upstream)


def _register_bump(sub: argparse._SubParsersAction) -> None:
    bump = sub.add_parser(
        "bump",
        help="write the spec for a new core version; print the diff and a migration report",
        description="Resolve the new core's source (sdist sha256 from the index, or the tag's "
        "commit from git), edit the spec keeping every comment and the key order, re-lock, "
        "and print the unified diff and a migration report (dependency changes; with "
        "--with-api/--with-tests also the served API diff and plugin test regressions). "
        "A breaking change of the core API the plugin uses (its imports, calls, subclasses "
        "and overrides, read statically from both verified cores) needs an approval on record "
        "(--approve-by, --approve-why, --approve ID): without one the bump stops, exit 1. "
        "The spec is replaced in place unless its file name carries the old version "
        "(then a new file with the version replaced is written); --out chooses the path.",
    )
    add_spec_argument(bump)
    bump.add_argument("--core", required=True, metavar="VERSION", help="new core version")
    bump.add_argument("--out", type=Path, default=None, metavar="PATH", help="new spec path")
    bump.add_argument(
        "--dry-run",
        action="store_true",
        help="print the diff and the report; write nothing (no spec, no locks)",
    )
    bump.add_argument("--json", action="store_true", help="print diff + report as JSON")
    bump.add_argument(
        "--with-api",
        action="store_true",
        help="diff the served API old vs new (builds a pairing environment per core)",
    )
    bump.add_argument(
        "--with-tests",
        action="store_true",
        help="run the plugin's tests on both cores and list regressions (pairing envs)",
    )
    bump.add_argument(
        "--bisect",
        action="store_true",
        help="with --with-tests: when tests regress, bisect the published versions between "
        "the pinned core and the new one (`vpr bisect`) into the migration report",
    )
    _add_approval(bump)
    bump.add_argument("--tag", default=None, help="git sources: the new tag (default: derived)")
    bump.add_argument(
        "--report", type=Path, default=None, metavar="FILE", help="also write the Markdown report"
    )
    bump.add_argument(
        "--github-output",
        action="store_true",
        help="also append spec=, name=, version= to $GITHUB_OUTPUT",
    )
    add_dirs(bump)
    add_plugin_source(bump)
    bump.set_defaults(func=_bump)


def _add_approval(bump: argparse.ArgumentParser) -> None:
    """The approval on record of a breaking change of the core API the plugin uses."""
    bump.add_argument(
        "--approve",
        action="append",
        default=None,
        metavar="ID",
        help="approve a breaking change of the core API the plugin uses, by the id the "
        "migration report lists (once per change; with --approve-by and --approve-why). A "
        "bump with such a change and no approval stops with exit 1",
    )
    bump.add_argument("--approve-by", default=None, metavar="WHO", help="who approves")
    bump.add_argument(
        "--approve-why", default=None, metavar="WHY", help="why the changes are acceptable"
    )


def _register_pr_body(sub: argparse._SubParsersAction) -> None:
    body = sub.add_parser(
        "pr-body",
        help="a pull request body: the bump's migration report and the pairing's scorecard",
    )
    add_spec_argument(body)
    body.add_argument("--report", type=Path, default=None, help="migration report (vpr bump)")
    body.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    add_dirs(body)
    body.set_defaults(func=_pr_body)


def _upstream(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import upstream

    spec = load_spec(args.spec)
    index = upstream.spec_index(spec, args.index)
    found = upstream.newer_releases(
        spec,
        index=index,
        include_prereleases=args.include_prereleases,
        only=args.version or None,
    )
    if args.json:
        doc = {
            "core": spec.core.name,
            "pinned": spec.core.version,
            "index": index,
            "include_prereleases": args.include_prereleases,
            "releases": [r.to_json() for r in found],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(upstream.render_releases(spec, found, index, args.include_prereleases))
    if args.github_output:
        pinnable = [r.version for r in found if r.sha256]
        columns = _columns(spec, args, index)  # every value found before a line is written
        github_output(
            {
                "versions": output_text(pinnable),
                "count": str(len(pinnable)),
                "pinned": output_text(spec.core.version),
                "columns": output_text(columns),
                "column_count": str(len(columns)),
                "name": output_text(spec.name),  # dist/NAME/matrix/ holds the records
            }
        )
    return EXIT_OK


def _columns(spec: Any, args: argparse.Namespace, index: str) -> list[str]:
    """The version matrix's columns (`flows.matrix.plan`), newest from the index; none for
    a spec whose core is not an sdist of an index (said)."""
    from vllm_plugin_release.buildspec.model import SdistSource
    from vllm_plugin_release.flows import matrix
    from vllm_plugin_release.flows.sources import Inputs

    if not isinstance(spec.core.source, SdistSource):
        progress.note(f"{spec.path}: columns=[]: a version matrix needs an sdist core source")
        return []
    cache = settings.cache_from_args(args)
    opts = matrix.Options(
        cache=cache,
        dist_root=Path("dist"),
        plugin_source=args.plugin_source,
        lowest=args.lowest or None,  # empty: not given (a CI input left empty)
        newest=args.newest or None,
        index=index,
        prereleases=args.include_prereleases,
    )
    plan = matrix.plan(spec, opts, lambda: Inputs(spec, cache, args.plugin_source).plugin.root)
    progress.info(f"upstream: the matrix's columns: {', '.join(plan.versions)}")
    return list(plan.versions)


def _bump(args: argparse.Namespace) -> int:
    from vllm_plugin_release.flows import bump
    from vllm_plugin_release.flows.bumpapproval import approval_from
    from vllm_plugin_release.flows.migration_report import render_markdown

    approval = approval_from(args.approve_by, args.approve_why, args.approve)
    result = bump.bump(
        Path(args.spec),
        args.core,
        cache=settings.cache_from_args(args),
        options=bump.BumpOptions(
            out=args.out,
            dry_run=args.dry_run,
            with_api=args.with_api,
            with_tests=args.with_tests,
            bisect=args.bisect,
            tag=args.tag,
            plugin_source=args.plugin_source,
            dist_root=Path(args.dist),
        ),
        approval=approval,
    )
    markdown = render_markdown(result)
    if args.json:
        doc = {"diff": result.diff, "written": result.written, **result.report}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(result.diff or "(the spec text is unchanged)\n")
        sys.stdout.write("\n" + markdown)
    if args.report:
        from vllm_plugin_release.core.cache import atomic_write_text

        atomic_write_text(args.report, markdown)
    if args.github_output:
        github_output(
            {
                "spec": str(result.new_path),
                "name": output_text(
                    result.report["spec"]["changed"].get("name", {}).get("to")
                    or _name(result.new_text)
                ),
                "version": output_text(result.report["core"]["to"]),
            }
        )
    if result.written:
        progress.info(f"bump: wrote {result.new_path} and its locks")
    else:
        progress.info("bump: --dry-run, nothing written")
    if result.blocked is not None:  # --dry-run: the real bump would stop here
        raise result.blocked
    if result.errors:
        first = result.errors[0]
        progress.warn(f"bump: {len(result.errors)} requested analysis could not run: {first}")
        return first.exit_code
    return EXIT_OK


def _name(text: str) -> str:
    import tomlkit

    return str(tomlkit.parse(text)["name"])


def _lag_and_bisect(dist: Path) -> list[str]:
    """The release lag (cadence check) and the bisection report, when the run made them."""
    from vllm_plugin_release.flows.bisect import REPORT_MD
    from vllm_plugin_release.flows.ledger import lag_from_scorecard

    parts = []
    lag = lag_from_scorecard(dist)
    if lag is not None:
        days = "unknown" if lag.days is None else f"{lag.days} days"
        parts += [f"Release lag of the pinned core: {days}, {lag.minor_releases} minor.", ""]
    bisected = dist / REPORT_MD
    if bisected.exists():
        parts.append(bounded.read_text(bisected, bounded.MAX_DOCUMENT, "bisection report"))
    return parts


def _pr_body(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec

    spec = load_spec(args.spec)
    parts = [
        f"Automated bump: `{spec.path}` now pins {spec.core.name} {spec.core.version}.",
        "",
        "The CPU pipeline (build twice and compare, conformance on the cpu runner, manifest) "
        "ran on this branch; its scorecard is below. Hardware conformance runs after merge "
        "(release workflow); until then the verdict is at best `pilot`.",
        "",
    ]
    if args.report:
        parts.append(
            bounded.read_text(
                args.report, bounded.MAX_DOCUMENT, "migration report", missing_hint="run `vpr bump`"
            )
        )
    dist = records.dist_dir(Path(args.dist), spec.name)
    parts += _lag_and_bisect(dist)
    card = dist / records.SCORECARD_MD
    if card.exists():
        parts.append(bounded.read_text(card, bounded.MAX_DOCUMENT, "scorecard"))
    else:
        parts.append(f"_No scorecard: the CPU pipeline did not reach conformance ({card})._\n")
    text = "\n".join(parts)
    if len(text) > PR_BODY_LIMIT:  # GitHub refuses longer bodies
        cut = text[:PR_BODY_LIMIT].rsplit("\n", 1)[0]
        text = cut + f"\n\n_Cut at {PR_BODY_LIMIT} characters: see {card} in the artifacts._\n"
    if args.out:
        from vllm_plugin_release.core.cache import atomic_write_text

        atomic_write_text(args.out, text)
        progress.info(f"pr-body: wrote {args.out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK
