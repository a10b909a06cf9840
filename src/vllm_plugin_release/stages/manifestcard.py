"""The manifest's `conformance` section, made from scorecard.json (plain JSON, as `vpr
conform` wrote it): the verdict, each check's status, summary and first evidence, what
was deferred, and the workload answers; a verdict its own checks contradict is a gate
failure. Each key is checked as it is read (`stages/manifestkeys`)."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.records import SCORECARD
from vllm_plugin_release.stages.manifestkeys import as_object, get_key, iterated, kind_problem

EVIDENCE_KEPT = 5  # evidence items per check copied into the manifest (the scorecard has all)


def kept_evidence(items: list[Any]) -> list[dict[str, Any]]:
    """The first EVIDENCE_KEPT evidence items of a check, reduced to note/file/line/source."""
    evidence = []
    for item in items[:EVIDENCE_KEPT]:
        if isinstance(item, dict):
            kept = {
                k: item[k] for k in ("note", "file", "line", "source") if item.get(k) is not None
            }
            kept["note"] = str(kept.get("note", ""))
            if "line" in kept and not isinstance(kept["line"], int):
                kept.pop("line")
            for k in ("file", "source"):
                if k in kept:
                    kept[k] = str(kept[k])
            evidence.append(kept)
        else:
            evidence.append({"note": str(item)})
    return evidence


def check_verdict(verdict: str, checks: dict[str, Any], file: str) -> None:
    """A verdict that contradicts its own checks is a gate failure, never recorded as is."""
    statuses = {c["status"] for c in checks.values()}
    if verdict == "fleet" and statuses - {"pass", "warn"}:
        bad = sorted(n for n, c in checks.items() if c["status"] not in ("pass", "warn"))
        raise GateFailed(
            f"{file}: verdict 'fleet' but checks {', '.join(bad)} did not pass",
            hint="fleet needs every check passed, hardware included; re-run `vpr conform`",
        )
    if verdict == "pilot" and "fail" in statuses:
        bad = sorted(n for n, c in checks.items() if c["status"] == "fail")
        raise GateFailed(f"{file}: verdict 'pilot' but checks {', '.join(bad)} failed")


def conformance(scorecard: dict[str, Any] | None) -> dict[str, Any]:
    if scorecard is None:
        return {"status": "absent", "verdict": None, "runner": None, "checks": {}, "deferred": []}
    file = SCORECARD
    verdict = get_key(scorecard, "verdict", file)
    if verdict not in ("fleet", "pilot", "lab"):
        raise BadInput(f"{file}: verdict must be fleet, pilot or lab, got {verdict!r}")
    checks_in = get_key(scorecard, "checks", file)
    if not isinstance(checks_in, dict):
        raise BadInput(f"{file}: 'checks' must be an object of check name -> result")
    checks: dict[str, Any] = {}
    deferred = []
    for name in sorted(checks_in):
        result = checks_in[name]
        status = get_key(result, "status", f"{file}: checks.{name}")
        summary = str(result.get("summary", ""))
        evidence_in = result.get("evidence") or []
        if not isinstance(evidence_in, list | str):  # sliced and counted
            raise kind_problem(file, f"checks.{name}.evidence", "a list")
        checks[name] = {
            "status": status,
            "summary": summary,
            "evidence": kept_evidence(evidence_in),
            "evidence_count": len(evidence_in),
        }
        if status == "deferred":
            deferred.append({"check": name, "reason": summary})
    # scorecard v2 also lists the checks this runner never ran (the hardware part).
    for item in iterated(scorecard.get("deferred"), "deferred", file):
        if isinstance(item, dict) and item.get("check") not in checks:
            deferred.append(
                {k: str(item[k]) for k in ("check", "reason", "run_with") if item.get(k)}
            )
    check_verdict(verdict, checks, file)
    out = {
        "status": "present",
        "verdict": verdict,
        "runner": scorecard.get("runner"),
        "checks": checks,
        "deferred": deferred,
    }
    answers = workload(scorecard)
    if answers is not None:
        out["workload"] = answers
    return out


def workload(scorecard: dict[str, Any]) -> dict[str, Any] | None:
    """The workload answers the scorecard carries (`workload`, `plans`), as the manifest
    records them: each feature's answer, the share on each path, each plan's verdict and
    why, the models the plugin's docs show (None when the scorecard has no workload).
    BadInput naming the key of a part that is not what it is read as."""
    facts = scorecard.get("workload")
    if not isinstance(facts, dict):
        return None
    f = SCORECARD
    keep = ("feature", "share", "needed", "outcome", "where", "path")
    models = as_object(facts.get("models"), "workload.models", f)
    features = facts.get("features") or []
    if not isinstance(features, list) or not all(isinstance(x, dict) for x in features):
        raise kind_problem(f, "workload.features", "a list of objects")
    paths = as_object(facts.get("paths"), "workload.paths", f)
    if not all(isinstance(mark, dict) for mark in paths.values()):
        raise kind_problem(f, "workload.paths", "an object of objects")
    plans = as_object(scorecard.get("plans"), "plans", f)
    if not all(isinstance(plan, dict) and "verdict" in plan for plan in plans.values()):
        raise kind_problem(f, "plans", "an object of objects with a verdict")
    return {
        "platform": facts.get("platform"),
        "features": [{k: x[k] for k in keep if k in x} for x in features],
        "paths": {
            name: {k: mark[k] for k in ("requests", "share", "instead_of") if k in mark}
            for name, mark in paths.items()
        },
        "plans": {
            name: {
                "verdict": plan["verdict"],
                "why": [str(w) for w in iterated(plan.get("why"), f"plans.{name}.why", f)],
            }
            for name, plan in plans.items()
        },
        "models": {
            "model": models.get("model"),
            "listed": models.get("listed"),
            "table": models_table(scorecard),
        },
    }


def models_table(scorecard: dict[str, Any]) -> list[str]:
    """The models the workload check's details list (`checks.workload.details.models`)."""
    f, at = SCORECARD, "checks.workload"
    check = as_object((scorecard.get("checks") or {}).get("workload"), at, f)
    details = check.get("details", {})
    if not isinstance(details, dict):
        raise kind_problem(f, f"{at}.details", "an object")
    models = as_object(details.get("models"), f"{at}.details.models", f)
    rows = iterated(models.get("table"), f"{at}.details.models.table", f)
    return [str(r.get("model")) for r in rows if isinstance(r, dict)]
