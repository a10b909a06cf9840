"""`vpr matrix run`: the plugin's cpu tests across the core versions it spans, one table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK
from vllm_plugin_release.edges import cachedir


def register(sub: argparse._SubParsersAction) -> None:
    matrix = sub.add_parser(
        "matrix",
        help="test the pairing across core versions (lowest declared .. newest, and main)",
        description="Subcommands: run.",
    )
    msub = matrix.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND")
    matrix.set_defaults(func=lambda a: (matrix.print_help(sys.stderr), 2)[1])
    p = msub.add_parser(
        "run",
        help="run the plugin's cpu tests on each core version; write matrix.md and matrix.json",
        description="Columns: the lowest core the plugin's installer allows (--lowest "
        "overrides), every published release up to the newest (final releases unless "
        "--prereleases), the pinned one, and core main when --repo is given. Each column "
        "builds the empty-target core (cached), the cpu pairing environment with the plugin "
        "wheel already built (`vpr build-plugin` first) and runs the tests. Writes "
        "dist/NAME/matrix.json and matrix.md; a column whose tests regressed against the "
        "column before is marked. Exit 0 no regression, 1 a regression, 2 bad input (a "
        "version not on the index, nearest named), 3 outside failure.",
    )
    add_spec_argument(p)
    p.add_argument("--lowest", default=None, metavar="VERSION", help="first column")
    p.add_argument("--index", default=None, help="simple API URL (default: the spec's index)")
    p.add_argument("--prereleases", action="store_true", help="also release candidates")
    p.add_argument("--repo", default=None, metavar="URL", help="core git repository: add main")
    p.add_argument("--ref", default="main", help="the main column's ref (default: main)")
    p.add_argument("--json", action="store_true", help="print the matrix as JSON")
    add_plugin_source(p)
    add_dirs(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.flows import matrix

    spec = load_spec(args.spec)
    opts = matrix.Options(
        cache=cachedir.from_args(args),
        dist_root=Path(args.dist),
        plugin_source=args.plugin_source,
        lowest=args.lowest,
        index=args.index,
        prereleases=args.prereleases,
        repo=args.repo,
        ref=args.ref,
    )
    m = matrix.run_matrix(spec, opts)
    if args.json:
        sys.stdout.write(json.dumps(m.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(matrix.render_markdown(m))
    return EXIT_GATE if m.regressed else EXIT_OK
