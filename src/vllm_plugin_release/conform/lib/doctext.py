"""The plugin's docs as text: the files its globs name, read within bounds, split into blocks
and sentences by linear passes (docs are an outside input); and the scorecards' Markdown cells."""

from __future__ import annotations

import bisect
import fnmatch
import html
import re
from collections.abc import Iterator
from pathlib import Path

from vllm_plugin_release.conform.lib.plugintree import Unread, read_regular, within
from vllm_plugin_release.core.cache import walk

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")  # the closing #s: string methods below
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_ABBREV = {"e.g", "i.e", "vs", "etc", "cf", "approx", "fig", "no", "ca", "resp", "incl"}
# Each inner part stops at the next opener, so a run of openers never closing is read once.
_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_HTML = re.compile(r"<[^<>]+>")
_STRONG = re.compile(r"(\*\*|__)(.+?)\1")  # any later opener closes: at most one long miss
_EMPHASIS = re.compile(r"(?<![\w*])\*(?!\s)([^*]+?)(?<!\s)\*(?![\w*])")
# A sentence ends at a run of .!? (matched from its first mark only), closing quotes or
# brackets, blanks, then what starts a sentence.
_END = re.compile(r"(?<![.!?])[.!?]+[\"')\]]*\s+(?=[A-Z0-9\"'(\[])")
_BLANKS = re.compile(r"\s*")
_WORD_TAIL = 40  # an abbreviation or an initial is far shorter


def _clean_inline(text: str) -> str:
    text = _LINK.sub(r"\1", text)  # links and images
    text = _HTML.sub("", text)  # inline HTML
    text = text.replace("`", "")
    text = _STRONG.sub(r"\2", text)
    return _EMPHASIS.sub(r"\1", text)


def _visible_lines(text: str) -> Iterator[tuple[int, str | None]]:
    """(number, text) of lines outside code and HTML comments; text None where those interrupt."""
    fence: str | None = None
    in_comment = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            continue
        m = _FENCE.match(raw)
        if m:
            fence = m.group(1)[:3]
            yield number, None
            continue
        if in_comment:
            if "-->" in raw:
                in_comment = False
            continue
        if raw.strip().startswith("<!--"):
            in_comment = "-->" not in raw
            yield number, None
            continue
        yield number, re.sub(r"^\s*>\s?", "", raw)  # blockquotes read as text


def _table_row(line: str) -> str | None:
    """The cells of a Markdown table row joined with "; "; None for a separator row."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
        return None
    return _clean_inline("; ".join(c for c in cells if c))


def text_blocks(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """(kind, [(line, text)]) blocks: headings, paragraphs, list items, table rows."""
    blocks: list[tuple[str, list[tuple[int, str]]]] = []
    current: list[tuple[int, str]] | None = None
    kind = ""
    previous_blank = True

    def close() -> None:
        nonlocal current
        if current:
            blocks.append((kind, current))
        current = None

    for number, line in _visible_lines(text):
        if line is None:
            close()
            continue
        if not line.strip():
            close()
            previous_blank = True
            continue
        if (
            previous_blank
            and current is None
            and not (blocks and blocks[-1][0] == "item")
            and re.match(r"^(    |\t)", line)
        ):
            continue  # indented code block
        previous_blank = False
        if h := _HEADING.match(line):
            close()
            # not in the regex: `\s*#*\s*$` after a lazy group retries the tail at each position
            title = h.group(2).rstrip().rstrip("#").rstrip()
            blocks.append(("heading", [(number, _clean_inline(title))]))
            continue
        if line.lstrip().startswith("|"):
            close()
            row = _table_row(line)
            if row is not None:
                blocks.append(("table", [(number, row)]))
            continue
        if item := _ITEM.match(line):
            close()
            current, kind = [(number, _clean_inline(item.group(2)))], "item"
            continue
        if current is None:
            current, kind = [], "para"
        current.append((number, _clean_inline(line.strip())))
    close()
    return blocks


def split_sentences(parts: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join wrapped lines and split into sentences; each keeps its first line."""
    pieces: list[str] = []
    starts: list[int] = []  # the offset each line starts at in the joined text
    lines: list[int] = []
    size = 0
    for number, piece in parts:
        if size:
            pieces.append(" ")
            size += 1
        starts.append(size)
        lines.append(number)
        stripped = piece.strip()
        pieces.append(stripped)
        size += len(stripped)
    text = "".join(pieces)

    def line_at(pos: int) -> int:
        return lines[max(bisect.bisect_right(starts, pos) - 1, 0)] if lines else 0

    out: list[tuple[int, str]] = []
    start = 0
    for m in _END.finditer(text):
        tail = text[max(start, m.start() - _WORD_TAIL) : m.start()]
        word = tail.split()[-1] if tail and not tail[-1].isspace() else None
        if word and word.lower().rstrip(".") in _ABBREV:
            continue
        if word and len(word) == 1 and word.isascii() and word.isalpha():
            continue  # an initial
        sentence = text[start : m.end()].strip()
        if sentence:
            out.append((line_at(_BLANKS.match(text, start).end()), sentence))
        start = m.end()
    rest = text[start:].strip()
    if rest:
        out.append((line_at(_BLANKS.match(text, start).end()), rest))
    return out


MAX_FILES = 400
MAX_BYTES = 512 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # read in all; then the rest is named, not read
MARKDOWN = {".md", ".markdown", ".rst", ".txt", ""}
CODE = {".sh", ".bash", ".py", ".yaml", ".yml", ".toml", ".dockerfile"}


def doc_files(root: Path, patterns: list[str]) -> list[Path]:
    """The plugin's files that `patterns` (globs relative to `root`) name, sorted: text files
    only, nothing hidden or outside `root`, at most MAX_FILES. One walk without recursion,
    entering only folders a pattern can reach and never following a link to a folder."""
    globs = [
        _Glob(p)
        for p in patterns
        if not p.startswith("/") and ".." not in Path(p).parts  # the schema refuses these
    ]
    reach: dict[str, list[frozenset[int]]] = {"": [g.start for g in globs]}  # per folder

    def enter(rel: str) -> bool:
        parent, _, name = rel.rpartition("/")
        here = [g.step(states, name) for g, states in zip(globs, reach[parent])]
        reach[rel] = here
        return not name.startswith(".") and any(g.open(st) for g, st in zip(globs, here))

    found: list[Path] = []
    for rel, entry in walk(root, enter=enter, errors="skip"):
        parent, _, name = rel.rpartition("/")
        if name.startswith(".") or entry.is_dir() or parent not in reach:
            continue
        path = Path(entry.path)
        if path.suffix.lower() not in MARKDOWN | CODE and name != "Dockerfile":
            continue
        matched = any(g.done(g.step(st, name)) for g, st in zip(globs, reach[parent]))
        if matched and within(root, path) is not None:  # not a link out of the checkout
            found.append(path)
    return sorted(found)[:MAX_FILES]


class _Glob:
    """A glob's segments as a small automaton over path parts (`**`: any folders, as in
    pathlib's glob; a trailing `**` names the files under the folder)."""

    def __init__(self, pattern: str) -> None:
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        self.parts = [*parts, "*"] if parts and parts[-1] == "**" else parts
        self.start = self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        todo, out = list(states), set(states)
        while todo:
            i = todo.pop()
            if i < len(self.parts) and self.parts[i] == "**" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return frozenset(out)

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        nxt: set[int] = set()
        for i in states:
            if i < len(self.parts) and self.parts[i] == "**":
                nxt.add(i)  # ** takes this folder too
            elif i < len(self.parts) and fnmatch.fnmatchcase(name, self.parts[i]):
                nxt.add(i + 1)
        return self._closure(nxt)

    def open(self, states: frozenset[int]) -> bool:
        """Something under a folder in these states can still match."""
        return any(i < len(self.parts) for i in states)

    def done(self, states: frozenset[int]) -> bool:
        return len(self.parts) in states


def doc_texts(
    root: Path, patterns: list[str], left: list[str] | None = None
) -> list[tuple[str, str]]:
    """(path, text) of the text docs `patterns` name, until MAX_TOTAL_BYTES; the rest to `left`."""
    out: list[tuple[str, str]] = []
    files = doc_files(root, patterns)
    total = 0
    for index, path in enumerate(files):
        if total >= MAX_TOTAL_BYTES:
            if left is not None:
                left.extend(p.relative_to(root).as_posix() for p in files[index:])
            break
        try:
            raw = read_regular(path, MAX_BYTES)[:MAX_BYTES]
        except Unread:
            continue
        if b"\0" in raw:
            continue  # binary
        total += len(raw)
        out.append((path.relative_to(root).as_posix(), raw.decode("utf-8", errors="replace")))
    return out


def md_cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def inline(text: str) -> str:
    """Escaped text with `code spans` as <code>; no backtick survives."""
    parts = html.escape(str(text)).split("`")
    last = len(parts) - 1
    return "".join(f"<code>{p}</code>" if i % 2 and i < last else p for i, p in enumerate(parts))
