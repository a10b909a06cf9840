"""Shell line structure: split shell text into simple commands, then into words.

Command substitutions are cut out of the text and replaced by `__VPR_SUB<n>__`
placeholders (their text kept in `subs`) so the interpreter can run them first.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

SUB_RE = re.compile(r"__VPR_SUB(\d+)__")
_WORD_BREAK = " \t;&|()"
_CASE_HEAD_RE = re.compile(r"^case\s.*\sin$", re.S)
_FD_RE = re.compile(r"(\d+)[<>]")  # a file descriptor before a redirection (2>&1)
_HEREDOC_WORD_RE = re.compile(r"""(['"])(.*?)\1|([^\s;&|<>()]+)""")


@dataclass
class Segment:
    """One simple command's text (command substitutions replaced by placeholders)."""

    text: str
    line: int
    op: str | None  # the operator before it: ";", ";;" (ends a case clause), "&&", "||",
    # "|", "&" or None
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

    # -- buffers ---------------------------------------------------------------
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

    def close_sub(self) -> None:
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

    # -- lines -----------------------------------------------------------------
    def run(self) -> list[Segment]:
        index = 0
        while index < len(self.lines):
            self.lineno, line = self.lines[index]
            index += 1
            continued = self.scan_line(line)
            if continued:
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
                top = self.stack.pop()
                if top in ("$(", "`") and not self.capturing():
                    self.close_sub()
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
                j = self.single_quoted(c, j)
            elif c == "\\":
                if j == n - 1:
                    return True
                self.put(c + line[j + 1])
                j += 2
            elif top == '"':
                j = self.double_quoted(line, j)
            elif top == "`":
                j = self.backticked(c, j)
            else:
                j = self.unquoted(line, j)
        return False

    # -- one character in each context; each returns the next index ------------
    def single_quoted(self, c: str, j: int) -> int:
        self.put(c)
        if c == "'":
            self.stack.pop()
        return j + 1

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

    def backticked(self, c: str, j: int) -> int:
        if c == "`":
            self.stack.pop()
            if self.capturing():
                self.sub_buf.append(c)
            else:
                self.close_sub()
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
            if self.capturing():
                self.put(c)
            else:
                self.emit(";")
        elif top == "$(":
            self.stack.pop()
            if self.capturing():
                self.sub_buf.append(c)
            else:
                self.close_sub()
        elif top == "(":
            self.stack.pop()
            if self.capturing():
                self.put(c)
            else:
                self.emit(";")
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
        n = len(line)
        k = j + 2
        strip_tabs = line.startswith("-", k)
        k += 1 if strip_tabs else 0
        while k < n and line[k] in " \t":
            k += 1
        m = _HEREDOC_WORD_RE.match(line[k:])
        if m:
            self.marks.append((m.group(2) if m.group(1) else m.group(3), strip_tabs))
            return k + m.end()
        return k


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
