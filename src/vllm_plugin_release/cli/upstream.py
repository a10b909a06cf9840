"""The commands that follow the core upstream: `vpr upstream`, `bump`, `pr-body`, `bisect`,
`nightly` and `matrix` (the plugin across core versions)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli import options as o
from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK
from vllm_plugin_release.edges import settings
from vllm_plugin_release.edges.ci import github_output, output_text

PR_BODY_LIMIT = 60_000


def register(sub: argparse._SubParsersAction) -> None:
    _register_upstream(sub)
    _register_bump(sub)
    _register_pr_body(sub)
    _register_bisect(sub)
    _register_nightly(sub)
    _register_matrix(sub)


def _register_upstream(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser(
        "upstream",
        parents=[o.SPEC, o.CACHE, o.PLUGIN_SOURCE, o.INDEX, o.JSON],
        help="list the core releases newer than the spec's pin (text or --json)",
        description="Core releases on the spec's index newer than the pinned one, from the "
        "simple API (final releases only unless --include-prereleases), each with its upload "
        "time, sdist file name and sha256. Exit 0 also when there is none.",
    )
    up.add_argument(
        "--include-prereleases",
        action="store_true",
        default=settings.flag("VPR_UPSTREAM_PRERELEASES"),
        help="also list rc/beta/dev releases (default: $VPR_UPSTREAM_PRERELEASES)",
    )
    up.add_argument(
        "--version",
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
        metavar="VERSION",
        help="the matrix's first column (default: the lowest core the plugin's installer "
        "allows, read from the plugin source)",
    )
    up.add_argument("--newest", metavar="VERSION", help="the matrix's last column")
    up.set_defaults(func=_upstream)


def _register_bump(sub: argparse._SubParsersAction) -> None:
    bump = sub.add_parser(
        "bump",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.JSON],
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
    bump.add_argument("--core", required=True, metavar="VERSION", help="new core version")
    bump.add_argument("--out", type=Path, metavar="PATH", help="new spec path")
    bump.add_argument(
        "--dry-run",
        action="store_true",
        help="print the diff and the report; write nothing (no spec, no locks)",
    )
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
    bump.add_argument("--tag", help="git sources: the new tag (default: derived)")
    bump.add_argument("--report", type=Path, metavar="FILE", help="also write the Markdown report")
    bump.add_argument(
        "--github-output",
        action="store_true",
        help="also append spec=, name=, version= to $GITHUB_OUTPUT",
    )
    bump.set_defaults(func=_bump)


def _add_approval(bump: argparse.ArgumentParser) -> None:
    """The approval on record of a breaking change of the core API the plugin uses."""
    bump.add_argument(
        "--approve",
        action="append",
        metavar="ID",
        help="approve a breaking change of the core API the plugin uses, by the id the "
        "migration report lists (once per change; with --approve-by and --approve-why). A "
        "bump with such a change and no approval stops with exit 1",
    )
    bump.add_argument("--approve-by", metavar="WHO", help="who approves")
    bump.add_argument("--approve-why", metavar="WHY", help="why the changes are acceptable")


def _register_pr_body(sub: argparse._SubParsersAction) -> None:
    body = sub.add_parser(
        "pr-body",
        parents=[o.SPEC, o.DIST, o.CACHE],
        help="a pull request body: the bump's migration report and the pairing's scorecard",
    )
    body.add_argument("--report", type=Path, help="migration report (vpr bump)")
    body.add_argument("--out", type=Path, help="write here instead of stdout")
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
    from vllm_plugin_release.flows.bump import approval_from, render_markdown

    approval = approval_from(args.approve_by, args.approve_why, args.approve)
    result = bump.bump(
        Path(args.spec),
        args.core,
        cache=settings.cache_from_args(args),
        options=o.flow_options(bump.BumpOptions, args),
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


def _pr_body(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows.bisect import REPORT_MD
    from vllm_plugin_release.flows.ledger import lag_from_scorecard

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
    lag = lag_from_scorecard(dist)  # the release lag (cadence check), when the run made it
    if lag is not None:
        days = "unknown" if lag.days is None else f"{lag.days} days"
        parts += [f"Release lag of the pinned core: {days}, {lag.minor_releases} minor.", ""]
    if (dist / REPORT_MD).exists():  # and the bisection report
        parts.append(bounded.read_text(dist / REPORT_MD, bounded.MAX_DOCUMENT, "bisection report"))
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


def _register_bisect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bisect",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.INDEX, o.JSON],
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
    p.add_argument("--good", required=True, help="core where the tests pass (commit/tag/version)")
    p.add_argument("--bad", required=True, help="core where the tests fail (commit/tag/version)")
    p.add_argument(
        "--repo",
        metavar="URL",
        help="core git repository (URL or path): bisect its commits "
        "(default: the spec's git core source; else published versions on the index)",
    )
    p.add_argument(
        "--final-only", action="store_true", help="versions: leave release candidates out"
    )
    p.set_defaults(func=_bisect)


def _bisect(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.bisect import render_markdown
    from vllm_plugin_release.flows import bisect

    spec = load_spec(args.spec)
    opts = o.flow_options(bisect.Options, args, prereleases=not args.final_only)
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
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.STORE, o.SIGNING_KEY, o.JSON],
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
    p.add_argument(
        "--repo",
        metavar="URL",
        help="core git repository (default: the spec's git core source)",
    )
    p.add_argument("--ref", default="main", help="branch, tag or commit to test (default: main)")
    # not FORCE: no cached result is ignored, the schedule is
    p.add_argument("--force", action="store_true", help="run even when the schedule says wait")
    p.add_argument("--interval", type=int, default=8, help="hours between passing runs (8)")
    p.add_argument("--backoff", type=int, default=24, help="hours between failing runs (24)")
    p.set_defaults(func=_nightly)


def _nightly(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.errors import EXIT_GATE
    from vllm_plugin_release.flows import nightly

    spec = load_spec(args.spec)
    report = nightly.nightly(spec, o.flow_options(nightly.Options, args))
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(nightly.render_text(report) + "\n")
    return EXIT_GATE if report.status == "fail" else EXIT_OK


def _register_matrix(sub: argparse._SubParsersAction) -> None:
    matrix = sub.add_parser(
        "matrix",
        help="test the pairing across core versions (lowest declared .. newest, and main)",
        description="Subcommands: run, assemble.",
    )
    msub = matrix.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND")
    matrix.set_defaults(func=lambda a: (matrix.print_help(sys.stderr), 2)[1])
    _add_run(msub)
    _add_assemble(msub)


def _add_run(msub: argparse._SubParsersAction) -> None:
    p = msub.add_parser(
        "run",
        parents=[o.SPEC, o.DIST, o.CACHE, o.PLUGIN_SOURCE, o.INDEX, o.SIGNING_KEY, o.JSON],
        help="run the plugin's cpu tests on each core version; write matrix.md and matrix.json",
        description="Columns: the lowest core the plugin's installer allows (--lowest "
        "overrides), every published release up to the newest (--newest; final releases "
        "unless --prereleases), and core main when --repo is given. Each column pairs on the "
        "spec's Python while the core's Requires-Python accepts it, else on the newest of "
        "[runtime] python it accepts; builds the empty-target core (cached), the cpu pairing "
        "environment with the plugin wheel already built (`vpr build-plugin` first), runs "
        "the plugin's tests as `vpr release` does and the coupling report against the "
        "column before. Each column's record is written as it ends "
        "(dist/NAME/matrix/CORE.json) and reused by a re-run with the same inputs; a column "
        "that cannot be built, installed or tested is recorded with its reason and the run "
        "goes on. Writes dist/NAME/matrix.json and matrix.md from the records and, with "
        "--store, an entry per column in the store's signed ledger. Exit 0 no "
        "regression, 1 a regression or a column not run, 2 bad input (a version not on the "
        "index, nearest named), 3 outside failure.",
    )
    p.add_argument("--lowest", metavar="VERSION", help="first column")
    p.add_argument("--newest", metavar="VERSION", help="last column")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="VERSION",
        help="run this column only and write its record (repeatable; a CI job per column, "
        "then `vpr matrix assemble`)",
    )
    p.add_argument("--prereleases", action="store_true", help="also release candidates")
    p.add_argument("--repo", metavar="URL", help="core git repository: add main")
    p.add_argument("--ref", default="main", help="the main column's ref (default: main)")
    _add_matrix_store(p)
    p.set_defaults(func=_matrix_run)


def _add_assemble(msub: argparse._SubParsersAction) -> None:
    a = msub.add_parser(
        "assemble",
        parents=[o.SPEC, o.DIST, o.CACHE, o.INDEX, o.SIGNING_KEY, o.JSON],
        help="write matrix.json and matrix.md from the column records in dist/NAME/matrix/",
        description="The last job of a CI matrix: every job ran `vpr matrix run --only "
        "VERSION` and uploaded dist/NAME/matrix/VERSION.json; this assembles them into the "
        "same matrix.json a single run writes (with --store, an entry per column in the "
        "store's signed ledger, once per column record). Exit 0 no regression, 1 a "
        "regression or a column not run, 2 no or a malformed record.",
    )
    _add_matrix_store(a)
    a.set_defaults(func=_matrix_assemble)


def _add_matrix_store(p: argparse.ArgumentParser) -> None:
    # not STORE: no store unless named (the columns are then only written to dist/)
    p.add_argument(
        "--store",
        metavar="PATH",
        help="record every column in this manifest store's signed ledger (kind matrix; a "
        "column record already recorded is not recorded again)",
    )


def _matrix_run(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import matrix

    spec = load_spec(args.spec)
    opts = o.flow_options(
        matrix.Options,
        args,
        lowest=args.lowest or None,  # empty: not given (a CI input left empty)
        newest=args.newest or None,
        only=tuple(args.only),
    )
    return _matrix_show(matrix.run_matrix(spec, opts), args.json)


def _matrix_assemble(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import matrix

    opts = o.flow_options(matrix.Options, args)
    spec = load_spec(args.spec)
    return _matrix_show(matrix.assemble_folder(spec, Path(args.dist), args.index, opts), args.json)


def _matrix_show(m: Any, as_json: bool) -> int:
    from vllm_plugin_release.core import columns
    from vllm_plugin_release.edges.ci import job_summary

    markdown = columns.render_markdown(m)
    sys.stdout.write(columns.render_json(m) if as_json else markdown)
    job_summary(markdown)  # in GitHub Actions: the matrix on the run's page
    incomplete = any(not a.column.tested for a in m.columns)
    return EXIT_GATE if m.regressed or incomplete else EXIT_OK
