"""The `workload` check's answers, from what the pairing environment saw (pure).

`inenv/workload.py` reports, per probe, how the engine config fared through the platform's
`check_and_update_config` (returned, raised where, what it changed and where) and how a
request fared through SamplingParams, vLLM's verify and the platform's `validate_request`,
and which slow paths the plugin's predicates send it to. Here each feature variant of a
plan gets one answer (supported, refused, changed, slow path, deferred), a plan gets its
status, its blockers (the needed features it refuses: the first reason of its verdict) and
the share of its requests on each path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_plugin_release.conform.checks.workload.job import WorkloadAnswer
from vllm_plugin_release.replay import features as feat

OUTCOMES = ("supported", "refused", "changed", "slow_path", "deferred")

MULTIMODAL = (
    "not asked on this runner: image inputs need a multimodal model's processor files and "
    "weights (the probe's model is a small text-only config); they are asked where such a "
    "model is served"
)

# EngineArgs keyword -> the watched engine setting it sets (inenv/workload.ENGINE_WATCH).
ENGINE_FIELDS = {
    "speculative_config": "speculative_config",
    "max_logprobs": "model_config.max_logprobs",
    "logits_processors": "model_config.logits_processors",
}
# Settings a plugin may change for every config, and the feature each bears on.
RELATED = {
    "structured_outputs_config.": "structured_output",
    "model_config.max_logprobs": "logprobs",
    "speculative_config": "speculative",
    "model_config.logits_processors": "logits_processors",
}


@dataclass(frozen=True)
class Plan:
    """One plan: the base mix (name None) or a variant; its features and requests."""

    name: str | None
    description: str
    variants: tuple[feat.Variant, ...]  # every key asked: declared + defaults
    mix: feat.FeatureMix | None  # the declared variants, per request


@dataclass
class Answer:
    outcome: str
    message: str = ""
    by: str | None = None  # plugin | vllm | spec
    where: dict[str, Any] | None = None
    path: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Seen:
    """What the environment reported, shared by every plan's judging."""

    answer: WorkloadAnswer  # inenv/workload.py's answer, checked
    probe_of: dict[str, str]  # variant key (`variant_key`) -> probe id
    combos: Sequence[dict[str, Any]]  # the request combinations asked, in order
    slow_paths: list[dict[str, Any]]  # [conformance.workload] slow_paths

    @property
    def base(self) -> dict[str, Any]:
        return self.answer.base

    @property
    def package(self) -> str:
        return str(self.answer.platform or "").split(".")[0]

    def probe(self, v: feat.Variant) -> dict[str, Any]:
        return self.answer.probes.get(self.probe_of.get(variant_key(v), ""), {})


def variant_key(v: feat.Variant) -> str:
    return json.dumps([v.key, dict(v.options)], sort_keys=True)


def at(where: dict[str, Any] | None) -> str:
    return f"{where['file']}:{where['line']}" if where and where.get("line") else "?"


def error_text(error: dict[str, Any]) -> str:
    return f"{error.get('type')}: {error.get('message')}"


def change_text(change: dict[str, Any]) -> str:
    return f"{change['field']} {change['from']!r} -> {change['to']!r} ({at(change.get('where'))})"


def same_stop(engine: dict[str, Any], base: dict[str, Any]) -> bool:
    """The hook stopped where it stops for the base config too (not the feature's doing)."""
    if base.get("hook") != "raised" or engine.get("hook") != "raised":
        return False
    mine, theirs = engine.get("error") or {}, base.get("error") or {}
    return mine.get("where") == theirs.get("where") and mine.get("message") == theirs.get("message")


# ---------------------------------------------------------------------------
# One variant.


def judge(v: feat.Variant, seen: Seen) -> Answer:
    """One variant's answer."""
    if v.key == "multimodal":
        return Answer("deferred", MULTIMODAL)
    probe = seen.probe(v)
    changed: list[dict[str, Any]] = []
    engine = probe.get("engine")
    if engine is not None:
        early = _engine_answer(engine, seen.base)
        if early is not None:
            return early
        asked = {ENGINE_FIELDS[k] for k in feat.engine_kwargs(v) if k in ENGINE_FIELDS}
        changed = [c for c in engine.get("changes", []) if c["field"] in asked]
    request = probe.get("request")
    if request is not None and not request.get("accepted"):
        return _refused_request(request, changed)
    ours = changed + [c for c in (request or {}).get("changes", []) if _by(c, seen.package)]
    if ours:
        text = "; ".join(change_text(c) for c in ours)
        return Answer(
            "changed", f"accepted, then changed: {text}", "plugin", ours[0]["where"], changes=ours
        )
    if engine is None and request is None and v.level == "request":
        return Answer("deferred", "not asked: no engine config to ask it on (see the base config)")
    return _path_answer(v, probe, seen)


def _engine_answer(engine: dict[str, Any], base: dict[str, Any]) -> Answer | None:
    """The answer the engine config gives alone (refused, not askable), or None: go on."""
    hook = engine.get("hook")
    error = engine.get("error") or {}
    if hook == "not reached":
        text = "vLLM could not build this engine config here, before asking the platform"
        return Answer("deferred", f"{text}: {error_text(error)}", "vllm", error.get("where"))
    if hook == "raised" and not same_stop(engine, base):
        return Answer("refused", error_text(error), error.get("by"), error.get("where"))
    return None


def _refused_request(request: dict[str, Any], changed: list[dict[str, Any]]) -> Answer:
    error = request.get("error") or {}
    text = f"{error_text(error)} (in {request.get('stage')})"
    if error.get("by") == "vllm" and changed:  # vLLM refuses what the plugin changed
        text += ", after the plugin changed " + "; ".join(change_text(c) for c in changed)
        return Answer("refused", text, "plugin", changed[0]["where"], changes=changed)
    return Answer("refused", text, error.get("by"), error.get("where"))


def _by(change: dict[str, Any], package: str) -> bool:
    """A request setting changed by the plugin's code (vLLM's own normalising is not)."""
    where = change.get("where") or {}
    return not where or str(where.get("file", "")).split("/")[0] == package


def _path_answer(v: feat.Variant, probe: dict[str, Any], seen: Seen) -> Answer:
    decided = []
    for path in seen.slow_paths:
        if v.key in (path.get("engine_features") or ()):
            text = (
                f"every request, while the engine runs with it ([conformance.workload] "
                f"slow_paths {path['name']!r} engine_features: the spec's statement of the "
                "plugin's code, not asked of the plugin)"
            )
            return Answer("slow_path", text, "spec", path=path["name"])
        said = (probe.get("paths") or {}).get(path["name"]) or {}
        if "error" in said:
            text = f"{path['predicate']} raised {said['error']}: its path is not known"
            return Answer("deferred", text, "plugin")
        if said.get("taken"):
            text = f"{path['predicate']} sends it to the {path['name']}"
            return Answer("slow_path", text, "plugin", said.get("where"), path=path["name"])
        if said:
            decided.append((path, said))
    hooks = seen.answer.hooks or {}
    text = "accepted by check_and_update_config" + (
        " and validate_request" if v.level == "request" else ""
    )
    where = hooks.get("validate_request" if v.level == "request" else "check_and_update_config")
    for path, said in decided:
        text += f"; {path['predicate']} keeps it off the {path['name']}"
        where = said.get("where") or where
    return Answer("supported", text, "plugin", where)


# ---------------------------------------------------------------------------
# One plan.


@dataclass
class PlanResult:
    status: str
    rows: list[dict[str, Any]]
    paths: dict[str, Any]
    blockers: list[str]
    fails: list[str]
    warns: list[str]
    deferred: list[str]

    def summary(self) -> str:
        first = self.blockers or self.fails or self.deferred or self.warns
        return f"{self.status}: " + ("; ".join(first) if first else tally(self.rows))


def _row(v: feat.Variant, a: Answer, requests: int | None) -> dict[str, Any]:
    row = {
        "feature": v.id,
        "label": v.label(),
        "share": v.share,
        "needed": v.needed,
        "declared": v.declared,
        "outcome": a.outcome,
        "by": a.by,
        "where": at(a.where) if a.where else None,
        "message": a.message,
    }
    if requests is not None:
        row["requests"] = requests
    if a.path:
        row["path"] = a.path
    if a.changes:
        row["changes"] = a.changes
    return row


def request_paths(plan: Plan, seen: Seen) -> dict[str, Any]:
    """The share of the plan's requests on each path: the first slow path each takes (an
    engine-level feature the plan uses, named by a path's engine_features, takes all)."""
    if plan.mix is None or not seen.slow_paths:
        return {}
    used = {v.key for v in plan.mix.variants if v.needed}
    plan_combos, of_request = plan.mix.combos()
    per_combo: list[str] = []
    for combo in plan_combos:
        params = feat.combined_params([plan.mix.variants[i] for i in combo])
        said = seen.answer.combos[seen.combos.index(params)].get("paths") or {}
        name = next(
            (
                p["name"]
                for p in seen.slow_paths
                if used & set(p.get("engine_features") or ())
                or (said.get(p["name"]) or {}).get("taken")
            ),
            "default",
        )
        per_combo.append(name)
    total = len(of_request) or 1
    counts: dict[str, int] = {}
    for combo in of_request:
        counts[per_combo[combo]] = counts.get(per_combo[combo], 0) + 1
    out: dict[str, Any] = {}
    for p in seen.slow_paths:
        n = counts.get(p["name"], 0)
        out[p["name"]] = {
            "instead_of": p.get("instead_of"),
            "requests": n,
            "share": round(n / total, 4),
        }
    rest = counts.get("default", 0)
    out["default"] = {"requests": rest, "share": round(rest / total, 4)}
    return out


def judge_plan(plan: Plan, seen: Seen) -> PlanResult:
    """Every variant of `plan` answered, the paths' shares, and the plan's status."""
    counts = plan.mix.counts() if plan.mix is not None else {}
    every = len(plan.mix.per_request) if plan.mix is not None else None
    r = PlanResult("pass", [], {}, [], [], [], [])
    for v in plan.variants:
        a = judge(v, seen)
        requests = counts.get(v.id) if v.level == "request" else (every if v.needed else None)
        r.rows.append(_row(v, a, requests))
        said = f"{v.label()}: {a.outcome.replace('_', ' ')}" + (
            f" at {at(a.where)}" if a.where else ""
        )
        if a.outcome == "refused" and v.needed:
            r.blockers.append(
                f"needs {v.label()} for {share_text(v, requests)}, which the plugin refuses: "
                f"{a.message} ({at(a.where)})"
            )
            r.fails.append(f"{said}: needed by the plan ({share_text(v, requests)})")
        elif a.outcome == "changed":
            r.fails.append(f"{said}: {a.message}")
        elif a.outcome == "deferred" and v.needed:
            r.deferred.append(f"{v.label()}: {a.message}")
    related_notes(r.rows, seen.base)
    r.paths = request_paths(plan, seen)
    r.warns = [
        f"{pct(m['share'])} of requests {path_words(name, m)}"
        for name, m in r.paths.items()
        if name != "default" and m["requests"]
    ]
    r.status = "fail" if r.fails else "deferred" if r.deferred else "warn" if r.warns else "pass"
    return r


def share_text(v: feat.Variant, requests: int | None) -> str:
    if v.level == "engine":
        return "every request"
    return f"{pct(v.share)} of requests" + (f" ({requests})" if requests is not None else "")


def pct(share: float | None) -> str:
    return f"{(share or 0) * 100:.1f}%"


def path_words(name: str, mark: dict[str, Any]) -> str:
    if mark.get("instead_of"):
        return f"leave the {mark['instead_of']} for the {name}"
    return f"take the {name}"


def tally(rows: list[dict[str, Any]]) -> str:
    """`7 supported, 1 refused (speculative), 3 slow path (logprobs, ...)`."""
    parts = []
    for outcome in OUTCOMES:
        names = [r["feature"] for r in rows if r["outcome"] == outcome]
        if names:
            shown = "" if outcome == "supported" else f" ({', '.join(names)})"
            parts.append(f"{len(names)} {outcome.replace('_', ' ')}{shown}")
    return ", ".join(parts)


def related_notes(rows: list[dict[str, Any]], base: dict[str, Any]) -> None:
    """The settings the platform changes for every config, noted on the feature each bears
    on (`structured_outputs_config.disable_any_whitespace` on structured_output)."""
    for change in base.get("changes", []):
        key = next((k for p, k in RELATED.items() if change["field"].startswith(p)), None)
        for row in rows:
            if key and row["feature"].split("[")[0] == key:
                note = f"the platform sets {change_text(change)} for every engine config"
                row.setdefault("notes", []).append(note)


def base_stop(base: dict[str, Any]) -> tuple[str, str] | None:
    """(short, full) of what stops the platform hook (or vLLM after it) here for every
    config, and why; None when the base config completed. The features were asked up to
    that line; the rest is deferred to the hardware runner, whose image has what is missing."""
    hook = base.get("hook")
    error = base.get("error") if hook != "returned" else base.get("after_hook")
    if not error:
        return None
    causes = [w["message"] for w in base.get("warnings", []) if "rror" in w["message"]]
    cause = causes[0].rpartition(": ")[2] if causes else error.get("message", "")
    who = "the platform hook stops" if hook == "raised" else "vLLM stops after the platform hook"
    if hook == "not reached":
        who = "vLLM stops before the platform hook"
    short = (
        f"{who} at {at(error.get('where'))} for every engine config here ({cause}): the rest "
        "is deferred to the hardware runner"
    )
    full = f"{who} here for every engine config at {at(error.get('where'))}: {error_text(error)}"
    if causes:
        full += f" ({causes[0]})"
    classes = ", ".join(f"{a} from {m}" for a, m in (base.get("model_classes") or {}).items())
    if classes:
        full += f"; the model class: {classes}"
    full += "; the features were asked up to that line, the rest needs the hardware runner's image"
    return short, full
