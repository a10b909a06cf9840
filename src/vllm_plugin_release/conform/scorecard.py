"""The scorecard: every check's status and evidence, the verdict, in JSON, Markdown and HTML.

Verdicts (ARCHITECTURE.md): `fleet` (all checks pass, hardware conformance passed),
`pilot` (all CPU-runner checks pass, hardware part not yet run), `lab` (any check
failed). A deferred check is never a pass: on the hardware runner it keeps the
verdict at `pilot`.

This module is the data (deterministic: no clock, no host; the certification day is
handed in); `conform/scorecard_render.py` draws it as Markdown and HTML.
"""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform.result import CheckResult

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
    "run on the hardware runner: `vpr conform-hardware --spec FILE` (`nox -s conform-hardware`) "
    "on a machine with the vendor runtime and device"
)
# Facts beside the checks, carried over when the hardware runner adds its check.
FACT_KEYS = ("wheels", "runtime", "certified_on", "tool", "replay", "pairing_id")


def utc_day() -> str:
    """The certification day: the scorecard is deterministic for one UTC day (cadence reads
    the index), so the day is the finest time it can carry."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


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


def run_with(name: str, reason: str) -> str:
    """What would run a deferred check."""
    if name == "hardware" or "runtime" in reason:
        return HARDWARE_RUN
    return f"`vpr check {name} --spec FILE` once the cause above is gone"


def deferred_items(
    results: list[CheckResult], not_run: list[tuple[str, str]]
) -> list[dict[str, str]]:
    """Every check that did not pass because it did not run: deferred results, and the
    checks this runner never runs (`not_run`: name, reason), each with what would run it."""
    items = [
        {"check": r.name, "reason": r.summary, "run_with": run_with(r.name, r.summary)}
        for r in results
        if r.status == "deferred"
    ]
    seen = {r.name for r in results}
    items += [
        {"check": n, "reason": why, "run_with": run_with(n, why)}
        for n, why in not_run
        if n not in seen
    ]
    return sorted(items, key=lambda i: i["check"])


def blockers(results: list[CheckResult]) -> list[tuple[str, str]]:
    """(check, sentence) for each thing the plan needs that a failing check found refused
    (a check's `details.blockers`, e.g. the workload check's): the first reasons of `lab`."""
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
            mine = CheckResult(
                check.name,
                plan["status"],
                plan["summary"],
                check.evidence,
                check.threshold,
                {"blockers": plan.get("blockers") or []},
            )
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
    """The features the plan uses and the plugin's answer to each, the share of the mix on
    each path, the model coverage: what a pilot reads before the hardware order ships."""
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
    """The machine-readable scorecard (deterministic: no times, no hosts).

    `facts`: the wheels, runtime, certification day, tool and replay headline (see
    `conform.suite.card_facts`); `not_run`: checks this runner never runs (name, why);
    `blocked`: why the pairing's environment cannot be made here (`reason`, `hint`):
    the verdict is then `lab` whatever ran (`conform/envfree.py`).
    """
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
