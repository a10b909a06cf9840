"""The `plugin_tests` check's own evidence: its per-file table (`details.by_module`), for the
scorecard's Markdown and HTML."""

from __future__ import annotations

import html
from typing import Any

# The per-file table of a check that ran tests (`plugin_tests`: details.by_module).
OUTCOMES = ("passed", "failed", "error", "skipped", "deferred")


def module_rows(check: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(test file, counts in OUTCOMES order) of a check whose details hold `by_module`."""
    table = (check.get("details") or {}).get("by_module")
    if not isinstance(table, dict):
        return []
    return [
        (str(module), [str(counts.get(o, 0)) for o in OUTCOMES])
        for module, counts in sorted(table.items())
        if isinstance(counts, dict)
    ]


def modules_html(check: dict[str, Any]) -> str:
    rows = module_rows(check)
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{o}</th>' for o in OUTCOMES)
    body = "".join(
        f'<tr><th scope="row">{html.escape(m)}</th>'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
        for m, cells in rows
    )
    return f'<table><tr><th scope="col">test file</th>{head}</tr>{body}</table>'
