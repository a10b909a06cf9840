"""`if / elif / else / fi`, `case ... esac` and loops in installer scripts: what runs.

The scanner yields flat simple commands; `structure` folds the ones between `if` and
`fi` into an `IfBlock`, a `case WORD in PATTERN) ... ;; esac` into a `CaseBlock`, and
`for NAME in WORDS; do ... done` / `while|until COND; do ... done` into a `Loop`. The
interpreter then takes the branch a condition selects when the condition is static
(`[ -n "$ARG" ]`, `[ "$A" = b ]`, `test`, `true`), the first clause whose pattern
matches a static case word (an ARG default or a build argument included), runs a `for`
body once per static word, and otherwise follows every branch (a loop body: run or
not), keeping only the variables all branches agree on. A `then` branch or a case
clause that is not taken no longer overrides an ARG default.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vllm_plugin_release.conform.lib.installer.scanner import SUB_RE, Segment, words

KEYWORDS = ("if", "then", "elif", "else", "fi", "while", "until", "do", "done", "esac")
_CASE_RE = re.compile(r"^case\s+(.+?)\s+in(?:\s+(.*))?$", re.S)
_PATTERN_RE = re.compile(r"^\(?\s*([^()]*?)\s*\)\s*(.*)$", re.S)
_FOR_RE = re.compile(r"^(for|select)\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s+in(?:\s+(.*))?)?$", re.S)
PATTERN = "<pattern>"  # a stop: the next case clause


@dataclass
class IfBlock:
    """`if C1; then B1; elif C2; then B2; else B3; fi`: [(C1, B1), (C2, B2)] and B3."""

    branches: list[tuple[list[Item], list[Item]]] = field(default_factory=list)
    otherwise: list[Item] | None = None


@dataclass
class CaseBlock:
    """`case WORD in P1|P2) B1 ;; P3) B2 ;; esac`: the word (as written) and the clauses."""

    word: Segment
    clauses: list[tuple[list[str], list[Item]]] = field(default_factory=list)


@dataclass
class Loop:
    """`for NAME in WORDS; do BODY; done` (`words` as written; None: "$@") or
    `while|until COND; do BODY; done`."""

    kind: str
    head: Segment | None
    name: str | None = None
    words: str | None = None
    cond: list[Item] = field(default_factory=list)
    body: list[Item] = field(default_factory=list)


Item = Segment | IfBlock | CaseBlock | Loop


@dataclass(frozen=True)
class _Head:
    """A `case WORD in` or `for NAME in WORDS` line, or a case clause's patterns."""

    kind: str  # "case", "for", "select" or PATTERN
    seg: Segment
    name: str = ""
    words: str | None = None
    patterns: tuple[str, ...] = ()


Token = str | Segment | _Head
MAX_NESTING = 64  # blocks inside blocks (if, case, loops; sourced scripts and subshells add)


class TooComplex(Exception):
    """A script beyond what the analysis follows (nested too deep, or more work than its
    budget): `where` is FILE:LINE, the message says what and what to do."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where = where


def _tokens(segments: list[Segment]) -> list[Token]:
    """Each segment's leading keywords as tokens, a `case`/`for` head or a clause's
    patterns as a `_Head`, then its command. Inside a case, the words before `PATTERN)`
    (split by the scanner at each `|`) are the clause's patterns, up to the next `;;`."""
    out: list[Token] = []
    cases: list[bool] = []  # per open case: is a clause's pattern next?
    alternatives: list[str] = []
    for seg in segments:
        if cases and seg.op == ";;":
            cases[-1] = True
        text = seg.text
        while text:
            head, _, rest = text.partition(" ")
            if head.strip() in KEYWORDS:
                out.append(head.strip())
                if head.strip() == "esac" and cases:
                    cases.pop()
                text = rest.strip()
            elif cases and cases[-1]:
                m = _PATTERN_RE.match(text)
                if not m or ")" not in text:
                    alternatives.append(text)  # `a` of `a|b)`: the scanner split at `|`
                    break
                found = [*alternatives, *m.group(1).split("|")]
                out.append(_Head(PATTERN, seg, patterns=tuple(a.strip() for a in found)))
                alternatives, cases[-1], text = [], False, m.group(2).strip()
            elif m := _CASE_RE.match(text):
                out.append(_Head("case", dataclasses.replace(seg, text=m.group(1))))
                cases.append(True)
                text = (m.group(2) or "").strip()
            elif m := _FOR_RE.match(text):
                out.append(_Head(m.group(1), seg, name=m.group(2), words=m.group(3)))
                break
            else:
                out.append(dataclasses.replace(seg, text=text) if text != seg.text else seg)
                break
    return out


def structure(segments: list[Segment], file: str = "<shell>") -> list[Item]:
    """The segments with every `if ... fi` folded into an IfBlock (an unclosed one ends
    with the text; a stray `then/else/fi` is dropped). Blocks nested more than
    MAX_NESTING deep raise TooComplex (the parser recurses once per block)."""
    items, _ = _items(_tokens(segments), 0, (), _Nesting(file))
    return items


class _Nesting:
    """How deep the block being folded is; TooComplex past MAX_NESTING."""

    def __init__(self, file: str) -> None:
        self.file, self.depth = file, 0

    def enter(self, tokens: list[Token], i: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            near = (t for t in tokens[i : i + 8] if not isinstance(t, str))
            token = next(near, None)
            line = token.line if isinstance(token, Segment) else token.seg.line if token else 0
            raise TooComplex(f"{self.file}:{line}", f"blocks nested more than {MAX_NESTING} deep")


def _items(
    tokens: list[Token], i: int, stops: tuple[str, ...], nest: _Nesting
) -> tuple[list[Item], int]:
    nest.enter(tokens, i)
    try:
        return _fold(tokens, i, stops, nest)
    finally:
        nest.depth -= 1


def _fold(
    tokens: list[Token], i: int, stops: tuple[str, ...], nest: _Nesting
) -> tuple[list[Item], int]:
    items: list[Item] = []
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, Segment):
            items.append(token)
            i += 1
        elif isinstance(token, _Head):
            if token.kind == PATTERN and PATTERN in stops:
                return items, i
            block: Item
            if token.kind == "case":
                block, i = _case_block(token, tokens, i + 1, nest)
            elif token.kind == PATTERN:  # a stray clause outside a case
                i += 1
                continue
            else:
                block, i = _loop(
                    Loop(token.kind, token.seg, token.name, token.words), tokens, i, nest
                )
            items.append(block)
        elif token in stops:
            return items, i
        elif token == "if":
            block, i = _if_block(tokens, i + 1, nest)
            items.append(block)
        elif token in ("while", "until"):
            loop = Loop(token, None)
            loop.cond, i = _items(tokens, i + 1, ("do",), nest)
            block, i = _loop(loop, tokens, i - 1, nest)
            items.append(block)
        else:
            i += 1
    return items, i


def _loop(loop: Loop, tokens: list[Token], i: int, nest: _Nesting) -> tuple[Loop, int]:
    """The body between the `do` after token `i` and its `done`."""
    i += 1
    while i < len(tokens) and tokens[i] != "do":
        i += 1
    loop.body, i = _items(tokens, i + 1, ("done",), nest)
    return loop, i + 1


def _case_block(head: _Head, tokens: list[Token], i: int, nest: _Nesting) -> tuple[CaseBlock, int]:
    block = CaseBlock(head.seg)
    while i < len(tokens) and tokens[i] != "esac":
        token = tokens[i]
        if isinstance(token, _Head) and token.kind == PATTERN:
            body, i = _items(tokens, i + 1, ("esac", PATTERN), nest)
            block.clauses.append((list(token.patterns), body))
        else:
            i += 1  # nothing runs between `in` and the first pattern
    return block, i + 1


def _if_block(tokens: list[Token], i: int, nest: _Nesting) -> tuple[IfBlock, int]:
    block = IfBlock()
    while True:
        cond, i = _items(tokens, i, ("then",), nest)
        body, i = _items(tokens, i + 1, ("elif", "else", "fi"), nest)
        block.branches.append((cond, body))
        if i < len(tokens) and tokens[i] == "elif":
            i += 1
            continue
        break
    if i < len(tokens) and tokens[i] == "else":
        block.otherwise, i = _items(tokens, i + 1, ("fi",), nest)
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
        if found[0] is not None and all(v is found[0] for v in found):
            merged.vars[name] = found[0]  # no branch touched it
            continue
        known = [v for v in found if v is not None]
        exported = any(v.exported for v in known)
        same = len(known) == len(found) and all(v.value == known[0].value for v in known)
        merged.vars[name] = (
            dataclasses.replace(known[0], exported=exported)
            if same
            else dataclasses.replace(known[0], value=None, file=file, line=line, exported=exported)
        )
    return merged
