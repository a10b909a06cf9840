"""`vpr matrix run`: the plugin's cpu tests across the core versions it spans, one table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK
from vllm_plugin_release.edges import settings


def register(sub: argparse._SubParsersAction) -> None:
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
    add_spec_argument(p)
    p.add_argument("--lowest", default=None, metavar="VERSION", help="first column")
    p.add_argument("--newest", default=None, metavar="VERSION", help="last column")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="VERSION",
        help="run this column only and write its record (repeatable; a CI job per column, "
        "then `vpr matrix assemble`)",
    )
    p.add_argument("--index", default=None, help="simple API URL (default: the spec's index)")
    p.add_argument("--prereleases", action="store_true", help="also release candidates")
    p.add_argument("--repo", default=None, metavar="URL", help="core git repository: add main")
    p.add_argument("--ref", default="main", help="the main column's ref (default: main)")
    p.add_argument("--json", action="store_true", help="print the matrix as JSON")
    _add_store(p)
    add_plugin_source(p)
    add_dirs(p)
    p.set_defaults(func=_run)


def _add_assemble(msub: argparse._SubParsersAction) -> None:
    a = msub.add_parser(
        "assemble",
        help="write matrix.json and matrix.md from the column records in dist/NAME/matrix/",
        description="The last job of a CI matrix: every job ran `vpr matrix run --only "
        "VERSION` and uploaded dist/NAME/matrix/VERSION.json; this assembles them into the "
        "same matrix.json a single run writes (with --store, an entry per column in the "
        "store's signed ledger, once per column record). Exit 0 no regression, 1 a "
        "regression or a column not run, 2 no or a malformed record.",
    )
    add_spec_argument(a)
    a.add_argument("--index", default=None, help="simple API URL (default: the spec's index)")
    a.add_argument("--json", action="store_true", help="print the matrix as JSON")
    _add_store(a)
    add_dirs(a)
    a.set_defaults(func=_assemble)


def _add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=None,
        metavar="PATH",
        help="record every column in this manifest store's signed ledger (kind matrix; a "
        "column record already recorded is not recorded again)",
    )
    p.add_argument("--signing-key", default=None, help="ed25519 private key (as manifest build)")


def _run(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import matrix

    spec = load_spec(args.spec)
    opts = matrix.Options(
        cache=settings.cache_from_args(args),
        dist_root=Path(args.dist),
        plugin_source=args.plugin_source,
        lowest=args.lowest or None,  # empty: not given (a CI input left empty)
        index=args.index,
        prereleases=args.prereleases,
        repo=args.repo,
        ref=args.ref,
        newest=args.newest or None,
        only=tuple(args.only),
        store=args.store,
        signing_key=args.signing_key,
    )
    return _show(matrix.run_matrix(spec, opts), args.json)


def _assemble(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import matrix

    opts = matrix.Options(
        cache=settings.cache_from_args(args),
        dist_root=Path(args.dist),
        store=args.store,
        signing_key=args.signing_key,
    )
    spec = load_spec(args.spec)
    return _show(matrix.assemble_folder(spec, Path(args.dist), args.index, opts), args.json)


def _show(m: Any, as_json: bool) -> int:
    from vllm_plugin_release.core import columns
    from vllm_plugin_release.edges.ci import job_summary

    markdown = columns.render_markdown(m)
    sys.stdout.write(columns.render_json(m) if as_json else markdown)
    job_summary(markdown)  # in GitHub Actions: the matrix on the run's page
    incomplete = any(not a.column.tested for a in m.columns)
    return EXIT_GATE if m.regressed or incomplete else EXIT_OK
