"""Vendor symbols and the allowlist, the matcher that finds them in file bytes, what each hit
is in the code that holds it (import, code, string, comment, docs), and the scans of a core
tree or a built wheel (the scanner of `isolation`)."""

from __future__ import annotations

import bisect
import fnmatch
import io
import itertools
import os
import re
import stat
import time
import tokenize
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.proc import forked_map

# The Tenstorrent symbol set (the TT buildspec lists these, or more).
TT_SYMBOLS: tuple[str, ...] = (
    "ttnn",
    "tt_metal",
    "tt-metal",
    "tenstorrent",
    "TTPlatform",
    "MESH_DEVICE",
    "TT_VISIBLE_DEVICES",
    "vllm_tt_plugin",
)

# The kinds of hit and their severity.
Kind = Literal["import", "code", "string", "comment", "docs"]
KINDS: tuple[Kind, ...] = ("import", "code", "string", "comment", "docs")
SEVERITY: dict[str, str] = {
    "import": "fail",
    "code": "fail",
    "string": "warn",
    "comment": "info",
    "docs": "info",
}

SYMBOL_RE = re.compile(r"^[A-Za-z0-9_./-]*[A-Za-z0-9][A-Za-z0-9_./-]*$")
_ENV_STYLE_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_JOINERS: tuple[str, ...] = ("", "_", "-", ".", "/")
MAX_WORDS = 5  # 5 joiners ** (words - 1) spellings per symbol; 625 at most


# ---------------------------------------------------------------------------
# Symbols and the allowlist


def split_words(identifier: str) -> tuple[str, ...]:
    """Lower-cased words of an identifier: split at non-alphanumerics and CamelCase humps."""
    words: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", identifier):
        if not part:
            continue
        start = 0
        for i in range(1, len(part)):
            if _hump(part, i):
                words.append(part[start:i])
                start = i
        words.append(part[start:])
    return tuple(w.lower() for w in words)


def _hump(s: str, i: int) -> bool:
    a, b = s[i - 1], s[i]
    if b.isupper() and (a.islower() or a.isdigit()):
        return True
    return a.isupper() and b.isupper() and i + 1 < len(s) and s[i + 1].islower()


class Symbol(NamedTuple):
    """A vendor symbol as written in the spec, with its matching rule."""

    name: str
    words: tuple[str, ...]
    exact: bool  # environment-variable style: whole token only

    @classmethod
    def parse(cls, name: str) -> Symbol:
        if not isinstance(name, str) or not SYMBOL_RE.match(name):
            raise ValueError(
                f"{name!r} is not a symbol: use letters, digits and `_ . - /` "
                "(e.g. ttnn, tt_metal, TTPlatform)"
            )
        words = split_words(name)
        if len(words) > MAX_WORDS:
            raise ValueError(f"{name!r} has {len(words)} words; at most {MAX_WORDS}")
        return cls(name=name, words=words, exact=bool(_ENV_STYLE_RE.match(name)))

    @property
    def key(self) -> tuple[tuple[str, ...], bool]:
        return self.words, self.exact

    def spellings(self) -> list[str]:
        """Lower-case spellings the matcher searches for."""
        if self.exact:
            return [self.name.lower()]
        out = []
        for seps in itertools.product(_JOINERS, repeat=len(self.words) - 1):
            text = self.words[0]
            for sep, word in zip(seps, self.words[1:]):
                text += sep + word
            out.append(text)
        return out


class AllowEntry(NamedTuple):
    path: str
    symbol: str
    reason: str

    def matches(self, hit_path: str, symbol: Symbol) -> bool:
        if self.symbol != "*" and split_words(self.symbol) != symbol.words:
            return False
        return hit_path == self.path or fnmatch.fnmatchcase(hit_path, self.path)

    def to_json(self) -> dict[str, str]:
        return self._asdict()


def parse_symbols(names: Iterable[str]) -> list[Symbol]:
    """Symbols, deduplicated by their words (`tt_metal` and `tt-metal` are one)."""
    seen: dict[tuple[tuple[str, ...], bool], Symbol] = {}
    for name in names:
        symbol = Symbol.parse(name)
        seen.setdefault(symbol.key, symbol)
    return list(seen.values())


# ---------------------------------------------------------------------------
# The matcher: one multi-pattern pass, then boundary checks on the raw bytes.
# A symbol is cut into words at `_ - . /` and CamelCase humps; it matches text that spells
# its words in order, case-insensitively, joined by nothing or one separator, where the span
# starts and ends on a word boundary (`ttnn` matches `TTNNOps`, not the `ttnN` inside
# `AttnNvfp4QuantPattern`). A symbol spelled like an environment variable matches the whole
# token only.


# byte classes, ASCII only (non-ASCII bytes count as separators)
_UPPER = frozenset(range(65, 91))
_LOWER = frozenset(range(97, 123))
_DIGIT = frozenset(range(48, 58))
_ALNUM = _UPPER | _LOWER | _DIGIT
_IDENT = _ALNUM | {95}  # and `_`: the characters of an environment variable name


def _boundary(data: bytes, i: int) -> bool:
    """Is byte offset i a word boundary (edge, separator or CamelCase hump)?"""
    if i <= 0 or i >= len(data):
        return True
    a, b = data[i - 1], data[i]
    if a not in _ALNUM or b not in _ALNUM:
        return True
    if b in _UPPER and (a in _LOWER or a in _DIGIT):
        return True
    return a in _UPPER and b in _UPPER and i + 1 < len(data) and data[i + 1] in _LOWER


class Matcher:
    """Compiled symbol set: finds verified symbol spans in file bytes."""

    def __init__(self, symbols: Sequence[Symbol]) -> None:
        if not symbols:
            raise BadInput("no vendor symbols to search for", hint="pass --symbols A,B or --spec")
        self.symbols = list(symbols)
        self._owner: list[int] = []
        patterns: list[bytes] = []
        for index, symbol in enumerate(self.symbols):
            for spelling in symbol.spellings():
                patterns.append(spelling.encode("ascii"))
                self._owner.append(index)
        import ahocorasick_rs  # the Rust aho-corasick crate, imported by the scans only

        self._ac = ahocorasick_rs.BytesAhoCorasick(patterns)

    def candidates(self, lowered: bytes) -> list[tuple[int, int, int]]:
        """(symbol index, start, end) of every spelling in lower-cased bytes (unverified)."""
        return [
            (self._owner[p], s, e)
            for p, s, e in self._ac.find_matches_as_indexes(lowered, overlapping=True)
        ]

    def verify(
        self, data: bytes, found: Iterable[tuple[int, int, int]]
    ) -> list[tuple[int, int, int]]:
        out = []
        for index, start, end in found:
            if not (_boundary(data, start) and _boundary(data, end)):
                continue
            if self.symbols[index].exact and (
                (start > 0 and data[start - 1] in _IDENT)
                or (end < len(data) and data[end] in _IDENT)
            ):
                continue
            out.append((index, start, end))
        # a span inside a longer hit (`ascend` in `vllm_ascend`) is that hit, not another
        out.sort(key=lambda t: (t[1], -t[2], t[0]))
        kept = []
        reach = -1
        for span in out:
            if span[2] > reach:
                kept.append(span)
                reach = span[2]
        return kept


# ---------------------------------------------------------------------------
# A hit's kind, from the file's type and, for Python, its tokens (other languages: a lexer's
# comment and string regions). Only the few files with a hit are decoded and lexed.

FAIL_KINDS: tuple[str, ...] = tuple(k for k in KINDS if SEVERITY[k] == "fail")
WARN_KINDS: tuple[str, ...] = tuple(k for k in KINDS if SEVERITY[k] == "warn")


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    column: int
    symbol: str
    kind: Kind
    text: str
    context: str = ""
    allowed: bool = False
    reason: str | None = None

    @property
    def severity(self) -> str:
        return "info" if self.allowed else SEVERITY[self.kind]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "symbol": self.symbol,
            "kind": self.kind,
            "severity": self.severity,
            "text": self.text,
            "context": self.context,
            "allowed": self.allowed,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


FileType = Literal["python", "clike", "shell", "cmake", "requirements", "metadata", "docs"]

_PY_EXT = {".py", ".pyi", ".pyw", ".pyx", ".pxd"}
_CLIKE_EXT = {
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".h++", ".cu", ".cuh",
    ".inl", ".inc", ".ipp", ".tpp", ".m", ".mm", ".rs", ".go", ".java", ".js", ".mjs", ".cjs",
    ".ts", ".tsx", ".jsx", ".proto", ".cl", ".metal", ".hip", ".swift", ".kt", ".scala",
}  # fmt: skip
_SHELL_EXT = {".sh", ".bash", ".zsh", ".ksh", ".env"}


# Top-level folders of a source tree that hold documentation, CI or container builds.
DOCS_DIRS = frozenset({"docs", "doc", ".buildkite", ".github", ".gitlab", ".circleci", "docker"})


def file_type(path: str, head: bytes = b"") -> FileType:
    """How a file is classified, from its name (and shebang line when it has no suffix)."""
    if path.split("/", 1)[0] in DOCS_DIRS and "/" in path:
        return "docs"
    name = path.rsplit("/", 1)[-1]
    lower = name.lower()
    suffix = os.path.splitext(lower)[1]
    parent = path.rsplit("/", 2)[-2].lower() if "/" in path else ""
    if suffix in _PY_EXT:
        return "python"
    if suffix in _CLIKE_EXT:
        return "clike"
    if suffix in _SHELL_EXT:
        return "shell"
    if lower == "cmakelists.txt" or suffix == ".cmake":
        return "cmake"
    if (lower.startswith("requirements") and suffix in {".txt", ".in"}) or (
        parent == "requirements" and suffix in {".txt", ".in"}
    ):
        return "requirements"
    if parent.endswith(".dist-info") and lower in {"metadata", "entry_points.txt"}:
        return "metadata"
    if not suffix and head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0]
        if b"python" in first:
            return "python"
        if re.search(rb"\b(ba|z|k|da)?sh\b", first):
            return "shell"
    return "docs"


# Region lexers: (comment | string) spans by regular expression, leftmost first.
_CLIKE_LEX = re.compile(
    r"""(?P<comment>//[^\n]*|/\*[\s\S]*?(?:\*/|\Z))
      |(?P<string>(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"(?P<d>[^()\\\s"]{0,16})\([\s\S]*?\)(?P=d)"
                 |(?<![A-Za-z0-9_])b?r(?P<h>\#*)"[\s\S]*?"(?P=h)
                 |"(?:\\[\s\S]|[^"\\\n])*"
                 |'(?:\\[^\n]{1,9}?|[^'\\\n])'
                 |`[^`]*`)""",
    re.VERBOSE,
)
_SHELL_LEX = re.compile(
    r"""(?P<comment>(?<![^\s;&|(])\#[^\n]*)
      |(?P<string>"(?:\\[\s\S]|[^"\\])*"|'[^']*')""",
    re.VERBOSE,
)
_CMAKE_LEX = re.compile(
    r"""(?P<comment>\#\[(?P<e1>=*)\[[\s\S]*?\](?P=e1)\]|\#[^\n]*)
      |(?P<string>"(?:\\[\s\S]|[^"\\])*"|\[(?P<e2>=*)\[[\s\S]*?\](?P=e2)\])""",
    re.VERBOSE,
)
_PY_LEX = re.compile(
    r"""(?P<comment>\#[^\n]*)
      |(?P<string>(?<![A-Za-z0-9_])[rRbBuUfF]{0,2}
                  (?:'''[\s\S]*?(?:'''|\Z)|\"\"\"[\s\S]*?(?:\"\"\"|\Z)
                    |'(?:\\[\s\S]|[^'\\\n])*'|"(?:\\[\s\S]|[^"\\\n])*"))""",
    re.VERBOSE,
)
_LEXERS: dict[str, re.Pattern[str]] = {
    "clike": _CLIKE_LEX,
    "shell": _SHELL_LEX,
    "cmake": _CMAKE_LEX,
    "python": _PY_LEX,
}
_IMPORT_LINE: dict[str, re.Pattern[str]] = {
    "clike": re.compile(
        r"^\s*(?:\#\s*(?:include|import)\b|(?:pub(?:\([^)]*\))?\s+)?use\s|extern\s+crate\s"
        r"|import\s|from\s+\S+\s+import\s|(?:const|let|var)\s+.*=\s*require\s*\()"
    ),
    "shell": re.compile(r"^\s*(?:source|\.)\s+\S"),
    "python": re.compile(r"^\s*(?:import\s|from\s+\S+\s+import\b)"),
}
_CMAKE_IMPORT_COMMANDS = {
    "find_package", "find_library", "find_path", "include", "add_subdirectory",
    "fetchcontent_declare", "fetchcontent_makeavailable", "externalproject_add",
    "target_link_libraries", "link_libraries", "target_include_directories",
}  # fmt: skip
# Functions whose first string argument names a module to load: an import.
_DYNAMIC_IMPORTS = {
    "import_module", "__import__", "find_spec", "resolve_obj_by_qualname", "import_string",
    "import_from_path", "load_module", "require",
}  # fmt: skip


class _Lines:
    """Byte offset -> (line, column, char offset) for one decoded file."""

    def __init__(self, data: bytes, text: str) -> None:
        self.data = data
        self.ascii = len(data) == len(text)
        self.starts = [0]
        find = data.find
        i = find(b"\n")
        while i >= 0:
            self.starts.append(i + 1)
            i = find(b"\n", i + 1)
        self._mark = (0, 0)  # (byte offset, char offset), advanced as offsets grow
        # per line, once: many hits on one long line cost one pass over it, not one each
        self._row_chars: dict[int, int] = {}
        self._texts: dict[int, str] = {}

    def _chars(self, offset: int) -> int:
        if self.ascii:
            return offset
        byte, char = self._mark if offset >= self._mark[0] else (0, 0)
        # offsets always sit on an ASCII byte, never inside a UTF-8 sequence
        char += len(self.data[byte:offset].decode("utf-8"))
        self._mark = (offset, char)
        return char

    def locate(self, offset: int) -> tuple[int, int, int]:
        """(1-based line, 0-based char column, char offset) of a byte offset."""
        row = bisect.bisect_right(self.starts, offset) - 1
        start = self.starts[row]
        if self.ascii:
            return row + 1, offset - start, offset
        if row not in self._row_chars:
            self._row_chars[row] = self._chars(start)
        char = self._chars(offset)
        return row + 1, char - self._row_chars[row], char

    def line_text(self, row: int) -> str:
        if row not in self._texts:
            start = self.starts[row - 1]
            end = self.starts[row] - 1 if row < len(self.starts) else len(self.data)
            self._texts[row] = self.data[start:end].decode("utf-8", "replace").strip()
        return self._texts[row]


def _regions(lexer: re.Pattern[str], text: str) -> tuple[list[int], list[tuple[int, str]]]:
    starts: list[int] = []
    spans: list[tuple[int, str]] = []
    for m in lexer.finditer(text):
        if m.end() > m.start():
            starts.append(m.start())
            spans.append((m.end(), "comment" if m.group("comment") is not None else "string"))
    return starts, spans


def _kind_at(spans: tuple[list[Any], list[tuple[Any, Any]]], at: Any) -> Any:
    """The kind of the span (lexer region or Python token) that holds position `at`."""
    starts, ends = spans
    i = bisect.bisect_right(starts, at) - 1
    if i >= 0 and at < ends[i][0]:
        return ends[i][1]
    return "code"


def _cmake_command(text: str, offset: int) -> str:
    """Name of the CMake command whose arguments hold `offset` (approximate)."""
    depth = 0
    lo = max(0, offset - 20000)
    for i in range(offset - 1, lo - 1, -1):
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", text[max(0, i - 80) : i])
                return m.group(1).lower() if m else ""
            depth -= 1
    return ""


_DYNAMIC_IMPORT_CALL = re.compile(
    r"\b(?:" + "|".join(sorted(_DYNAMIC_IMPORTS)) + r")\s*\(\s*[rRbBuU]?['\"`][^'\"`\n]*$"
)


def _lexical_kind(ftype: str, text: str, regions: Any, offset: int, line: str) -> Kind:
    region = _kind_at(regions, offset)
    if region == "comment":
        return "comment"
    if ftype == "cmake":
        if _cmake_command(text, offset) in _CMAKE_IMPORT_COMMANDS:
            return "import"
    elif ftype in _IMPORT_LINE and _IMPORT_LINE[ftype].match(line):
        return "import"
    if region == "string":
        if ftype != "cmake" and _DYNAMIC_IMPORT_CALL.search(text, max(0, offset - 200), offset):
            return "import"
        return "string"
    return "code"


_STRING_TOKEN_NAMES = (
    "STRING", "FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END",
    "TSTRING_START", "TSTRING_MIDDLE", "TSTRING_END",
)  # fmt: skip
_STRINGISH = {getattr(tokenize, n) for n in _STRING_TOKEN_NAMES if hasattr(tokenize, n)}
_SKIP_TOKENS = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}


def _python_tokens(text: str) -> tuple[list[tuple[int, int]], list[tuple[tuple[int, int], Kind]]]:
    """Token start positions and (end position, kind) for every token of a Python file."""
    starts: list[tuple[int, int]] = []
    info: list[tuple[tuple[int, int], Kind]] = []
    logical: list[int] = []  # indexes into starts/info of the current logical line's tokens
    toks: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            _close_line(toks, info, logical)
            continue
        kind: Kind
        if tok.type == tokenize.COMMENT:
            kind = "comment"
        elif tok.type in _STRINGISH:
            kind = "string"
        else:
            kind = "code"
        starts.append(tok.start)
        info.append((tok.end, kind))
        toks.append(tok)
        if tok.type not in _SKIP_TOKENS:
            logical.append(len(toks) - 1)
    _close_line(toks, info, logical)
    return starts, info


def _close_line(
    toks: list[tokenize.TokenInfo], info: list[tuple[tuple[int, int], Kind]], logical: list[int]
) -> None:
    """Re-mark the tokens of one logical line (docstring, import), then empty `logical`."""
    if not logical:
        return
    if all(toks[i].type in _STRINGISH for i in logical):  # a bare string statement: a docstring
        for i in logical:
            info[i] = (info[i][0], "comment")
        logical.clear()
        return
    for seg in _simple_statements(toks, logical):
        if any(toks[i].type == tokenize.NAME and toks[i].string == "import" for i in seg):
            for i in seg:
                if toks[i].type == tokenize.NAME:
                    info[i] = (info[i][0], "import")
    # dynamic imports: a string right after `import_module(` and friends
    for a, b, c in zip(logical, logical[1:], logical[2:]):
        if (
            toks[a].type == tokenize.NAME
            and toks[a].string in _DYNAMIC_IMPORTS
            and toks[b].string == "("
            and toks[c].type in _STRINGISH
        ):
            info[c] = (info[c][0], "import")
    logical.clear()


def _simple_statements(toks: list[tokenize.TokenInfo], logical: list[int]) -> list[list[int]]:
    """A logical line's token indexes split at `;` and `:` outside brackets."""
    depth = 0
    segment: list[int] = []
    segments: list[list[int]] = [segment]
    for i in logical:
        tok = toks[i]
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            elif depth == 0 and tok.string in (";", ":"):
                segment = []
                segments.append(segment)
                continue
        segment.append(i)
    return segments


def _metadata_kind(path: str, line: str) -> Kind:
    if path.lower().endswith("entry_points.txt"):
        return "comment" if line.startswith(("#", ";")) else "import"
    return "import" if line.lower().startswith(("requires-dist:", "provides-extra:")) else "docs"


def classify(
    path: str, data: bytes, text: str, spans: Sequence[tuple[int, int, int]], symbols: list[Symbol]
) -> list[Hit]:
    """Hits for verified (symbol index, start, end) byte spans of one decoded file."""
    ftype = file_type(path, data[:256])
    lines = _Lines(data, text)
    tokens: Any = None
    regions: Any = None
    if ftype == "python":
        try:
            tokens = _python_tokens(text)
        except (tokenize.TokenError, SyntaxError, ValueError):
            tokens = None  # not valid Python 3: lexical rules instead
        if tokens is None:
            regions = _regions(_PY_LEX, text)
    elif ftype in _LEXERS:
        regions = _regions(_LEXERS[ftype], text)
    hits = []
    for index, start, end in spans:
        row, col, char_offset = lines.locate(start)
        line = lines.line_text(row)
        kind: Kind
        if ftype == "docs":
            kind = "docs"
        elif ftype == "requirements":
            kind = "comment" if line.startswith("#") else "import"
        elif ftype == "metadata":
            kind = _metadata_kind(path, line)
        elif tokens is not None:
            kind = _kind_at(tokens, (row, col))
        else:
            kind = _lexical_kind(ftype, text, regions, char_offset, line)
        hits.append(
            Hit(
                path=path,
                line=row,
                column=col + 1,
                symbol=symbols[index].name,
                kind=kind,
                text=data[start:end].decode("utf-8", "replace"),
                context=line if len(line) <= 200 else line[:197] + "...",
            )
        )
    return hits


# A wheel's RECORD lists `path,sha256=<urlsafe base64>,size`: the paths are scanned, the
# hashes are not code (random base64 matches a short symbol on a CamelCase boundary).
_RECORD_FILE = re.compile(r"(?:^|/)[^/]+\.dist-info/RECORD$")
_RECORD_HASH = re.compile(rb"(?<=,)(sha\d{3}=)([A-Za-z0-9_=-]+)(?=,)")


def without_record_hashes(path: str, data: bytes) -> bytes:
    """`data` with the hash values of a `*.dist-info/RECORD` blanked (same length, so
    lines and columns stay); any other file unchanged."""
    if not path.endswith("/RECORD") or not _RECORD_FILE.search(path):  # the cheap test first
        return data
    return _RECORD_HASH.sub(lambda m: m.group(1) + b"=" * len(m.group(2)), data)


# ---------------------------------------------------------------------------
# Reports


class Skipped(NamedTuple):
    path: str
    reason: str  # binary | undecodable | symlink | unreadable | special
    symbols: tuple[str, ...] = ()  # symbols whose spelling occurs in the raw bytes (unverified)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "reason": self.reason}
        if self.symbols:
            out["symbols"] = list(self.symbols)
        return out


@dataclass(eq=False)
class ScanReport:
    root: str
    source: Literal["tree", "wheel"]
    symbols: tuple[str, ...]
    hits: list[Hit] = field(default_factory=list)
    files_scanned: int = 0
    bytes_scanned: int = 0
    files_with_hits: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    unused_allowlist: list[AllowEntry] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def counts(self) -> dict[str, int]:
        """Hits by kind, allowlisted hits left out (they are counted under `allowed`)."""
        counts = dict.fromkeys(KINDS, 0)
        for hit in self.hits:
            if not hit.allowed:
                counts[hit.kind] += 1
        return counts

    @property
    def allowed(self) -> int:
        return sum(1 for h in self.hits if h.allowed)

    @property
    def skipped_counts(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped))

    @property
    def status(self) -> Literal["pass", "warn", "fail"]:
        severities = {h.severity for h in self.hits}
        if "fail" in severities:
            return "fail"
        return "warn" if "warn" in severities else "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.root,
            "source": self.source,
            "status": self.status,
            "symbols": list(self.symbols),
            "counts": self.counts,
            "allowed": self.allowed,
            "hits": [h.to_json() for h in self.hits],
            "files_scanned": self.files_scanned,
            "bytes_scanned": self.bytes_scanned,
            "files_with_hits": self.files_with_hits,
            "skipped": {
                "counts": self.skipped_counts,
                "files": [s.to_json() for s in self.skipped],
            },
            "unused_allowlist": [a.to_json() for a in self.unused_allowlist],
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------------------
# Scanning


class _Scan:
    """Shared state of one scan (a tree or a wheel), or of one share of its files."""

    def __init__(
        self,
        report: ScanReport,
        matcher: Matcher,
        allowlist: Sequence[AllowEntry],
        *,
        inspect_binary: bool,
    ) -> None:
        self.report = report
        self.matcher = matcher
        self.allowlist = list(allowlist)
        self.used: set[int] = set()
        # Wheels: note the symbols in binary members (compiled extensions); trees: skip
        # images and archives unread, as ripgrep does.
        self.inspect_binary = inspect_binary

    def feed(self, path: str, data: bytes) -> None:
        report = self.report
        data = without_record_hashes(path, data)
        if b"\0" in data:
            names = self._names(data, None) if self.inspect_binary else ()
            report.skipped.append(Skipped(path, "binary", names))
            return
        found = self.matcher.candidates(data.lower())
        text = ""
        if not data.isascii():
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                report.skipped.append(Skipped(path, "undecodable", self._names(data, found)))
                return
        report.files_scanned += 1
        report.bytes_scanned += len(data)
        if not found:
            return
        spans = self.matcher.verify(data, found)
        if not spans:
            return
        report.files_with_hits += 1
        for hit in classify(path, data, text or data.decode("ascii"), spans, self.matcher.symbols):
            report.hits.append(self._allow(hit))

    def _names(self, data: bytes, found: list[tuple[int, int, int]] | None) -> tuple[str, ...]:
        if found is None:
            found = self.matcher.candidates(data.lower())
        spans = self.matcher.verify(data, found) if found else []
        return tuple(sorted({self.matcher.symbols[i].name for i, _, _ in spans}))

    def _allow(self, hit: Hit) -> Hit:
        symbol = next(s for s in self.matcher.symbols if s.name == hit.symbol)
        for i, entry in enumerate(self.allowlist):
            if entry.matches(hit.path, symbol):
                self.used.add(i)
                return replace(hit, allowed=True, reason=entry.reason)
        return hit

    def share(self) -> _Scan:
        """An empty scan with this one's matcher and allowlist, for one share of the files."""
        report = self.report
        return _Scan(
            ScanReport(report.root, report.source, report.symbols),
            self.matcher,
            self.allowlist,
            inspect_binary=self.inspect_binary,
        )

    def merge(self, part: tuple[ScanReport, set[int]]) -> None:
        done, used = part
        report = self.report
        report.hits.extend(done.hits)
        report.skipped.extend(done.skipped)
        report.files_scanned += done.files_scanned
        report.bytes_scanned += done.bytes_scanned
        report.files_with_hits += done.files_with_hits
        self.used |= used

    def run(self, items: list[Any], workers: int, feed: Callable[[_Scan, Any], None]) -> None:
        """`feed` each share of `items` into an empty scan (forked when `workers` > 1),
        merged into this one."""

        def read_share(share: list[Any]) -> tuple[ScanReport, set[int]]:
            part = self.share()
            feed(part, share)
            return part.report, part.used

        for part in forked_map(read_share, _shares(items, workers)):
            self.merge(part)

    def finish(self, started: float) -> ScanReport:
        report = self.report
        report.hits.sort(key=lambda h: (h.path, h.line, h.column, h.symbol))
        report.skipped.sort(key=lambda s: s.path)
        report.unused_allowlist = [e for i, e in enumerate(self.allowlist) if i not in self.used]
        report.seconds = time.perf_counter() - started
        return report


def _new_scan(
    root: str,
    source: Literal["tree", "wheel"],
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]],
) -> _Scan:
    """A scan of a tree or a wheel; a wheel's binary members are searched for symbols too."""
    try:
        syms = parse_symbols([s.name if isinstance(s, Symbol) else s for s in symbols])
    except ValueError as exc:
        raise BadInput(f"bad symbol: {exc}") from None
    return _Scan(
        ScanReport(str(root), source, tuple(s.name for s in syms)),
        Matcher(syms),
        [
            e if isinstance(e, AllowEntry) else AllowEntry(*(str(e[k]) for k in AllowEntry._fields))
            for e in allowlist
        ],
        inspect_binary=source == "wheel",
    )


def _path_text(path: Path | str) -> str:
    """`path` as text, as `str(Path(path))` spells it (the report's root)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise BadInput(f"{text!r}: not a path name", hint="pass the path as text")
    return str(Path(text))


def _walk(root: str) -> Iterator[tuple[str, str, str | None]]:
    """(absolute path, relative posix path, skip reason) for every file under root."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        directory = os.path.join(root, rel_dir) if rel_dir else root
        try:
            entries = list(os.scandir(directory))
        except OSError:
            yield directory, rel_dir or ".", "unreadable"
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    yield entry.path, rel, "symlink"
                elif entry.is_dir():
                    if entry.name != ".git":
                        stack.append(rel)
                elif entry.is_file():
                    yield entry.path, rel, None
                else:
                    yield entry.path, rel, "special"
            except OSError:
                yield entry.path, rel, "unreadable"


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


# A file is read this far first; one with a NUL byte in it is binary, skipped unread (as
# ripgrep does), so the rest of it is not read.
_HEAD = 1 << 16


def _read(path: str) -> bytes:
    """The file's bytes, or only its first _HEAD bytes when they hold a NUL byte (a binary
    file: `feed` skips it on the same NUL whatever follows)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, min(size, _HEAD) + 1)
        if len(data) > _HEAD and b"\0" in data:
            return data
        parts = [data]
        if len(data) > _HEAD:  # a big text file: the rest of it
            parts.append(os.read(fd, size - len(data) + 1))
        # a short read or a file that grew: read to the end
        while sum(map(len, parts)) != size and (chunk := os.read(fd, 1 << 20)):
            parts.append(chunk)
        return b"".join(parts) if len(parts) > 1 else data
    finally:
        os.close(fd)


def scan_tree(
    root: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """Search every file under `root` (a core source tree) for the vendor symbols, shared
    out over `workers` forked processes when above 1 (the report the same)."""
    started = time.perf_counter()
    root_path = _path_text(root)
    if not os.path.exists(root_path):
        raise BadInput(
            f"{root_path}: core tree not found",
            hint="pass the extracted vLLM source tree (or a built wheel)",
        )
    if not os.path.isdir(root_path):
        raise BadInput(f"{root_path}: not a directory", hint="pass the extracted vLLM source tree")
    scan = _new_scan(root_path, "tree", symbols, allowlist)
    files = []
    for path, rel, reason in _walk(root_path):
        if reason:
            scan.report.skipped.append(Skipped(rel, reason))
        else:
            files.append((path, rel))

    def feed(part: _Scan, share: list[tuple[str, str]]) -> None:
        for path, rel in share:
            try:
                data = _read(path)
            except OSError:
                part.report.skipped.append(Skipped(rel, "unreadable"))
                continue
            part.feed(rel, data)

    scan.run(files, workers, feed)
    return scan.finish(started)


# A share is worth a fork from this many files (below it, the fork and its pickled answer
# cost more than the share's work).
FILES_PER_FORK = 128


def _shares(items: list[Any], workers: int) -> list[list[Any]]:
    """`items` dealt round-robin into at most `workers` shares of FILES_PER_FORK or more;
    the merged report is sorted, so the split never shows in it."""
    n = max(1, min(workers, len(items) // FILES_PER_FORK))
    return [items[i::n] for i in range(n)]


def scan_wheel(
    path: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """Search every member of a built wheel, read from the zip; `workers` as in `scan_tree`."""
    started = time.perf_counter()
    wheel = _path_text(path)
    if not os.path.isfile(wheel):
        raise BadInput(f"{wheel}: wheel not found", hint="pass the built core wheel (.whl)")
    scan = _new_scan(wheel, "wheel", symbols, allowlist)
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = []
            for index, member in enumerate(zf.infolist()):
                if member.is_dir():
                    continue
                if stat.S_ISLNK(member.external_attr >> 16):
                    scan.report.skipped.append(Skipped(member.filename, "symlink"))
                else:
                    members.append(index)
    except zipfile.BadZipFile as exc:
        raise BadInput(
            f"{wheel}: not a wheel (zip) file: {exc}", hint="pass a built .whl"
        ) from None

    def feed(part: _Scan, share: list[int]) -> None:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            for index in share:
                member = infos[index]
                try:
                    data = zf.read(member)
                except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as exc:
                    raise BadInput(
                        f"{wheel}: member {member.filename} cannot be read: {exc}",
                        hint="rebuild the wheel; it is damaged",
                    ) from None
                part.feed(member.filename, data)

    scan.run(members, workers, feed)
    return scan.finish(started)


def scan_path(
    path: Path | str,
    symbols: Iterable[str | Symbol],
    allowlist: Iterable[AllowEntry | Mapping[str, str]] = (),
    *,
    workers: int = 1,
) -> ScanReport:
    """A directory -> scan_tree; a wheel or zip file -> scan_wheel."""
    p = _path_text(path)
    if os.path.isdir(p):
        return scan_tree(p, symbols, allowlist, workers=workers)
    if os.path.isfile(p):
        if zipfile.is_zipfile(p):
            return scan_wheel(p, symbols, allowlist, workers=workers)
        raise BadInput(
            f"{p}: neither a directory nor a wheel",
            hint="pass the extracted core source tree or a built .whl (extract an sdist first)",
        )
    raise BadInput(
        f"{p}: no such file or directory",
        hint="pass the extracted core source tree or a built .whl",
    )
