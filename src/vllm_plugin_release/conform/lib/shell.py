"""A small shell interpreter for installer scripts: it runs nothing, and records each simple
command with its static environment, through `if`, `case`, loops and sourced scripts."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_plugin_release.conform.lib.plugintree import Unread, exists_within, read_text, too_large

SUB_RE = re.compile(r"__VPR_SUB(\d+)__")
_WORD_BREAK = " \t;&|()"
_CASE_HEAD_RE = re.compile(r"^case\s.*\sin$", re.S)
_FD_RE = re.compile(r"(\d+)[<>]")  # a file descriptor before a redirection (2>&1)
_HEREDOC_RE = re.compile(r"""<<(-?)[ \t]*(?:(['"])(.*?)\2|([^\s;&|<>()]+))?""")


@dataclass
class Segment:
    """One simple command's text (command substitutions replaced by placeholders)."""

    text: str
    line: int
    op: str | None  # the operator before it: ; ;; (ends a case clause) && || | & or None
    heredoc_marks: list[tuple[str, bool]] = field(default_factory=list)
    heredocs: list[list[tuple[int, str]]] = field(default_factory=list)


class Scanner:
    """Splits shell text into simple commands, keeping the line each one starts on."""

    def __init__(self, lines: list[tuple[int, str]], subs: dict[str, tuple[str, int]]) -> None:
        self.lines = lines
        self.subs = subs
        self.segments: list[Segment] = []
        self.cur: list[str] = []
        self.cur_line: int | None = None
        self.next_op: str | None = None
        self.marks: list[tuple[str, bool]] = []
        self.stack: list[str] = []
        self.sub_buf: list[str] = []
        self.sub_line = 0
        self.lineno = 0
        self.pending: list[Segment] = []
        self.unterminated = False

    def capturing(self) -> bool:
        return "$(" in self.stack or "`" in self.stack

    def put(self, text: str) -> None:
        if self.capturing():
            self.sub_buf.append(text)
            return
        if self.cur_line is None and text.strip():
            self.cur_line = self.lineno
        self.cur.append(text)

    def prev_char(self) -> str:
        buf = self.sub_buf if self.capturing() else self.cur
        for chunk in reversed(buf):
            if chunk:
                return chunk[-1]
        return " "

    def emit(self, op: str | None) -> None:
        text = "".join(self.cur).strip()
        if text:
            seg = Segment(text, self.cur_line or self.lineno, self.next_op, self.marks)
            self.segments.append(seg)
            if self.marks:
                self.pending.append(seg)
            self.next_op = op
        elif op in ("&&", "||", "|") or self.next_op not in ("&&", "||", "|", ";;"):
            self.next_op = op
        self.cur, self.cur_line, self.marks = [], None, []

    def close_sub(self, c: str) -> None:
        """A closing `)` or backtick: text of the enclosing substitution, else a placeholder."""
        if self.capturing():
            self.sub_buf.append(c)
            return
        key = f"__VPR_SUB{len(self.subs)}__"
        self.subs[key] = ("".join(self.sub_buf), self.sub_line)
        self.sub_buf = []
        self.put(key)

    def open_sub(self, token: str) -> None:
        if self.capturing():
            self.sub_buf.append(token)
        else:
            self.sub_buf, self.sub_line = [], self.lineno
        self.stack.append("$(" if token.startswith("$") else "`")

    def run(self) -> list[Segment]:
        index = 0
        while index < len(self.lines):
            self.lineno, line = self.lines[index]
            index += 1
            if self.scan_line(line):  # a line continuation
                continue
            top = self.stack[-1] if self.stack else None
            if top in ('"', "'", "`") or self.capturing():
                self.put("\n")
                continue
            self.emit(";")
            index = self.read_heredocs(index)
        if self.stack:
            self.unterminated = True
            while self.capturing():
                if self.stack.pop() in ("$(", "`"):
                    self.close_sub("")  # an empty chunk: nothing inside a substitution
            self.stack = []
        self.emit(None)
        return self.segments

    def read_heredocs(self, index: int) -> int:
        """Heredoc bodies follow the line that opened them; the index after them."""
        for seg in self.pending:
            for word, strip_tabs in seg.heredoc_marks:
                body: list[tuple[int, str]] = []
                while index < len(self.lines):
                    number, text = self.lines[index]
                    index += 1
                    check = text.lstrip("\t") if strip_tabs else text
                    if check.rstrip() == word:
                        break
                    body.append((number, text))
                seg.heredocs.append(body)
        self.pending = []
        return index

    def scan_line(self, line: str) -> bool:
        """Scan one physical line; True when it ends with a line continuation."""
        j, n = 0, len(line)
        while j < n:
            c = line[j]
            top = self.stack[-1] if self.stack else None
            if top == "'":
                self.put(c)
                if c == "'":
                    self.stack.pop()
                j += 1
            elif c == "\\":
                if j == n - 1:
                    return True
                self.put(c + line[j + 1])
                j += 2
            elif top == '"':
                j = self.double_quoted(line, j)
            elif top == "`" and c == "`":
                self.stack.pop()
                self.close_sub(c)
                j += 1
            elif top == "`":
                self.put(c)
                j += 1
            else:
                j = self.unquoted(line, j)
        return False

    def double_quoted(self, line: str, j: int) -> int:
        c, nxt = line[j], line[j + 1 : j + 2]
        if c == '"':
            self.stack.pop()
            self.put(c)
        elif c == "$" and nxt == "(":
            self.open_sub("$(")
            j += 1
        elif c == "`":
            self.open_sub("`")
        else:
            self.put(c)
        return j + 1

    def unquoted(self, line: str, j: int) -> int:
        """Top level, inside $( ... ) or a subshell; len(line) at a comment."""
        c, nxt = line[j], line[j + 1 : j + 2]
        word_start = self.prev_char() in _WORD_BREAK
        if c == "#" and word_start:
            return len(line)
        if c in "\"'":
            self.stack.append(c)
            self.put(c)
        elif c == "$" and nxt == "(":
            self.open_sub("$(")
            return j + 2
        elif c == "`":
            self.open_sub("`")
        elif c in "()":
            self.paren(c)
        elif self.capturing():
            self.put(c)
        elif c in ";&|":
            return self.operator(line, j)
        elif c.isdigit() and word_start and (fd := _FD_RE.match(line, j)):
            return fd.end(1)
        elif line.startswith("<<", j) and not line.startswith("<<<", j):
            return self.heredoc_mark(line, j)
        else:
            self.put(c)
        return j + 1

    def paren(self, c: str) -> None:
        top = self.stack[-1] if self.stack else None
        if c == "(" and not self.capturing() and self.case_pattern_next():
            return  # `(pattern)` of a case clause: the `(` is optional syntax
        if c == "(":
            self.stack.append("(")
        elif top in ("$(", "("):
            self.stack.pop()
        if c == "(" or top == "(":  # a subshell's commands are segments of their own
            if self.capturing():
                self.put(c)
            else:
                self.emit(";")
        elif top == "$(":
            self.close_sub(c)
        else:
            self.put(c)  # a case pattern or a stray parenthesis
            if not self.capturing() and self.pattern_closed():
                self.emit(";")  # the clause's commands start (and keep) their own line

    def case_pattern_next(self) -> bool:
        """A case clause's pattern comes next: after `case WORD in` or a `;;`."""
        text = "".join(self.cur).strip()
        if _CASE_HEAD_RE.match(text):
            self.emit(";")
            return True
        if text:
            return False
        last = self.segments[-1].text if self.segments else ""
        return self.next_op == ";;" or bool(_CASE_HEAD_RE.match(last))

    def pattern_closed(self) -> bool:
        """The `)` just read closes a case clause's pattern (`a)`, or `b)` of `a|b)`)."""
        text = "".join(self.cur).strip()
        if " " in text or "\t" in text:
            return False
        last = self.segments[-1].text if self.segments else ""
        return self.next_op in (";;", "|") or bool(_CASE_HEAD_RE.match(last))

    def operator(self, line: str, j: int) -> int:
        c, pair = line[j], line[j : j + 2]
        if pair in ("&&", "||", ";;"):
            self.emit(pair)
            return j + 2
        if pair == "&>" or self.prev_char() == ">":
            self.put(c)
        elif pair == "|&":
            self.emit("|")
            return j + 2
        else:
            self.emit(c)
        return j + 1

    def heredoc_mark(self, line: str, j: int) -> int:
        """`<<WORD` / `<<-WORD`: remember the delimiter; its body follows the line."""
        m = _HEREDOC_RE.match(line, j)  # it matches `<<` alone: the word is optional
        if m and (m.group(2) or m.group(4)):
            self.marks.append((m.group(3) if m.group(2) else m.group(4), bool(m.group(1))))
        return m.end() if m else j + 2


def words(text: str) -> tuple[list[str], str | None]:
    """shlex words of one simple command without redirections, and its stdout file if any."""
    lex = shlex.shlex(text, posix=True, punctuation_chars="<>&|")
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        tokens = list(lex)
    except ValueError:  # an unterminated quote: fall back to whitespace words
        tokens = text.split()
    out: list[str] = []
    stdout: str | None = None
    redirect: str | None = None
    for token in tokens:
        if redirect is not None:
            if redirect in (">", ">>", ">|", "&>", "&>>"):
                stdout = token
            redirect = None
            continue
        if token and set(token) <= set("<>&|"):
            if "<" in token or ">" in token:
                redirect = token
            continue
        out.append(token)
    return out, stdout


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
    """`for NAME in WORDS; do BODY; done` (`words` None: "$@") or `while COND; do BODY; done`."""

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
    """A script nested too deep or past the work budget: `where` is FILE:LINE."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where = where


def _tokens(segments: list[Segment]) -> list[Token]:
    """Each segment's leading keywords, a `case`/`for` head or case patterns, then its command."""
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
    """The segments folded into blocks (an unclosed one ends with the text; a stray `then`
    or `fi` is dropped); TooComplex past MAX_NESTING, as the parser recurses per block."""
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
    items: list[Item] = []
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, Segment):
            items.append(token)
            i += 1
        elif isinstance(token, _Head):
            if token.kind == PATTERN and PATTERN in stops:
                break
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
            break
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
    nest.depth -= 1  # on TooComplex the whole fold is dropped: nothing to restore
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
    """The value of a static test command; None when it cannot be known here."""
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
    """The state after branches that may each have run: a value they differ on is not static."""
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
        changed = {} if same else {"value": None, "file": file, "line": line}
        merged.vars[name] = dataclasses.replace(known[0], exported=exported, **changed)
    return merged


ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
_VAR_RE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
_RESERVED = {*KEYWORDS, "{", "}", "!", "time", "(", ")"}
_SHELLS = ("bash", "sh", "dash", "zsh")
_MAX_DEPTH = 8  # nested substitutions / bash -c strings / heredocs followed
_MAX_WORDS = 64  # a `for` over more static words runs its body once, as if not static
# Work is bounded, whatever the script: static `for` loops are unrolled while the words
# of the loops around them multiply to at most _MAX_UNROLL (past it, a body runs once); a
# scan does at most _MAX_STEPS units of work, then stops with TooComplex naming where.
_MAX_UNROLL = 256
MAX_STEPS = 1_000_000


@dataclass
class Var:
    value: str | None  # None: not static (e.g. $(mktemp))
    file: str
    line: int
    exported: bool


@dataclass
class ShellCommand:
    """One simple command as it would run: words, environment, where it is written."""

    argv: list[str]
    file: str
    line: int
    op: str | None = None
    prefix: dict[str, str] = field(default_factory=dict)
    env: dict[str, Var] = field(default_factory=dict)
    cwd: str | None = None
    heredocs: list[str] = field(default_factory=list)
    stdout: str | None = None  # the file a `>` redirection writes


@dataclass
class State:
    vars: dict[str, Var] = field(default_factory=dict)
    allexport: bool = False
    cwd: str | None = None

    def copy(self, exported_only: bool = False) -> State:
        items = {k: v for k, v in self.vars.items() if v.exported or not exported_only}
        return State(dict(items), self.allexport, self.cwd)


def expand(word: str, state: State) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        var = state.vars.get(name)
        value = var.value if var else None
        op, default = m.group(2), m.group(3)
        if op in (":-", "-", ":=", "="):
            if value is None or (op.startswith(":") and value == ""):
                return default if default is not None and "$" not in default else m.group(0)
            return value
        if op in (":+", "+"):
            return m.group(0)
        return value if value is not None else m.group(0)

    return _VAR_RE.sub(repl, word)


class Shell:
    def __init__(self, root: Path, notes: list[str], files_read: list[str]) -> None:
        self.root = root
        self.notes = notes
        self.files_read = files_read
        self.subs: dict[str, tuple[str, int]] = {}
        self.assignments: dict[str, list[Var]] = {}
        self.emitted: list[ShellCommand] = []  # every command, in order (what ran so far)
        self.steps = 0
        self.unrolled = 1  # the words of the static loops around, multiplied
        self.level = 0  # blocks, sourced scripts and subshells around
        self.where = "<shell>:0"
        self.scripts: dict[Path, list[Item]] = {}  # sourced scripts, parsed once
        self.found: dict[tuple[str, str | None, str], tuple[Path | None, str]] = {}
        self.split: dict[str, tuple[list[str], str | None]] = {}  # text -> its words
        self.parsed: dict[tuple[str, tuple[tuple[int, str], ...]], list[Item]] = {}

    def spend(self, units: int) -> None:
        """Count work; TooComplex once a scan has done MAX_STEPS units."""
        self.steps += units
        if self.steps > MAX_STEPS:
            raise TooComplex(
                self.where,
                f"the analysis stopped after {MAX_STEPS:,} steps: the installer's loops, "
                "branches, sourced scripts and variables multiply past what is analysed",
            )

    def words(self, text: str) -> tuple[list[str], str | None]:
        """`words(text)`, split once per text; the work counted by its length."""
        if text not in self.split:
            self.spend(len(text) + 1)
            self.split[text] = words(text)
        self.spend(1)
        raw, stdout = self.split[text]
        return list(raw), stdout

    def assign(self, state: State, name: str, var: Var) -> None:
        """Set a variable in `state` and remember every assignment (for the report)."""
        state.vars[name] = var
        self.assignments.setdefault(name, []).append(var)

    def unsub(self, word: str) -> str:
        return SUB_RE.sub(lambda m: f"$({self.subs.get(m.group(0), ('...', 0))[0]})", word)

    def run_text(
        self, lines: list[tuple[int, str]], file: str, state: State, depth: int = 0
    ) -> list[ShellCommand]:
        return self.run_items(self.parse(lines, file), file, state, depth)

    def parse(self, lines: list[tuple[int, str]], file: str) -> list[Item]:
        """The items of `lines`, parsed once however often they run."""
        key = (file, tuple(lines))
        if key not in self.parsed:
            self.spend(sum(len(text) for _, text in lines) // 16 + 1)  # ~ its cost to parse
            scanner = Scanner(lines, self.subs)
            segments = scanner.run()
            if scanner.unterminated:
                self.notes.append(f"{file}: unterminated quote or $( ... ); parsed best-effort")
            self.parsed[key] = structure(segments, file)
        self.spend(1)
        return self.parsed[key]

    def run_items(
        self, items: list[Item], file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        self.level += 1
        try:
            if self.level > MAX_NESTING:
                raise TooComplex(
                    self.where,
                    f"blocks, sourced scripts and subshells nested more than {MAX_NESTING} deep",
                )
            out: list[ShellCommand] = []
            for item in items:
                self.spend(1)
                if isinstance(item, IfBlock):
                    out.extend(self.run_if(item, file, state, depth))
                elif isinstance(item, CaseBlock):
                    out.extend(self.run_case(item, file, state, depth))
                elif isinstance(item, Loop):
                    out.extend(self.run_loop(item, file, state, depth))
                else:
                    self.where = f"{file}:{item.line}"
                    out.extend(self.run_segment(item, file, state, depth))
            return out
        finally:
            self.level -= 1

    def run_possible(
        self, possible: list[list[Item]], file: str, state: State, depth: int, line: int
    ) -> list[ShellCommand]:
        """Bodies of which any one may run: each on a copy of the state, merged after."""
        if len(possible) == 1:
            return self.run_items(possible[0], file, state, depth)
        out: list[ShellCommand] = []
        self.spend(2 * len(possible) * (len(state.vars) + 1))  # the copies, then the merge
        states = [state.copy() for _ in possible]
        for body, copy in zip(possible, states):
            out.extend(self.run_items(body, file, copy, depth))
        merged = merge(states, file, line)
        state.vars, state.allexport, state.cwd = merged.vars, merged.allexport, merged.cwd
        return out

    def static_words(
        self, text: str, seg: Segment, file: str, state: State, depth: int
    ) -> tuple[list[ShellCommand], list[str] | None]:
        """The words of `text` expanded (substitutions run first); None when not static."""
        raw, _ = self.words(text)
        out = self.substitutions(raw, seg, file, state, depth)
        values = [expand(w, state) for w in raw]
        if any("$" in v or SUB_RE.search(v) for v in values):
            return out, None
        return out, values

    def run_case(self, block: CaseBlock, file: str, state: State, depth: int) -> list[ShellCommand]:
        """The first clause matching a static word; else any clause (or none) may run."""
        seg = block.word
        out, found = self.static_words(seg.text, seg, file, state, depth)
        word = found[0] if found and len(found) == 1 else None
        possible: list[list[Item]] = []
        for patterns, body in block.clauses:
            values = [expand(p.strip("\"'"), state) for p in patterns]
            known = word is not None and not any("$" in v or SUB_RE.search(v) for v in values)
            if not known:
                possible.append(body)  # may match
            elif any(fnmatch.fnmatchcase(word or "", v) for v in values):
                possible.append(body)  # matches: no later clause runs
                return out + self.run_possible(possible, file, state, depth, seg.line)
        if not any(p == "*" for patterns, _ in block.clauses for p in patterns):
            possible.append([])  # no clause may match
        return out + self.run_possible(possible, file, state, depth, seg.line)

    def run_loop(self, loop: Loop, file: str, state: State, depth: int) -> list[ShellCommand]:
        """A `for` over static words: the body once per word; else the body may run or not."""
        out = self.run_items(loop.cond, file, state, depth)
        line = (
            loop.head.line
            if loop.head
            else next((s.line for s in loop.cond if isinstance(s, Segment)), 0)
        )
        values: list[str] | None = None
        if loop.kind == "for" and loop.head is not None and loop.words is not None:
            found, values = self.static_words(loop.words, loop.head, file, state, depth)
            out.extend(found)
        if (
            loop.name
            and values is not None
            and len(values) <= _MAX_WORDS
            and self.unrolled * max(len(values), 1) <= _MAX_UNROLL
        ):
            self.unrolled *= max(len(values), 1)
            try:
                for value in values:
                    self.keep_export(state, loop.name, value, file, line)
                    out.extend(self.run_items(loop.body, file, state, depth))
            finally:
                self.unrolled //= max(len(values), 1)
            return out
        if loop.name:
            self.assign(state, loop.name, Var(None, file, line, False))
        return out + self.run_possible([loop.body, []], file, state, depth, line)

    def run_if(self, block: IfBlock, file: str, state: State, depth: int) -> list[ShellCommand]:
        """The branch a static condition selects; else every possible branch."""
        out: list[ShellCommand] = []
        possible: list[list[Item]] = []
        for cond, body in block.branches:
            out.extend(self.run_items(cond, file, state, depth))
            verdict = condition(cond, lambda word: expand(word, state))
            if verdict is True and not possible:
                return out + self.run_items(body, file, state, depth)
            if verdict is not False:
                possible.append(body)
            if verdict is True:
                break
        else:
            possible.append(block.otherwise or [])
        lines = (s.line for cond, _ in block.branches for s in cond if isinstance(s, Segment))
        return out + self.run_possible(possible, file, state, depth, next(lines, 0))

    def run_segment(self, seg: Segment, file: str, state: State, depth: int) -> list[ShellCommand]:
        self.spend(8)  # a command: its words, expansions and wrappers
        raw, stdout = self.words(seg.text)
        out = self.substitutions(raw, seg, file, state, depth)
        while raw and raw[0] in _RESERVED:
            raw.pop(0)
        if raw and raw[0] in ("for", "case", "function", "select"):
            return out
        prefix, static = self.prefix_assignments(raw, state)
        if not raw:  # a line of assignments only: they set shell variables
            for name, value in prefix.items():
                self.keep_export(state, name, value if static[name] else None, file, seg.line)
            return out
        argv = [self.unsub(expand(w, state)) for w in raw]
        _unwrap(argv, prefix)
        if not argv:
            return out
        handled = self.builtin(argv, file, seg.line, state, depth)
        if handled is None:
            handled = self.shell_invocation(argv, file, seg.line, state, depth)
        if handled is None:  # the command itself, recorded with its environment
            self.spend(len(state.vars) + 64)  # and its analysis afterwards (installs, fetches)
            env = {k: v for k, v in state.vars.items() if v.exported}
            for key, value in prefix.items():
                env[key] = Var(value, file, seg.line, True)
                self.assignments.setdefault(key, []).append(env[key])
            heredocs = ["\n".join(t for _, t in body) for body in seg.heredocs]
            cmd = ShellCommand(
                argv, file, seg.line, seg.op, prefix, env, state.cwd, heredocs, stdout
            )
            self.emitted.append(cmd)
            handled = [cmd]
            if _name(argv[0]) in _SHELLS and depth < _MAX_DEPTH:  # a shell reading heredocs
                for body in seg.heredocs:
                    self.spend(len(state.vars))
                    handled += self.run_text(body, file, state.copy(True), depth + 1)
        out.extend(handled)
        return out

    def substitutions(
        self, raw: list[str], seg: Segment, file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        """Command substitutions run first (in a subshell)."""
        out: list[ShellCommand] = []
        for word in raw:
            for key in SUB_RE.findall(word):
                inner, line = self.subs.get(f"__VPR_SUB{key}__", ("", seg.line))
                if depth < _MAX_DEPTH and inner.strip():
                    sub_lines = list(enumerate(inner.split("\n"), start=line))
                    self.spend(len(state.vars))
                    out.extend(self.run_text(sub_lines, file, state.copy(), depth + 1))
        return out

    def prefix_assignments(
        self, raw: list[str], state: State
    ) -> tuple[dict[str, str], dict[str, bool]]:
        """`A=1 B=2 cmd`: take the assignments off `raw`; their values and which are static."""
        prefix: dict[str, str] = {}
        static: dict[str, bool] = {}
        while raw and (m := ASSIGN_RE.match(raw[0])) and not raw[0].startswith("="):
            value = expand(m.group(2), state)
            prefix[m.group(1)] = self.unsub(value)
            static[m.group(1)] = not SUB_RE.search(value) and "$" not in value
            raw.pop(0)
        return prefix, static

    def keep_export(self, state: State, name: str, value: str | None, file: str, line: int) -> None:
        """Assign `name`, exported when it already was or under `set -a`."""
        old = state.vars.get(name)
        exported = state.allexport or bool(old and old.exported)
        self.assign(state, name, Var(value, file, line, exported))

    def builtin(
        self, argv: list[str], file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand] | None:
        """Builtins that change the shell's state; None when `argv` is not one."""
        head = argv[0]
        if head in ("export", "declare", "typeset", "readonly", "local"):
            self.declare(argv, file, line, state)
        elif head == "unset":
            for arg in argv[1:]:
                state.vars.pop(arg, None)
        elif head == "set":
            _set_options(argv, state)
        elif head == "cd" and len(argv) > 1:
            target = argv[1]
            if state.cwd and not target.startswith(("/", "$", "~")):
                target = str(PurePosixPath(state.cwd) / target)
            state.cwd = target
        elif head in ("source", ".") and len(argv) > 1:
            return self.follow(argv[1], file, line, state, depth)
        else:
            return None
        return []

    def declare(self, argv: list[str], file: str, line: int, state: State) -> None:
        head = argv[0]
        exporting = head == "export" or any(a.startswith("-") and "x" in a for a in argv[1:])
        for arg in argv[1:]:
            if arg.startswith("-"):
                continue
            if m := ASSIGN_RE.match(arg):
                static = "$" not in m.group(2) and "__VPR_SUB" not in m.group(2)
                value = m.group(2) if static else None
                self.assign(state, m.group(1), Var(value, file, line, exporting))
            elif arg in state.vars and exporting:
                state.vars[arg].exported = True

    def shell_invocation(
        self, argv: list[str], file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand] | None:
        """`bash -c STRING` and `bash SCRIPT`: what they run; None for anything else."""
        if _name(argv[0]) not in _SHELLS or len(argv) < 2:
            return None
        self.spend(len(state.vars))
        if "-c" in argv[1:]:
            idx = argv.index("-c")
            if idx + 1 < len(argv) and depth < _MAX_DEPTH:
                return self.run_text([(line, argv[idx + 1])], file, state.copy(True), depth + 1)
            return []
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        if script:
            return self.follow(script, file, line, state.copy(True), depth)
        return None

    def follow(
        self, target: str, file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand]:
        if "$" in target or depth >= 5:
            self.notes.append(f"{file}:{line}: not followed: {target} (not a static path)")
            return []
        self.spend(16)  # a lookup on disk, the first time
        key = (target, state.cwd, file)
        if key not in self.found:
            path = resolve(self.root, target, state.cwd, file)
            self.found[key] = (path, display(self.root, path) if path else "")
        path, rel = self.found[key]
        if path is None:
            self.notes.append(f"{file}:{line}: {target} is not in the plugin tree; not read")
            return []
        if path not in self.scripts:
            try:
                text, cut = read_text(self.root, path)
            except Unread as exc:
                self.notes.append(f"{file}:{line}: {target} is {exc.reason}")
                return []
            if cut:
                self.notes.append(too_large(rel))
            self.scripts[path] = self.parse(numbered(text), rel)
        if rel not in self.files_read:
            self.files_read.append(rel)
        return self.run_items(self.scripts[path], rel, state, depth + 1)


def _name(word: str) -> str:
    """`PurePosixPath(word).name`, without building a path (this runs for every command)."""
    parts = [part for part in word.split("/") if part not in ("", ".")]
    return parts[-1] if parts else ""


# Wrappers that run the rest of the line as a command -> their options that take a value.
_SUDO_VALUES = ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U")
_WRAPPERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("sudo", "doas"), _SUDO_VALUES),
    "env": ("-u", "--unset", "-C", "--chdir", "-S"),
    **dict.fromkeys(("exec", "command", "nohup", "time", "builtin", "nice"), ()),
}


def _unwrap(argv: list[str], prefix: dict[str, str]) -> None:
    """Drop wrappers (sudo, env, exec, ...); `env NAME=VALUE` adds to `prefix`."""
    while argv and (head := _name(argv[0])) in _WRAPPERS:
        argv.pop(0)
        env = head == "env"
        while argv and (argv[0].startswith("-") or (env and ASSIGN_RE.match(argv[0]))):
            word = argv.pop(0)
            if word in _WRAPPERS[head] and argv:
                argv.pop(0)
            elif env and (m := ASSIGN_RE.match(word)):
                prefix[m.group(1)] = m.group(2)


def _set_options(argv: list[str], state: State) -> None:
    """`set -a` / `set +a` / `set -o allexport`."""
    for arg in argv[1:]:
        if arg.startswith("-") and "a" in arg:
            state.allexport = True
        elif arg.startswith("+") and "a" in arg:
            state.allexport = False
    if "allexport" in argv:
        state.allexport = argv[argv.index("allexport") - 1] == "-o"


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def display(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def resolve(root: Path, target: str, cwd: str | None, file: str) -> Path | None:
    """A file named by an installer, against its cwd, the plugin root, the installer's folder;
    None outside the plugin tree (links resolved), as for a file that is not there."""
    if target.startswith("~") or "://" in target:
        return None
    candidates: list[Path] = []
    p = Path(target)
    if p.is_absolute():
        candidates.append(p)
    else:
        if cwd and not cwd.startswith(("$", "~")):
            base = Path(cwd) if Path(cwd).is_absolute() else root / cwd
            candidates.append(base / p)
        candidates.append(root / p)
        candidates.append((root / file).parent / p)
    for candidate in candidates:
        inside = exists_within(root, candidate)
        if inside is not None:
            return inside
    return None
