"""The `vpr` command line: each command module registers its subcommands; errors derived
from `VprError` are one line and an exit code (0 ok, 1 gate failed, 2 bad input, 3 outside)."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from vllm_plugin_release import __version__
from vllm_plugin_release.core.errors import EXIT_BAD_INPUT, EXIT_OUTSIDE, VprError
from vllm_plugin_release.edges import settings

# Modules that contribute subcommands, in the order `vpr --help` lists them, and the
# commands each registers: a command line that names one builds only its module's parser
# (`build_parser(command)`), so `vpr scan-core` does not import the others.
COMMANDS: dict[str, tuple[str, ...]] = {
    "vllm_plugin_release.cli.build": (
        "spec",
        "settings",
        "fetch",
        "lock",
        "build-core",
        "build-plugin",
        "build-guard",
        "env",
        "plugin-tests",
        "build-image",
    ),
    "vllm_plugin_release.cli.conform": ("conform", "check"),
    "vllm_plugin_release.cli.release": ("release",),
    "vllm_plugin_release.cli.manifest": ("manifest", "keygen", "publish", "install"),
    "vllm_plugin_release.cli.scan": ("scan-core",),
    "vllm_plugin_release.cli.api": ("api-contract", "api-diff"),
    "vllm_plugin_release.cli.replay": ("replay", "loadtest"),
    "vllm_plugin_release.cli.upstream": (
        "upstream",
        "bump",
        "pr-body",
        "bisect",
        "nightly",
        "matrix",
    ),
    "vllm_plugin_release.cli.hardware": ("hardware",),
}
_MODULE_OF = {name: module for module, names in COMMANDS.items() for name in names}


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose `--help` always has a description: their `help` line if no other."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if kwargs.get("description") is None and kwargs.get("help"):
            text = str(kwargs["help"])
            kwargs["description"] = text[:1].upper() + text[1:] + ("" if text[-1:] in ".)" else ".")
        return super().add_parser(name, **kwargs)


class _Parser(argparse.ArgumentParser):
    # A subcommand may set `lazy_epilog` (a callable): its text is made only when the help
    # is shown, so building the parser never imports what the text is made from.
    lazy_epilog: Callable[[], str] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Commands)

    argv: Sequence[str] = ()  # the command line being parsed (set by the top level)

    def error(self, message: str) -> NoReturn:  # exit 2 with this (sub)command's usage line
        self.print_usage(sys.stderr)
        message = explain_choice_error(message)
        if "arguments are required" in message:  # often a mistyped flag: say which
            message += mistyped_flags(self, _Parser.argv)
        self.exit(EXIT_BAD_INPUT, f"vpr: error: {message}\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        # An unknown flag is reported by the subcommand it was given to (its usage, and a
        # "did you mean"), not by the top level as argparse does.
        argv = sys.argv[1:] if args is None else list(args)
        _Parser.argv = argv
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            chosen = chosen_parser(self, argv)
            chosen.error(unknown_arguments(chosen, extras))
        return parsed

    def format_help(self) -> str:
        if self.lazy_epilog is not None:
            self.epilog = self.lazy_epilog()
        return super().format_help()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command` (a name in COMMANDS), only the parser of the
    module that registers it (the same parser for that command, made without the rest)."""
    parser = _Parser(
        prog="vpr",
        description="Release pipeline for vLLM core + hardware platform plugins.",
        epilog="Exit codes: 0 ok, 1 a gate or check failed, 2 bad input, 3 outside failure.",
    )
    parser.add_argument("--version", action="version", version=f"vpr {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"also print the traceback behind an error, for a bug report (anywhere on the "
        f"command line; or {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules = [_MODULE_OF[command]] if command in _MODULE_OF else COMMANDS
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def _exit_now(code: int) -> None:
    """End the process with `code` without the interpreter's teardown (freeing every object a scan
    made), once the output is written. Only when nothing waits for the teardown: no atexit callback,
    no other thread."""
    import atexit
    import threading

    ncallbacks = getattr(atexit, "_ncallbacks", None)
    if ncallbacks is None or ncallbacks() or threading.active_count() != 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: the normal exit reports it as it does
        return
    os._exit(code)


DEBUG_FLAG = "--debug"
DEBUG_ENV = "VPR_DEBUG"


def debug_asked(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """(whether `--debug` or VPR_DEBUG=1 asks for tracebacks, the command line without the flag);
    the flag may stand anywhere before a `--`."""
    end = list(argv).index("--") if "--" in argv else len(argv)
    rest = [a for a in argv[:end] if a != DEBUG_FLAG] + list(argv[end:])
    on = len(rest) != len(argv) or settings.flag(DEBUG_ENV)
    return on, rest


def _said(exc: BaseException) -> int:
    """The one line an error ends the command with, on stderr; its exit code."""
    if isinstance(exc, VprError):
        from rich.markup import escape

        from vllm_plugin_release.core.progress import console

        console.print(f"[bold red]vpr error[/bold red] {escape(str(exc))}", highlight=False)
        return exc.exit_code
    if isinstance(exc, OSError):  # disk full, permissions: an outside failure, said plainly
        print(f"vpr error: {exc}", file=sys.stderr)
        return EXIT_OUTSIDE
    print("vpr: interrupted; nothing was published", file=sys.stderr)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    # The command line of this process (not a caller's list): a command that sets
    # `exit_now` (scan-core) ends the process as soon as its output is written.
    whole_process = argv is None
    debug, argv = debug_asked(sys.argv[1:] if argv is None else list(argv))
    # `vpr COMMAND ...`: that command's module alone; anything else (a top-level flag, a
    # mistyped command to suggest a name for) gets the whole command line
    parser = build_parser(argv[0]) if argv and argv[0] in _MODULE_OF else build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):  # `vpr manifest`: the help of `vpr manifest`
        chosen_parser(parser, _Parser.argv).print_help(sys.stderr)
        return EXIT_BAD_INPUT
    from vllm_plugin_release.core import progress

    # interactive None: follow the terminal, asked when something is first shown, so a
    # command that shows nothing never loads rich
    progress.configure(
        interactive=False if os.environ.get("CI") else None,
        heartbeat=settings.number("VPR_HEARTBEAT"),
        github=os.environ.get("GITHUB_ACTIONS") == "true",
    )
    from vllm_plugin_release.edges.proc import Interrupted, stopped_on_signals

    try:
        with stopped_on_signals():  # SIGTERM takes Ctrl-C's path; children are stopped
            code = int(args.func(args) or 0)
    except (VprError, Interrupted, KeyboardInterrupt, OSError) as exc:
        if debug:  # the traceback behind the one-line error, for a bug report
            import traceback

            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        return _said(exc)
    if whole_process and getattr(args, "exit_now", False):
        _exit_now(code)
    return code


# Usage errors that help: the usage of the subcommand meant, and a "did you mean" for a
# mistyped command, flag or choice (difflib: argparse has no suggestions before 3.14).

# argparse's message for a bad choice (3.11: "argument COMMAND: invalid choice: 'x' (choose
# from 'a', 'b')"; 3.12+ drops the quotes of the choices).
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


def close(word: str, candidates: Iterable[str]) -> list[str]:
    """The candidates that look like `word`, best first (at most three)."""
    import difflib  # here: a command line that parses never needs it

    pool = list(dict.fromkeys(candidates))
    scored = sorted(
        ((difflib.SequenceMatcher(None, word, c).ratio(), c) for c in pool), reverse=True
    )
    best = scored[0][0] if scored else 0.0
    # close enough, and not much worse than the best ("relase": release, not replay)
    found = [c for score, c in scored if score >= max(0.6, best - 0.1)][:3]
    if not found and word:  # a prefix ("--no-pub") is a clear enough intent
        found = [c for c in pool if c.startswith(word)][:3]
    return found


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """ "; did you mean X?" (or "X or Y?"), or "" when nothing is close."""
    found = close(word, candidates)
    if not found:
        return ""
    return "; did you mean " + " or ".join(found) + "?"


def explain_choice_error(message: str) -> str:
    """argparse's invalid-choice message with a suggestion appended when one is close."""
    m = _INVALID_CHOICE.search(message)
    if not m:
        return message
    choices = [c.strip().strip("'\"") for c in m.group("choices").split(",")]
    return message + did_you_mean(m.group("word"), choices)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def chosen_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The deepest (sub)parser the command line selected: `vpr manifest verify ...` ->
    the parser of `manifest verify`. Options before a command are skipped over."""
    current = parser
    for token in argv:
        if token == "--":
            break
        nested = _subparsers(current)
        if token in nested:
            current = nested[token]
    return current


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def unknown_arguments(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The message for arguments `parser` does not take, with a suggestion per flag."""
    known = option_strings(parser)
    parts = []
    for extra in extras:
        flag = extra.split("=", 1)[0]
        found = close(flag, known) if flag.startswith("-") and len(flag) > 1 else []
        parts.append(f"{extra} (did you mean {' or '.join(found)}?)" if found else extra)
    return "unrecognized arguments: " + " ".join(parts)


def mistyped_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """ "; unrecognized: --kye (did you mean --key?)" for the flags of `argv` that neither
    `parser` nor the top level takes, or "" when there are none."""
    known = set(option_strings(parser)) | {"-h", "--help", "--version"}
    unknown = [t for t in argv if t.startswith("-") and t.split("=", 1)[0] not in known]
    if not unknown or "--" in argv:
        return ""
    listed = unknown_arguments(parser, unknown).removeprefix("unrecognized arguments: ")
    return f"; unrecognized: {listed}"


if __name__ == "__main__":
    sys.exit(main())
