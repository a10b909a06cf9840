"""The scorecard: every check's status and evidence, the verdict, in JSON, Markdown and HTML.

Verdicts (ARCHITECTURE.md): `fleet` (all checks pass, hardware conformance passed),
`pilot` (all CPU-runner checks pass, hardware part not yet run), `lab` (any check
failed). A deferred check is never a pass: on the hardware runner it keeps the
verdict at `pilot`.
"""

from __future__ import annotations

import html
import json
from typing import Any

from vllm_plugin_release.conform.result import CheckResult

SCORECARD_VERSION = 1
ICONS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "deferred": "DEFERRED"}


def verdict(results: list[CheckResult], runner: str) -> str:
    """lab on any failure; fleet only on the hardware runner with nothing deferred and the
    live `hardware` check (vpr hardware-live) observed passing; pilot otherwise."""
    statuses = {r.status for r in results}
    if "fail" in statuses or not results:
        return "lab"
    hardware = next((r for r in results if r.name == "hardware"), None)
    if (
        runner == "hardware"
        and "deferred" not in statuses
        and hardware is not None
        and hardware.status == "pass"
    ):
        return "fleet"
    return "pilot"


def scorecard(
    results: list[CheckResult], *, runner: str, pairing: dict[str, Any]
) -> dict[str, Any]:
    """The machine-readable scorecard (deterministic: no times, no hosts)."""
    v = verdict(results, runner)
    return {
        "scorecard_version": SCORECARD_VERSION,
        "verdict": v,
        "runner": runner,
        "pairing": pairing,
        "deferred": sorted(r.name for r in results if r.status == "deferred"),
        "checks": {r.name: r.to_json() for r in sorted(results, key=lambda r: r.name)},
        "summary": {s: sum(1 for r in results if r.status == s) for s in ICONS},
    }


def _evidence_line(item: dict[str, Any]) -> str:
    where = item.get("file", "")
    if where and item.get("line"):
        where += f":{item['line']}"
    value = item.get("value")
    parts = [p for p in (where, item.get("note", "")) if p]
    if value not in (None, ""):
        parts.append(f"`{json.dumps(value, sort_keys=True)[:200]}`")
    return " — ".join(parts)


def to_markdown(card: dict[str, Any], max_evidence: int = 12) -> str:
    p = card["pairing"]
    out = [
        f"# Scorecard: {p.get('name', '?')}",
        "",
        f"**Verdict: {card['verdict']}** (runner: {card['runner']}) — "
        f"core {p.get('core', '?')}, plugin {p.get('plugin', '?')}",
        "",
        "| check | status | summary |",
        "|---|---|---|",
    ]
    for name, check in card["checks"].items():
        summary = check["summary"].replace("|", "\\|")
        out.append(f"| {name} | {ICONS[check['status']]} | {summary} |")
    for name, check in card["checks"].items():
        out += ["", f"## {name}: {ICONS[check['status']]}", "", check["summary"], ""]
        if check.get("threshold"):
            out.append(f"Threshold: `{json.dumps(check['threshold'], sort_keys=True)}`")
            out.append("")
        evidence = check.get("evidence", [])
        for item in evidence[:max_evidence]:
            out.append(f"- {_evidence_line(item)}")
        if len(evidence) > max_evidence:
            out.append(f"- ... and {len(evidence) - max_evidence} more (see scorecard.json)")
    if card["deferred"]:
        out += ["", "Deferred (not passed): " + ", ".join(card["deferred"])]
    return "\n".join(out) + "\n"


STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem;color:#1a1a1a}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
.pass{background:#d9f2d9}.warn{background:#fff2cc}.fail{background:#f8d0d0}
.deferred{background:#e0e0f0}.verdict{font-size:1.4rem;font-weight:bold}
li{margin:.15rem 0;font-size:.9rem}code{font-size:.85rem}
"""


def to_html(card: dict[str, Any], max_evidence: int = 40) -> str:
    """A self-contained page: inline style, no scripts, no external resources."""
    e = html.escape
    p = card["pairing"]
    rows = "".join(
        f'<tr class="{c["status"]}"><td><a href="#{e(n)}">{e(n)}</a></td>'
        f"<td>{ICONS[c['status']]}</td><td>{e(c['summary'])}</td></tr>"
        for n, c in card["checks"].items()
    )
    sections = []
    for name, check in card["checks"].items():
        items = "".join(
            f"<li>{e(_evidence_line(item))}</li>" for item in check["evidence"][:max_evidence]
        )
        more = len(check["evidence"]) - max_evidence
        if more > 0:
            items += f"<li>... and {more} more (scorecard.json)</li>"
        sections.append(
            f'<h2 id="{e(name)}" class="{check["status"]}">{e(name)}: {ICONS[check["status"]]}'
            f"</h2><p>{e(check['summary'])}</p><ul>{items}</ul>"
        )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>Scorecard {e(str(p.get('name', '')))}</title><style>{STYLE}</style></head><body>"
        f"<h1>Scorecard: {e(str(p.get('name', '')))}</h1>"
        f'<p class="verdict">Verdict: {e(card["verdict"])}</p>'
        f"<p>Runner: {e(card['runner'])}; core {e(str(p.get('core', '')))}; "
        f"plugin {e(str(p.get('plugin', '')))}</p>"
        f"<table><tr><th>check</th><th>status</th><th>summary</th></tr>{rows}</table>"
        + "".join(sections)
        + "</body></html>\n"
    )
