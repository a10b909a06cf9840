"""`vpr manifest query` and `matrix` as text for an 80-column log, and as JSON.

Nothing is cut: a name longer than its column wraps onto the next line instead of
ending in an ellipsis. The matrix gives each plugin column a short key ([A], [B]…)
explained in a legend (full name and commit, runtime and its status, Python, the
manifest's path in the store), and splits into several tables when the columns do
not fit the width.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from vllm_plugin_release.core.storeindex import (
    VERDICTS,
    IndexEntry,
    Matrix,
    legend_rows,
    python_of,
    render_html,
    render_markdown,
    runtime_text,
)

WIDTH = 80
LIST_IDS = 40  # the matrix legend lists each cell's pairing id up to this many pairings


def _wrapper(width: int, indent: str) -> Any:
    """wrap(text) -> lines: textwrap only for a line that does not fit (most do)."""
    wrapper = textwrap.TextWrapper(width=width, subsequent_indent=indent, break_on_hyphens=False)

    def wrap(text: str) -> list[str]:
        return [text] if len(text) <= width else wrapper.wrap(text)

    return wrap


def query_text(entries: list[IndexEntry], location: str, width: int = WIDTH) -> str:
    """One block per pairing, every line at most `width` columns, no name cut."""
    wrap = _wrapper(width, "    ")
    lines = [*wrap(f"{len(entries)} pairing(s) in {location}"), ""]
    for e in entries:
        p = e.plugin
        head = (
            f"{e.core.name} {e.core.version} + "
            f"{p.name} {p.version}: {e.verdict or 'none'} "
            f"({e.runner or '?'} runner)"
        )
        commit = (p.commit or "no commit")[:12]
        detail = [
            f"id {e.pairing_id[:16]}  python {python_of(e)}  commit {commit}",
            f"runtime {runtime_text(e)}",
        ]
        if e.certified_at:
            detail.append(f"certified {e.certified_at}; {e.runs} run(s) in its history")
        lines += wrap(head)
        for text in detail:
            lines += wrap("  " + text)
    return "\n".join(lines) + "\n"


def _keys(n: int) -> list[str]:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = []
    for i in range(n):
        key = ""
        i += 1
        while i:
            i, r = divmod(i - 1, 26)
            key = letters[r] + key
        out.append(key)
    return out


def _cell_lines(entries: list[IndexEntry]) -> list[str]:
    return [f"{e.verdict or 'none'} py{python_of(e)}" for e in entries] or ["-"]


def matrix_text(m: Matrix, width: int = WIDTH) -> str:
    """Core versions (rows) x plugin keys (columns), then the legend; <= `width` columns."""
    if not m.cores:
        return "No pairings in the manifest store.\n"
    keys = dict(zip(m.plugins, _keys(len(m.plugins))))
    lines = {where: _cell_lines(entries) for where, entries in m.cells.items()}
    first = max(9, *(len(c) for c in m.cores)) + 2
    cell = max(
        12,
        *(len(line) + 2 for cell_lines in lines.values() for line in cell_lines),
        *(len(k) + 4 for k in keys.values()),
    )
    empty = ["-"]
    per_table = max(1, (width - first) // cell)
    out: list[str] = []
    for start in range(0, len(m.plugins), per_table):
        columns = m.plugins[start : start + per_table]
        head = "vLLM core".ljust(first) + "".join(f"[{keys[c]}]".ljust(cell) for c in columns)
        out.append(head.rstrip())
        for core in m.cores:
            cells = [lines.get((core, c), empty) for c in columns]
            for row in range(max(len(x) for x in cells)):
                label = core if row == 0 else ""
                out.append(
                    (
                        label.ljust(first)
                        + "".join((x[row] if row < len(x) else "").ljust(cell) for x in cells)
                    ).rstrip()
                )
        out.append("")
    out += _legend(m, keys, width)
    return "\n".join(out) + "\n"


def _legend(m: Matrix, keys: dict[str, str], width: int) -> list[str]:
    wrap = _wrapper(width, "      ")
    out = ["plugins:"]
    for column, runtimes, _ in legend_rows(m):
        out += wrap(f"  [{keys[column]}] {column}; runtime {runtimes}")
    pairings = sum(len(es) for es in m.cells.values())
    if pairings > LIST_IDS:
        out += wrap(
            f"manifests: STORE/pairings/<pairing id>.json; {pairings} pairings (ids: "
            "vpr manifest query --core VERSION --plugin NAME, or matrix --json)"
        )
    else:
        out.append("manifests: STORE/pairings/<pairing id>.json, per cell:")
        for core in m.cores:
            for column in m.plugins:
                key = keys[column]
                out += [
                    f"  {core} [{key}] py{python_of(e)}: {e.pairing_id[:16]}"[:width]
                    for e in m.cells.get((core, column), ())
                ]
    out.append("verdicts:")
    out += [line for v, text in VERDICTS.items() for line in wrap(f"  {v}: {text}")]
    return out


def matrix_json(m: Matrix) -> dict[str, Any]:
    """The matrix as data: rows, columns (with their keys) and the entries of each cell."""
    keys = dict(zip(m.plugins, _keys(len(m.plugins))))
    return {
        "cores": m.cores,
        "plugins": [{"key": keys[p], "column": p} for p in m.plugins],
        "cells": [
            {
                "core": core,
                "plugin": column,
                "pairings": [
                    {  # the runtime and manifest path as the entry has them
                        "pairing_id": e.pairing_id,
                        "verdict": e.verdict,
                        "runner": e.runner,
                        "python": e.python,
                        "runtime": e.raw.get("runtime"),
                        "manifest": e.raw.get("manifest"),
                    }
                    for e in entries
                ],
            }
            for (core, column), entries in sorted(m.cells.items())
        ],
        "legend": VERDICTS,
    }


def render_matrix(m: Matrix, fmt: str) -> str:
    """The matrix as `vpr manifest matrix` prints it: `fmt` table, markdown, html, or json
    (--json); what a store summary holds, rendered by its publisher."""
    if fmt == "json":
        return json.dumps(matrix_json(m), indent=2, sort_keys=True) + "\n"
    if fmt == "table":
        return matrix_text(m)
    return render_markdown(m) if fmt == "markdown" else render_html(m)
