"""Markdown as text blocks and sentences, each with its line (pure; the docs checks).

A plugin's docs are an outside input, so every pass here is linear in the text: no
pattern can scan the rest of a line from each of many starting points (a long run of
`[`, `<`, `*`, dots or blanks), and no sentence copies the text after it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")  # the closing #s: `_heading_text`
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


def _heading_text(rest: str) -> str:
    """A heading's text without its closing `#`s (string methods: a regex with `\\s*#*\\s*$`
    after a lazy group retries the whole tail from each position)."""
    return rest.rstrip().rstrip("#").rstrip()


def _visible_lines(text: str) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of the lines outside code fences and HTML comments, blockquote
    markers removed; (line number, None) where a fence or a comment interrupts the text."""
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
    last_kind = ""

    def close() -> None:
        nonlocal current, last_kind
        if current:
            blocks.append((kind, current))
            last_kind = kind
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
            and last_kind != "item"
            and re.match(r"^(    |\t)", line)
        ):
            continue  # indented code block
        previous_blank = False
        if h := _HEADING.match(line):
            close()
            blocks.append(("heading", [(number, _clean_inline(_heading_text(h.group(2))))]))
            last_kind = "heading"
            continue
        if line.lstrip().startswith("|"):
            close()
            row = _table_row(line)
            if row is not None:
                blocks.append(("table", [(number, row)]))
                last_kind = "table"
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
