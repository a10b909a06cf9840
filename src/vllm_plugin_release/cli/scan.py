"""`vpr scan-core PATH`: search a vLLM core tree or wheel for vendor symbols (exit 1 when an
import or code identifier hits)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK, BadInput

_EPILOG = """\
Symbols match case-insensitively on identifier boundaries: `ttnn` matches
`import ttnn` and `TTNN_CACHE` but not `AttnNvfp4`; ALL_CAPS names with
underscores (MESH_DEVICE) match the whole token only. Hits are classified:
import and code fail (exit 1), string literals warn, comments and docs are info.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "scan-core",
        help="search a vLLM core tree or wheel for vendor-specific symbols",
        description="Search a vLLM core source tree (or a built wheel) for vendor-specific "
        "symbols and classify every hit (import, code, string, comment, docs).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help="core source tree (folder) or wheel (.whl)")
    which = parser.add_mutually_exclusive_group(required=True)
    # one of two sources of the symbols, so no default spec (unlike SPEC)
    which.add_argument(
        "--spec",
        metavar="FILE",
        help="buildspec whose [conformance.isolation] lists the symbols and the allowlist",
    )
    which.add_argument(
        "--symbols", metavar="A,B,...", help="comma-separated symbols, e.g. ttnn,tt_metal"
    )
    # options.JSON's help, written out: the quickest command loads no other module of ours
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    # nothing to clean up after the report is written: no interpreter teardown (cli.main)
    parser.set_defaults(func=run, exit_now=True)


def _config(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """(symbols, allowlist) from --spec or --symbols (which loads no spec machinery)."""
    from vllm_plugin_release.conform.lib.symbols import Symbol

    if args.spec:
        from vllm_plugin_release.buildspec.load import load_spec
        from vllm_plugin_release.conform.checks.isolation import config_from_spec

        spec = load_spec(args.spec)
        config = config_from_spec(spec)
        if config is None:
            raise BadInput(
                f"{args.spec}: no [conformance.isolation] table",
                hint='add [conformance.isolation] with symbols = ["ttnn", ...], '
                "or pass --symbols A,B",
            )
        return tuple(config.symbols), tuple(config.allowlist)
    names = [s.strip() for s in args.symbols.split(",") if s.strip()]
    if not names:
        raise BadInput("--symbols: no symbol given", hint="pass --symbols ttnn,tt_metal,...")
    for name in names:
        try:
            Symbol.parse(name)
        except ValueError as exc:
            raise BadInput(f"--symbols: {exc}") from None
    return tuple(names), ()


def run(args: argparse.Namespace) -> int:
    from vllm_plugin_release.conform.lib.symbols import scan_path
    from vllm_plugin_release.edges.proc import usable_cores

    symbols, allowlist = _config(args)
    # every usable core: the files are shared out over forked processes
    report = scan_path(args.path, symbols, allowlist, workers=usable_cores())
    if args.json:
        import json

        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(report)
    return EXIT_GATE if report.failed else EXIT_OK


_STYLE = {"fail": "bold red", "warn": "yellow", "info": "dim"}


def _print(report) -> None:  # report: ScanReport
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from vllm_plugin_release.conform.lib.symbols import KINDS, SEVERITY

    out = Console(highlight=False, soft_wrap=True)
    n = report.files_scanned
    unit = ("file" if report.source == "tree" else "member") + ("" if n == 1 else "s")
    out.print(
        f"[bold]core isolation[/bold] {escape(report.root)} ({report.source}): "
        f"{len(report.symbols)} symbol{'' if len(report.symbols) == 1 else 's'}, {n:,} {unit}, "
        f"{report.bytes_scanned / 1e6:.1f} MB in {report.seconds:.2f} s"
    )
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("kind")
    table.add_column("severity")
    table.add_column("hits", justify="right")
    counts = report.counts
    for kind in KINDS:
        sev = SEVERITY[kind]
        style = _STYLE[sev] if counts[kind] else ""
        table.add_row(kind, sev, str(counts[kind]), style=style)
    table.add_row("allowed", "info", str(report.allowed), style="dim" if report.allowed else "")
    out.print(table)
    for hit in report.hits:
        style = _STYLE[hit.severity]
        note = f"  [dim](allowed: {escape(hit.reason or '')})[/dim]" if hit.allowed else ""
        out.print(
            f"{escape(hit.path)}:{hit.line}  [{style}]{hit.kind}[/{style}]  "
            f"{escape(hit.symbol)}  {escape(hit.text)}{note}"
        )
    skipped = report.skipped_counts
    if skipped:
        out.print("skipped: " + ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())))
        for s in report.skipped:
            if s.symbols:
                out.print(
                    f"  [yellow]{escape(s.path)}[/yellow] ({s.reason}) holds the bytes of "
                    f"{escape(', '.join(s.symbols))} (not classified)"
                )
    for entry in report.unused_allowlist:
        out.print(
            f"[yellow]unused allowlist entry[/yellow] path={escape(entry.path)} "
            f"symbol={escape(entry.symbol)}: no such hit; remove it from the spec"
        )
    verdict = {
        "fail": "[bold red]FAIL[/bold red]: vendor symbols in core imports or code",
        "warn": "[yellow]WARN[/yellow]: vendor symbols in core string literals",
        "pass": "[green]PASS[/green]: no vendor symbol in core imports or code",
    }[report.status]
    out.print(verdict)
