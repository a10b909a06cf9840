"""The `workload` check's own evidence: the plan's features as the plugin answered them, the
paths and the variant plans (the scorecard's `workload` and `plans`), as Markdown and HTML."""

from __future__ import annotations

import html
from typing import Any

from vllm_plugin_release.conform.lib.doctext import inline, md_cell
from vllm_plugin_release.replay.model import path_sentences, path_shares


def workload_rows(card: dict[str, Any]) -> list[list[str]]:
    """feature | share | answer | where | path, the plan's features first."""
    workload = card.get("workload") or {}
    rows = []
    for f in sorted(workload.get("features") or [], key=lambda f: not f.get("needed")):
        share = f"{f['share'] * 100:.0f}%" if f.get("needed") else "not in the plan"
        rows.append(
            [
                f.get("label", f.get("feature", "")),
                share,
                str(f.get("outcome", "")).replace("_", " "),
                f.get("where") or "",
                f.get("path") or "",
            ]
        )
    return rows


def path_lines(card: dict[str, Any]) -> list[str]:
    paths = (card.get("workload") or {}).get("paths") or {}
    return path_sentences(path_shares(paths, "scorecard: workload.paths"))


def plan_lines(card: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(plan, verdict, why) for each variant plan."""
    return [
        (f"{name}: {plan.get('description') or ''}".rstrip(": "), plan["verdict"], plan["why"])
        for name, plan in (card.get("plans") or {}).items()
    ]


WORKLOAD_HEAD = ("feature", "share of requests", "answer", "where", "path")


def workload_md(card: dict[str, Any]) -> list[str]:
    rows = workload_rows(card)
    if not rows:
        return []
    out = ["", "## Workload: the plan's features, asked of the plugin", ""]
    out += [f"- {line}" for line in path_lines(card)]
    out += ["", "| " + " | ".join(WORKLOAD_HEAD) + " |", "|---" * len(WORKLOAD_HEAD) + "|"]
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    for plan, v, why in plan_lines(card):
        out += ["", f"Plan {plan}: **{v}**", *[f"- {w}" for w in why]]
    return out


def workload_html(card: dict[str, Any]) -> str:
    rows = workload_rows(card)
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in WORKLOAD_HEAD)
    body = "".join(
        f'<tr class="{html.escape(row[2].replace(" ", "_"))}">'
        + "".join(f"<td>{inline(c)}</td>" for c in row)
        + "</tr>"
        for row in rows
    )
    paths = "".join(f"<li><b>{inline(line)}</b></li>" for line in path_lines(card))
    plans = "".join(
        f"<p>Plan {inline(plan)}: <b>{html.escape(v)}</b></p><ul>"
        + "".join(f"<li>{inline(w)}</li>" for w in why)
        + "</ul>"
        for plan, v, why in plan_lines(card)
    )
    return (
        "<h2>Workload: the plan's features, asked of the plugin</h2>"
        + (f"<ul>{paths}</ul>" if paths else "")
        + f"<table><tr>{head}</tr>{body}</table>"
        + plans
    )
