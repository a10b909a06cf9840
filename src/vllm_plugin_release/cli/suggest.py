"""Usage errors that help: the usage of the subcommand that was meant, and a "did you
mean" for a mistyped command, flag or choice (argparse in Python 3.11 has no
`suggest_on_error`; difflib does the matching).

`vpr relase` -> "invalid choice: 'relase' ... did you mean 'release'?";
`vpr release --no-publsh` -> the usage of `vpr release` and "did you mean --no-publish?".
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence

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
