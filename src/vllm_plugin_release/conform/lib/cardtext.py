"""Text helpers the scorecard renderers share (the suite's and the checks' own evidence.py)."""

from __future__ import annotations

import html


def md_cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def inline(text: str) -> str:
    """Escaped text with `code spans` as <code>; no backtick survives."""
    parts = html.escape(str(text)).split("`")
    out = []
    for i, part in enumerate(parts):
        out.append(f"<code>{part}</code>" if i % 2 and i < len(parts) - 1 else part)
    return "".join(out)
