"""The `vpr` command line.

Each stage module registers its own subcommand through `register(subparsers)`;
the function it sets as `func` takes the parsed arguments and returns an exit
code. Errors derived from `VprError` are printed without a traceback and mapped
onto the documented exit codes (0 ok, 1 gate failed, 2 bad input, 3 outside).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from vllm_plugin_release import __version__
from vllm_plugin_release.core.errors import EXIT_BAD_INPUT, EXIT_OUTSIDE, VprError

# Modules that contribute subcommands, in the order `vpr --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "vllm_plugin_release.cli.spec",
    "vllm_plugin_release.cli.build",
    "vllm_plugin_release.cli.conform",
    "vllm_plugin_release.cli.release",
    "vllm_plugin_release.cli.manifest",
    "vllm_plugin_release.cli.install",
    "vllm_plugin_release.cli.scan",
    "vllm_plugin_release.cli.api",
    "vllm_plugin_release.cli.replay",
    "vllm_plugin_release.cli.bump",
    "vllm_plugin_release.cli.bisect",
    "vllm_plugin_release.cli.matrix",
    "vllm_plugin_release.cli.hardware",
    "vllm_plugin_release.cli.image",
)


class _Parser(argparse.ArgumentParser):
    # A subcommand may set `lazy_epilog` (a callable): its text is made only when the help
    # is shown, so building the parser never imports what the text is made from.
    lazy_epilog: Callable[[], str] | None = None

    def error(self, message: str) -> None:  # exit 2 with a usage line, as argparse does
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"vpr: error: {message}\n")

    def format_help(self) -> str:
        if self.lazy_epilog is not None:
            self.epilog = self.lazy_epilog()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vpr",
        description="Release pipeline for vLLM core + hardware platform plugins.",
        epilog="Exit codes: 0 ok, 1 a gate or check failed, 2 bad input, 3 outside failure.",
    )
    parser.add_argument("--version", action="version", version=f"vpr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    from vllm_plugin_release.core import progress

    # Live displays on a terminal; plain lines in CI logs and pipes.
    # (None: follow the terminal, asked when something is first shown, so a command that
    # shows nothing never loads rich)
    progress.configure(interactive=False if os.environ.get("CI") else None)
    from vllm_plugin_release.edges.children import stopped_on_signals

    try:
        with stopped_on_signals():  # SIGTERM takes Ctrl-C's path; children are stopped
            return int(args.func(args) or 0)
    except VprError as exc:
        from rich.markup import escape

        from vllm_plugin_release.core.progress import console

        console.print(f"[bold red]vpr error[/bold red] {escape(str(exc))}", highlight=False)
        return exc.exit_code
    except KeyboardInterrupt:
        print("vpr: interrupted; nothing was published", file=sys.stderr)
        return 130
    except OSError as exc:  # disk full, permissions: an outside failure, said plainly
        print(f"vpr error: {exc}", file=sys.stderr)
        return EXIT_OUTSIDE


if __name__ == "__main__":
    sys.exit(main())
