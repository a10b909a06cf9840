"""`if / elif / else / fi` in installer scripts: which branch runs.

The scanner yields flat simple commands; `structure` folds the ones between `if` and
`fi` into an `IfBlock`. The interpreter then takes the branch a condition selects
when the condition is static (`[ -n "$ARG" ]`, `[ "$A" = b ]`, `test`, `true`), and
follows every branch when it is not, keeping only the variables all branches agree
on. A `then` branch that is not taken no longer overrides an ARG default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vllm_plugin_release.conform.installer.scanner import SUB_RE, Segment, words

KEYWORDS = ("if", "then", "elif", "else", "fi")


@dataclass
class IfBlock:
    """`if C1; then B1; elif C2; then B2; else B3; fi`: [(C1, B1), (C2, B2)] and B3."""

    branches: list[tuple[list[Item], list[Item]]] = field(default_factory=list)
    otherwise: list[Item] | None = None


Item = Segment | IfBlock


def _tokens(segments: list[Segment]) -> list[str | Segment]:
    """Each segment's leading `if/then/elif/else/fi` words as tokens, then its command."""
    out: list[str | Segment] = []
    for seg in segments:
        text = seg.text
        while True:
            head, _, rest = text.partition(" ")
            head = head.strip()
            if head not in KEYWORDS:
                break
            out.append(head)
            text = rest.strip()
        if text:
            out.append(dataclasses.replace(seg, text=text) if text != seg.text else seg)
    return out


def structure(segments: list[Segment]) -> list[Item]:
    """The segments with every `if ... fi` folded into an IfBlock (an unclosed one ends
    with the text; a stray `then/else/fi` is dropped)."""
    items, _ = _items(_tokens(segments), 0, ())
    return items


def _items(tokens: list[str | Segment], i: int, stops: tuple[str, ...]) -> tuple[list[Item], int]:
    items: list[Item] = []
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, Segment):
            items.append(token)
            i += 1
        elif token in stops:
            return items, i
        elif token == "if":
            block, i = _if_block(tokens, i + 1)
            items.append(block)
        else:
            i += 1
    return items, i


def _if_block(tokens: list[str | Segment], i: int) -> tuple[IfBlock, int]:
    block = IfBlock()
    while True:
        cond, i = _items(tokens, i, ("then",))
        body, i = _items(tokens, i + 1, ("elif", "else", "fi"))
        block.branches.append((cond, body))
        if i < len(tokens) and tokens[i] == "elif":
            i += 1
            continue
        break
    if i < len(tokens) and tokens[i] == "else":
        block.otherwise, i = _items(tokens, i + 1, ("fi",))
    return block, i + 1


def condition(cond: list[Item], expand: Callable[[str], str]) -> bool | None:
    """The value of a static test command (words expanded by `expand`); None when it
    cannot be known here."""
    if len(cond) != 1 or not isinstance(cond[0], Segment) or cond[0].op == "|":
        return None
    raw, _ = words(cond[0].text)
    argv = [expand(w) for w in raw]
    if any("$" in w or SUB_RE.search(w) for w in argv):
        return None
    negate = False
    while argv and argv[0] == "!":
        negate, argv = not negate, argv[1:]
    value = _test(argv)
    return None if value is None else value != negate


def _test(argv: list[str]) -> bool | None:
    if argv in (["true"], [":"]):
        return True
    if argv == ["false"]:
        return False
    if argv and argv[0] in ("[", "[[") and argv[-1] in ("]", "]]"):
        argv = argv[1:-1]
    elif argv and argv[0] == "test":
        argv = argv[1:]
    else:
        return None
    if len(argv) == 1:
        return argv[0] != ""
    if len(argv) == 2 and argv[0] in ("-n", "-z"):
        return (argv[1] != "") == (argv[0] == "-n")
    if len(argv) == 3 and argv[1] in ("=", "==", "!="):
        return (argv[0] == argv[2]) == (argv[1] != "!=")
    return None


def merge(states: list[Any], file: str, line: int) -> Any:
    """The state after branches that may each have run (shell.State objects, which import
    this module): a variable keeps its value only when every branch leaves the same one;
    otherwise it is not static."""
    first = states[0]
    merged = dataclasses.replace(
        first,
        vars={},
        allexport=any(s.allexport for s in states),
        cwd=first.cwd if all(s.cwd == first.cwd for s in states) else None,
    )
    for name in sorted({n for s in states for n in s.vars}):
        found = [s.vars.get(name) for s in states]
        known = [v for v in found if v is not None]
        exported = any(v.exported for v in known)
        same = len(known) == len(found) and all(v.value == known[0].value for v in known)
        merged.vars[name] = (
            dataclasses.replace(known[0], exported=exported)
            if same
            else dataclasses.replace(known[0], value=None, file=file, line=line, exported=exported)
        )
    return merged
