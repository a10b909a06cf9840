"""The scorecard: every check's status and evidence and the verdict, as data (deterministic: the
certification day is handed in) and drawn as Markdown and one self-contained HTML page."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform import CheckResult
from vllm_plugin_release.conform.checks.plugin_tests import OUTCOMES
from vllm_plugin_release.conform.lib.doctext import inline, md_cell
from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import atomic_write_text, write_json
from vllm_plugin_release.core.cardrecord import FACT_KEYS
from vllm_plugin_release.replay.model import HEADLINE, path_sentences, path_shares

SCORECARD_VERSION = 2
ICONS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "deferred": "DEFERRED"}

# What each verdict means, in one sentence (scorecard, docs/conformance.md).
MEANING = {
    "fleet": "certified for fleet rollout: every check passed, the hardware part included",
    "pilot": "certified for a pilot: every check the CPU runner can make passed; the "
    "hardware part has not passed yet",
    "lab": "not certified: at least one check failed; keep it in the lab",
}
HARDWARE_RUN = (
    "run on the hardware runner: `vpr hardware conform --spec FILE` (`nox -s conform-hardware`) "
    "on a machine with the vendor runtime and device"
)


def utc_day() -> str:
    """The certification day: the scorecard is deterministic for one UTC day (cadence reads
    the index), so the day is the finest time it can carry."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def verdict(results: list[CheckResult], runner: str) -> str:
    """lab on any failure; fleet only on the hardware runner with nothing deferred and the
    live `hardware` check (vpr hardware live) observed passing; pilot otherwise."""
    statuses = {r.status for r in results}
    if "fail" in statuses or not results:
        return "lab"
    live = next((r.status for r in results if r.name == "hardware"), None)
    fleet = runner == "hardware" and "deferred" not in statuses and live == "pass"
    return "fleet" if fleet else "pilot"


def run_with(name: str, reason: str) -> str:
    """What would run a deferred check."""
    if name == "hardware" or "runtime" in reason:
        return HARDWARE_RUN
    return f"`vpr check {name} --spec FILE` once the cause above is gone"


def deferred_items(
    results: list[CheckResult], not_run: list[tuple[str, str]]
) -> list[dict[str, str]]:
    """Every check deferred or never run on this runner (`not_run`), with what would run it."""
    seen = {r.name for r in results}
    why = [(r.name, r.summary) for r in results if r.status == "deferred"]
    why += [(n, reason) for n, reason in not_run if n not in seen]
    items = [{"check": n, "reason": r, "run_with": run_with(n, r)} for n, r in why]
    return sorted(items, key=lambda i: i["check"])


def blockers(results: list[CheckResult]) -> list[tuple[str, str]]:
    """(check, sentence) for each need a failing check found refused (`details.blockers`)."""
    return [
        (r.name, str(b))
        for r in sorted(results, key=lambda r: r.name)
        if r.status == "fail"
        for b in (r.details.get("blockers") or [])
    ]


def explain(v: str, results: list[CheckResult], deferred: list[dict[str, str]]) -> dict[str, Any]:
    """Why the verdict is what it is, and what the next level needs."""
    by = {s: sorted(r.name for r in results if r.status == s) for s in ICONS}
    why: list[str] = []
    needs: list[str] = []
    if v == "lab":
        blocked = blockers(results)
        why += [f"the plan cannot run on this pairing: it {b} [{n}]" for n, b in blocked]
        why.append("failed: " + (", ".join(by["fail"]) or "no check ran"))
        needs = [
            f"{n}: a plugin that supports what the plan needs, or a plan without it"
            for n in dict.fromkeys(n for n, _ in blocked)
        ]
        needs += [f"fix {n} (see its evidence below) and re-run `vpr conform`" for n in by["fail"]]
        if not results:
            needs = ["run `vpr conform --spec FILE`"]
    else:
        why.append(f"{len(by['pass'])} checks passed" + (f": {', '.join(by['pass'])}"))
    if by["warn"]:
        why.append(f"warnings (do not block): {', '.join(by['warn'])}")
    if deferred:
        why.append(
            "not run yet (never counted as a pass): " + ", ".join(d["check"] for d in deferred)
        )
    if v == "pilot":
        needs = [f"{d['check']} passing: {d['run_with']}" for d in deferred]
        if not deferred:
            needs = [f"the hardware check passing: {HARDWARE_RUN}"]
    nxt = {"lab": "pilot", "pilot": "fleet", "fleet": None}[v]
    if v == "fleet":
        needs = ["nothing: fleet is the top level; re-certify when the core or plugin moves"]
    return {"meaning": MEANING[v], "why": why, "next_level": nxt, "needs": needs}


def explain_blocked(
    results: list[CheckResult], deferred: list[dict[str, str]], blocked: dict[str, str]
) -> dict[str, Any]:
    """Why a pairing whose environment cannot be made here is `lab`, whatever ran."""
    ran = sorted(r.name for r in results if r.status != "deferred")
    failed = sorted(r.name for r in results if r.status == "fail")
    why = [
        f"no pairing environment here: {blocked['reason']}",
        "ran without it: "
        + (", ".join(ran) or "nothing")
        + (f" (failed: {', '.join(failed)})" if failed else ""),
        "not run (never counted as a pass): " + ", ".join(d["check"] for d in deferred),
    ]
    needs = [blocked["hint"]] if blocked.get("hint") else []
    needs += [f"fix {n} (see its evidence below)" for n in failed]
    needs.append("then `vpr release --spec FILE`: every check, in the pairing's environment")
    return {
        "meaning": "not certified: the pairing's environment cannot be made here, so only the "
        "checks that need none ran",
        "why": why,
        "next_level": "pilot",
        "needs": needs,
    }


def plan_verdicts(
    results: list[CheckResult], runner: str, not_run: list[tuple[str, str]]
) -> dict[str, Any]:
    """Each variant plan's verdict: the pairing's checks with the plan's own answer in place
    of the check that answered it (the workload check's `details.plans`), explained the same
    way, so a plan a refused feature blocks says so first."""
    out: dict[str, Any] = {}
    for check in results:
        for name, plan in sorted((check.details.get("plans") or {}).items()):
            blockers = {"blockers": plan.get("blockers") or []}
            mine = replace(check, status=plan["status"], summary=plan["summary"], details=blockers)
            swapped = [mine if r is check else r for r in results]
            v = verdict(swapped, runner)
            x = explain(v, swapped, deferred_items(swapped, not_run))
            out[name] = {
                "description": plan.get("description"),
                "verdict": v,
                "why": x["why"],
                check.name: {"status": plan["status"], "summary": plan["summary"]},
            }
    return out


def workload_facts(results: list[CheckResult]) -> dict[str, Any] | None:
    """The plan's features and answers, the paths' shares, the model coverage."""
    check = next((r for r in results if r.name == "workload" and r.details.get("features")), None)
    if check is None:
        return None
    keep = ("feature", "label", "share", "needed", "outcome", "where", "path", "requests")
    models = check.details.get("models") or {}
    return {
        "platform": check.details.get("platform"),
        "features": [
            {k: f[k] for k in keep if f.get(k) is not None} for f in check.details["features"]
        ],
        "paths": check.details.get("paths") or {},
        "models": {
            "model": models.get("model"),
            "listed": models.get("listed"),
            "shown": len(models.get("table") or []),
        },
    }


def scorecard(
    results: list[CheckResult],
    *,
    runner: str,
    pairing: dict[str, Any],
    facts: dict[str, Any] | None = None,
    not_run: list[tuple[str, str]] | None = None,
    blocked: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The machine-readable scorecard (deterministic: no times, no hosts). `not_run`: checks
    this runner never runs (name, why); `blocked`: why the pairing's environment cannot be
    made here (`reason`, `hint`), which makes the verdict `lab` whatever ran."""
    v = "lab" if blocked else verdict(results, runner)
    deferred = deferred_items(results, list(not_run or []))
    card = {
        "scorecard_version": SCORECARD_VERSION,
        "verdict": v,
        "explanation": (
            explain_blocked(results, deferred, blocked)
            if blocked
            else explain(v, results, deferred)
        ),
        "runner": runner,
        "pairing": pairing,
        "deferred": deferred,
        "checks": {r.name: r.to_json() for r in sorted(results, key=lambda r: r.name)},
        "summary": {s: sum(1 for r in results if r.status == s) for s in ICONS},
    }
    if blocked:
        card["blocked"] = dict(blocked)
    else:
        plans = plan_verdicts(results, runner, list(not_run or []))
        if plans:
            card["plans"] = plans
        workload = workload_facts(results)
        if workload:
            card["workload"] = workload
    for key in FACT_KEYS:
        if facts and facts.get(key) is not None:
            card[key] = facts[key]
    return card


VALUE_CHARS = 160
PLOT_ALT = {
    "replay-steps.png": "step composition over simulated time, plugin and upstream",
    "replay-itl.png": "inter-token latency distribution and CDF, plugin and upstream (ms)",
}
RATIO_NOTE = (
    "plugin divided by upstream vLLM on the same request mix and cost model: above 1 the "
    "plugin's latency is longer (ITL, TTFT), below 1 its throughput is lower"
)
MANIFEST_NOTE = (
    "next to this file: the manifest and its signed statement (once `vpr manifest build` "
    "ran), the full scorecard data, the replay plots"
)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def value_text(value: Any, note: str) -> str:
    """The value as a reader needs it, or "" when the note already says it."""
    if value in (None, "", [], {}):
        return ""
    if isinstance(value, (str, int, float, bool)):
        text = str(value)
        return "" if text in note else text[:VALUE_CHARS]
    said = [leaf for leaf in _leaves(value) if leaf not in (None, "", True, False)]
    if all(str(leaf) in note for leaf in said):
        return ""
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        text = ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    else:
        text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "… (scorecard.json)"


def evidence_groups(items: list[dict[str, Any]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Consecutive items grouped by file: [(file or "", [(where+note, value)])]."""
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    for item in items:
        file = item.get("file") or ""
        note = item.get("note", "")
        for prefix in (f"{file}:{item.get('line')}", file):  # the note repeats where it is
            if file and note.startswith(prefix):
                note = note[len(prefix) :].lstrip(" :")
                break
        line = f"line {item['line']}: {note}" if item.get("line") else note
        value = value_text(item.get("value"), note)
        if not groups or groups[-1][0] != file:
            groups.append((file, []))
        groups[-1][1].append((line, value))
    return groups


def _pairing_rows(card: dict[str, Any]) -> list[tuple[str, str]]:
    p = card["pairing"]
    rt = card.get("runtime") or {}
    runtime = "not recorded"
    if rt:
        runtime = f"{rt.get('name') or 'none'}: {rt.get('status') or '?'}"
        if rt.get("reason"):
            runtime += f" ({rt['reason']})"
    tool = card.get("tool") or {}
    return [
        ("pairing", f"{p.get('name', '?')}: {p.get('core', '?')} + {p.get('plugin', '?')}"),
        ("pairing id", card.get("pairing_id") or "not recorded"),
        ("runner", card["runner"]),
        ("runtime", runtime),
        (
            "certified on",
            f"{card['certified_on']} (UTC day of this conformance run; the exact time is in "
            "run.json and the store entry)"
            if card.get("certified_on")
            else "not recorded",
        ),
        ("tool", f"{tool.get('name', 'vllm-plugin-release')} {tool.get('version', '?')}"),
    ]


def _links(card: dict[str, Any]) -> list[str]:
    """The files next to this one a reader may open (relative links, nothing fetched)."""
    plots = list((card.get("replay") or {}).get("plots") or [])
    return ["manifest.json", "manifest.intoto.jsonl", "scorecard.json", *plots]


def _wheels(card: dict[str, Any]) -> list[dict[str, str]]:
    if card.get("wheels"):
        return list(card["wheels"])
    p = card["pairing"]
    return [
        {"role": role, "filename": "", "sha256": p.get(f"{role}_wheel_sha256", "")}
        for role in ("core", "plugin")
        if p.get(f"{role}_wheel_sha256")
    ]


def _replay_rows(card: dict[str, Any]) -> list[tuple[str, str]]:
    replay = card.get("replay")
    if not replay:
        return []
    ratios = replay.get("ratios") or {}
    rows = [
        (label, f"{ratios[key]:.2f}x" if isinstance(ratios.get(key), (int, float)) else "n/a")
        for label, key in HEADLINE
    ]
    share = replay.get("mixed_step_share") or {}
    shares = (
        f"{s} {v * 100:.1f}%" if isinstance(v := share.get(s), (int, float)) else f"{s} n/a"
        for s in ("plugin", "upstream")
    )
    return [*rows, ("mixed-step share", " vs ".join(shares))]


WORKLOAD_HEAD = ("feature", "share of requests", "answer", "where", "path")
WORKLOAD_TITLE = "Workload: the plan's features, asked of the plugin"


def workload_rows(card: dict[str, Any]) -> list[list[str]]:
    """feature | share | answer | where | path, the plan's features first."""
    workload = card.get("workload") or {}
    return [
        [
            f.get("label", f.get("feature", "")),
            f"{f['share'] * 100:.0f}%" if f.get("needed") else "not in the plan",
            str(f.get("outcome", "")).replace("_", " "),
            f.get("where") or "",
            f.get("path") or "",
        ]
        for f in sorted(workload.get("features") or [], key=lambda f: not f.get("needed"))
    ]


def path_lines(card: dict[str, Any]) -> list[str]:
    paths = (card.get("workload") or {}).get("paths") or {}
    return path_sentences(path_shares(paths, "scorecard: workload.paths"))


def plan_lines(card: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(plan, verdict, why) for each variant plan."""
    return [
        (f"{name}: {plan.get('description') or ''}".rstrip(": "), plan["verdict"], plan["why"])
        for name, plan in (card.get("plans") or {}).items()
    ]


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


def _md_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|---" * len(head) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _workload_md(card: dict[str, Any]) -> list[str]:
    rows = workload_rows(card)
    if not rows:
        return []
    out = ["", f"## {WORKLOAD_TITLE}", "", *[f"- {line}" for line in path_lines(card)], ""]
    out += _md_table(WORKLOAD_HEAD, ([md_cell(c) for c in row] for row in rows))
    for plan, v, why in plan_lines(card):
        out += ["", f"Plan {plan}: **{v}**", *[f"- {w}" for w in why]]
    return out


def markdown(card: dict[str, Any], max_evidence: int = 12) -> str:
    p, x = card["pairing"], card.get("explanation") or {}
    out = [
        f"# Scorecard: {p.get('name', '?')}",
        "",
        f"## Verdict: {card['verdict'].upper()}",
        "",
        f"**{card['verdict']}**: {x.get('meaning', '')}",
        "",
        "Why:",
        *[f"- {w}" for w in x.get("why", [])],
        "",
        f"Next level ({x.get('next_level') or 'none'}) needs:",
        *[f"- {n}" for n in x.get("needs", [])],
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {md_cell(v)} |" for k, v in _pairing_rows(card)],
        "| files | " + ", ".join(f"[{n}]({n})" for n in _links(card)) + " |",
        "",
        "## Wheels",
        "",
        *_md_table(
            ("role", "file", "sha256"),
            ((w["role"], w["filename"], f"`{w['sha256']}`") for w in _wheels(card)),
        ),
        "",
        "## Deferred (never counted as a pass)",
        "",
    ]
    deferred = [
        (d["check"], md_cell(d["reason"]), md_cell(d["run_with"])) for d in card["deferred"]
    ]
    if deferred:
        out += _md_table(("check", "why", "what would run it"), deferred)
    else:
        out.append("Nothing deferred.")
    replay = _replay_rows(card)
    if replay:
        out += ["", "## Replay: plugin / upstream", "", RATIO_NOTE, ""]
        out += _md_table(("figure", "ratio"), replay)
        for plot in card["replay"].get("plots", []):
            out += ["", f"![{PLOT_ALT.get(plot, plot)}]({plot})"]
    out += _workload_md(card)
    out += ["", "## Checks", ""]
    out += _md_table(
        ("check", "status", "summary"),
        ((n, ICONS[c["status"]], md_cell(c["summary"])) for n, c in card["checks"].items()),
    )
    for name, check in card["checks"].items():
        out += ["", f"### {name}: {ICONS[check['status']]}", "", check["summary"], ""]
        modules = module_rows(check)
        if modules:
            out += [*_md_table(("test file", *OUTCOMES), ((m, *c) for m, c in modules)), ""]
        out += _md_evidence(check, max_evidence)
    return "\n".join(out) + "\n"


def _md_evidence(check: dict[str, Any], max_evidence: int) -> list[str]:
    """A check's threshold and evidence, folded (nothing when it has neither)."""
    evidence = check.get("evidence", [])
    if not evidence and not check.get("threshold"):
        return []
    out = [f"<details><summary>evidence ({len(evidence)} items)</summary>", ""]
    if check.get("threshold"):
        limits = ", ".join(f"{k}={v}" for k, v in sorted(check["threshold"].items()))
        out += [f"Threshold: {limits}", ""]
    for file, lines in evidence_groups(evidence[:max_evidence]):
        indent = ""
        if file:
            out.append(f"- {file}")
            indent = "  "
        out += [f"{indent}- {line}" + (f" ({value})" if value else "") for line, value in lines]
    if len(evidence) > max_evidence:
        out.append(f"- ... and {len(evidence) - max_evidence} more (see scorecard.json)")
    return [*out, "", "</details>"]


STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:68rem;color:#1a1a1a;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;
text-align:left;vertical-align:top}th{background:#f4f4f4}
.pass{background:#d9f2d9}.warn{background:#fff2cc}.fail{background:#f8d0d0}.deferred{background:#e0e0f0}
.banner{border-radius:.5rem;padding:1rem 1.2rem;margin:1rem 0}
.banner h2{margin:.1rem 0 .4rem;font-size:1.7rem}.banner p{margin:.3rem 0}
.fleet{background:#c8f0c8}.pilot{background:#fff2b3}.lab{background:#f5c2c2}
code{font-size:.85rem;background:#f0f0f0;padding:0 .2rem}.sha{font-family:monospace;font-size:.8rem}
details{margin:.2rem 0 1rem}summary{cursor:pointer;color:#333}
li{margin:.15rem 0;font-size:.9rem}.value{color:#555}img{max-width:100%;border:1px solid #ddd}
.supported{background:#eef8ee}.refused,.changed{background:#fbe3e3}.slow_path{background:#fff6d9}
"""


def _table(rows: list[tuple[str, str]]) -> str:
    return (
        "<table>"
        + "".join(f"<tr><th>{inline(k)}</th><td>{inline(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _html_table(head: Sequence[str], rows: Iterable[str], th: str = "<th>") -> str:
    return f"<table><tr>{''.join(f'{th}{h}</th>' for h in head)}</tr>{''.join(rows)}</table>"


def _tr(cells: Iterable[str], cls: str) -> str:
    return f'<tr class="{cls}">' + "".join(f"<td>{inline(c)}</td>" for c in cells) + "</tr>"


def _banner(card: dict[str, Any]) -> str:
    v, x = card["verdict"], card.get("explanation") or {}
    why = "".join(f"<li>{inline(w)}</li>" for w in x.get("why", []))
    needs = "".join(f"<li>{inline(n)}</li>" for n in x.get("needs", []))
    return (
        f'<div class="banner {v}"><h2>Verdict: {v.upper()}</h2>'
        f"<p><b>{v}</b>: {inline(x.get('meaning', ''))}</p>"
        f"<p><b>Why</b></p><ul>{why}</ul>"
        f"<p><b>Next level ({inline(x.get('next_level') or 'none')}) needs</b></p>"
        f"<ul>{needs}</ul></div>"
    )


def _deferred_html(card: dict[str, Any]) -> str:
    if not card["deferred"]:
        return "<h2>Deferred</h2><p>Nothing deferred.</p>"
    rows = (_tr((d["check"], d["reason"], d["run_with"]), "deferred") for d in card["deferred"])
    return "<h2>Deferred (never counted as a pass)</h2>" + _html_table(
        ("check", "why", "what would run it"), rows
    )


def _workload_html(card: dict[str, Any]) -> str:
    rows = workload_rows(card)
    if not rows:
        return ""
    paths = "".join(f"<li><b>{inline(line)}</b></li>" for line in path_lines(card))
    plans = "".join(
        f"<p>Plan {inline(plan)}: <b>{html.escape(v)}</b></p><ul>"
        + "".join(f"<li>{inline(w)}</li>" for w in why)
        + "</ul>"
        for plan, v, why in plan_lines(card)
    )
    body = (_tr(row, html.escape(row[2].replace(" ", "_"))) for row in rows)
    return (
        f"<h2>{WORKLOAD_TITLE}</h2>"
        + (f"<ul>{paths}</ul>" if paths else "")
        + _html_table(WORKLOAD_HEAD, body)
        + plans
    )


def _modules_html(check: dict[str, Any]) -> str:
    rows = module_rows(check)
    body = (
        f'<tr><th scope="row">{html.escape(m)}</th>'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
        for m, cells in rows
    )
    return _html_table(("test file", *OUTCOMES), body, '<th scope="col">') if rows else ""


def _replay_html(card: dict[str, Any], plots: dict[str, bytes]) -> str:
    rows = _replay_rows(card)
    if not rows:
        return ""
    images = "".join(
        f'<figure><img alt="{html.escape(PLOT_ALT.get(name, name))}" '
        f'src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>"
        for name, data in plots.items()
    )
    return (
        "<h2>Replay: plugin / upstream</h2>"
        + f"<p>{inline(RATIO_NOTE)}</p>"
        + _table(rows)
        + images
    )


def _evidence_html(check: dict[str, Any], max_evidence: int) -> str:
    evidence = check.get("evidence", [])
    if not evidence and not check.get("threshold"):
        return ""
    parts = []
    if check.get("threshold"):
        limits = ", ".join(f"{k}={v}" for k, v in sorted(check["threshold"].items()))
        parts.append(f"<p>Threshold: {inline(limits)}</p>")
    for file, lines in evidence_groups(evidence[:max_evidence]):
        items = "".join(
            f"<li>{inline(line)}"
            + (f' <span class="value">({inline(value)})</span>' if value else "")
            + "</li>"
            for line, value in lines
        )
        parts.append((f"<p>{inline(file)}</p>" if file else "") + f"<ul>{items}</ul>")
    if len(evidence) > max_evidence:
        parts.append(f"<p>... and {len(evidence) - max_evidence} more (scorecard.json)</p>")
    return f"<details><summary>{len(evidence)} evidence items</summary>{''.join(parts)}</details>"


def to_html(card: dict[str, Any], plots: dict[str, bytes], max_evidence: int = 40) -> str:
    """A self-contained page: inline style, plots as data URIs, no scripts."""
    name = html.escape(str(card["pairing"].get("name", "")))
    wheels = (
        f"<tr><td>{inline(w['role'])}</td><td>{inline(w['filename'])}</td>"
        f'<td class="sha">{inline(w["sha256"])}</td></tr>'
        for w in _wheels(card)
    )
    rows = (
        f'<tr class="{c["status"]}"><td><a href="#{html.escape(n)}">{html.escape(n)}</a></td>'
        f"<td>{ICONS[c['status']]}</td><td>{inline(c['summary'])}</td></tr>"
        for n, c in card["checks"].items()
    )
    sections = "".join(
        f'<h3 id="{html.escape(n)}">{html.escape(n)}: {ICONS[c["status"]]}</h3>'
        f"<p>{inline(c['summary'])}</p>{_modules_html(c)}{_evidence_html(c, max_evidence)}"
        for n, c in card["checks"].items()
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>Scorecard {name}: {html.escape(card['verdict'])}</title>"
        f"<style>{STYLE}</style></head><body><h1>Scorecard: {name}</h1>"
        + _banner(card)
        + _table(_pairing_rows(card))
        + f"<p>{inline(MANIFEST_NOTE)}: "
        + ", ".join(f'<a href="{html.escape(n)}">{html.escape(n)}</a>' for n in _links(card))
        + "</p>"
        + "<h2>Wheels</h2>"
        + _html_table(("role", "file", "sha256"), wheels)
        + _deferred_html(card)
        + _replay_html(card, plots)
        + _workload_html(card)
        + "<h2>Checks</h2>"
        + _html_table(("check", "status", "summary"), rows)
        + sections
        + "</body></html>\n"
    )


def plot_bytes(dist: Path, card: dict[str, Any]) -> dict[str, bytes]:
    """The replay plots the card names, for embedding in the HTML page."""
    names = (card.get("replay") or {}).get("plots") or []
    return {n: (dist / n).read_bytes() for n in names if (dist / n).is_file()}


def write_card(dist: Path, card: dict[str, Any]) -> None:
    """scorecard.json, .md and .html (the plots embedded) into dist/NAME."""
    write_json(dist / records.SCORECARD, card)
    atomic_write_text(dist / records.SCORECARD_MD, markdown(card))
    atomic_write_text(dist / records.SCORECARD_HTML, to_html(card, plot_bytes(dist, card)))
