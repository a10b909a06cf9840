"""The `workload` check: the pilot plan's features asked of the plugin, as vLLM asks at startup.

The request mix declares the features its requests use (`[conformance.request_mix]
features`, `replay/features.py`), and variant plans may add more (`plans.NAME`). Every
feature of the catalogue is asked (the plan's variants, and the defaults of a key it does
not declare), in the pairing environment with the vendor runtime present, so vLLM's own
discovery activates the plugin's platform (`inenv/workload.py`): the engine config is
built with the feature (`EngineArgs.create_engine_config`, the platform's
`check_and_update_config` watched), a request with it goes through SamplingParams,
vLLM's verify and the platform's `validate_request`, and the spec's slow-path predicates
(`[conformance.workload] slow_paths`: vendor policy as data) say which requests leave
the fast path. Each feature gets one answer:

- supported: accepted, nothing it asked for changed (pass);
- refused: the hook or a request check raised, named with its file:line (fail for a plan
  that needs it, share > 0; pass for a plan that does not);
- changed: accepted, but the plugin dropped or changed what was asked, named with the line
  that did (fail, always);
- slow path: accepted, and the predicate sends its requests to the slower path (warn, with
  the share of the mix);
- deferred: not askable here (image inputs; what vLLM cannot build offline): deferred for a
  plan that needs it.

Model coverage is a secondary signal: the models the plugin's docs show (`modeldocs`),
and the spec's model not among them is a warning. Pure but for `run` (the environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_plugin_release.conform.checks.workload import modeldocs
from vllm_plugin_release.conform.checks.workload.job import (
    Probe,
    ProbeModel,
    SlowPath,
    WorkloadJob,
)
from vllm_plugin_release.conform.checks.workload.judge import (
    Plan,
    PlanResult,
    Seen,
    base_stop,
    judge_plan,
    pct,
    tally,
    variant_key,
)
from vllm_plugin_release.conform.context import Context
from vllm_plugin_release.conform.lib import hardwaresettings
from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.replay import config as replay_config
from vllm_plugin_release.replay import features as feat
from vllm_plugin_release.replay import mix as mixes

NAME = "workload"
TIMEOUT_S = 900.0


# ---------------------------------------------------------------------------
# The plans and what is asked.


def plans(spec: Any) -> list[Plan]:
    """The base plan and the variant plans of the spec's request mix."""
    tables = mixes.spec_plans(spec)
    if not tables:
        return [Plan(None, "no request mix", tuple(feat.asked([])), None)]
    request_mix = mixes.from_spec(spec)
    count, seed = len(request_mix), request_mix.seed
    return [
        Plan(
            t.name,
            t.description or ("the request mix" if t.name is None else t.name),
            tuple(feat.asked(feat.parse(t.features))),
            feat.feature_mix(t.features, count, seed),
        )
        for t in tables
    ]


def _options(spec: Any) -> dict[str, Any]:
    """`[conformance.workload]` as validated with the spec ({} when absent): read here only
    (the replay reads its slow paths too, to price them)."""
    return dict((spec.raw.get("conformance") or {}).get("workload") or {})


def build_request(
    spec: Any, all_plans: list[Plan], sys_path: tuple[str, ...] = ()
) -> tuple[WorkloadJob, dict[str, str]]:
    """The in-environment job: one probe per distinct variant of every plan, the distinct
    request combinations, the slow paths; and variant key -> probe id."""
    options = _options(spec)
    replay = replay_config.declared_model(spec)
    probes: list[Probe] = []
    ids: dict[str, str] = {}
    for plan in all_plans:
        for v in plan.variants:
            if variant_key(v) in ids or v.key == "multimodal":
                continue
            ids[variant_key(v)] = pid = f"p{len(ids)}"
            params = None if v.level == "engine" else feat.combined_params([v])
            probes.append(Probe(pid, feat.engine_kwargs(v) or None, params))
    combos: list[dict[str, Any]] = []
    for plan in all_plans:
        for combo in plan.mix.combos()[0] if plan.mix is not None else []:
            params = feat.combined_params([plan.mix.variants[i] for i in combo])
            if params not in combos:
                combos.append(params)
    model = ProbeModel(
        int(options.get("max_model_len") or replay.max_model_len),
        options.get("architecture", "LlamaForCausalLM"),
        options.get("model_type") or replay.model_type,
    )
    slow = tuple(
        SlowPath(p["name"], p["predicate"], dict(p.get("args") or {}))
        for p in options.get("slow_paths") or []
    )
    return WorkloadJob(model, tuple(probes), tuple(combos), slow, sys_path), ids


# ---------------------------------------------------------------------------
# Model coverage.


def model_coverage(spec: Any, plugin_root: Path) -> dict[str, Any]:
    """The models the plugin's docs show and whether the spec's model is among them."""
    options = _options(spec)
    hardware = hardwaresettings.declared(spec)
    model = options.get("model") or (hardware.model if hardware is not None else None)
    files, seen = modeldocs.read_models(plugin_root, options.get("model_docs"))
    rows = modeldocs.table(seen)
    return {"docs": files, "table": rows, **modeldocs.coverage(model, rows)}


def coverage_finding(cov: dict[str, Any]) -> tuple[str | None, Evidence]:
    """(a warning or None, the evidence) of the model coverage signal."""
    model, rows = cov.get("model"), cov.get("table") or []
    if not model:
        note = f"the plugin's docs show {len(rows)} model(s); the spec names no model to look up"
        return None, Evidence(note=note, source="plugin")
    if cov.get("listed"):
        file, _, line = cov["where"][0].rpartition(":")
        note = f"model {model} is in the plugin's docs ({len(rows)} models shown)"
        return None, Evidence(note=note, file=file, line=int(line), source="plugin")
    nearest = ", ".join(cov.get("nearest") or []) or "none close"
    warning = (
        f"the spec's model {model} is not among the {len(rows)} models the plugin's docs show "
        f"(nearest: {nearest})"
    )
    return warning, Evidence(note=warning, source="plugin")


# ---------------------------------------------------------------------------
# The check.


def runtime_python(env: EnvRecord) -> tuple[Path, Path | None] | str:
    """(the pairing env's python, the overlay holding a stand-in runtime or None) where the
    plugin's platform can activate; else why it cannot here."""
    runtime = env.runtime
    if env.runtime_present:
        return env.python, None
    stand_in = env.stand_in_python
    if stand_in is not None:
        return env.python, stand_in.parent.parent
    return (
        f"the plugin's platform activates only with its runtime ({runtime.name}), "
        f"{runtime.status} here: {runtime.reason}"
    )


def run(ctx: Context, *, sys_path: tuple[str, ...] = ()) -> CheckResult:
    """Ask the plugin in the pairing environment (`sys_path`: folders put first on the
    environment's import path, as `vpr replay --sys-path` does)."""
    from vllm_plugin_release.edges.envrun import run_in_env

    where = runtime_python(ctx.env)
    all_plans = plans(ctx.spec)
    cov = model_coverage(ctx.spec, ctx.plugin_root)
    if isinstance(where, str):
        evidence = [Evidence(note=where, source="env")]
        return CheckResult(
            NAME, "deferred", f"not asked: {where}", evidence, details={"models": cov}
        )
    python, overlay = where
    job, ids = build_request(ctx.spec, all_plans, tuple(str(p) for p in sys_path))
    answer = run_in_env(python, job, overlay=overlay, timeout=TIMEOUT_S)
    slow_paths = _options(ctx.spec).get("slow_paths") or []
    seen = Seen(answer, ids, job.combos, slow_paths)
    return assess(seen, all_plans, ctx.env.platform_class, cov)


THRESHOLD = {
    "refused, needed by the plan": "fail",
    "changed or dropped": "fail",
    "needed, not askable here": "deferred",
    "slow path for some requests; the platform hook stops here; model not in the docs": "warn",
}


def assess(
    seen: Seen, all_plans: list[Plan], platform_class: str | None, cov: dict[str, Any]
) -> CheckResult:
    """The CheckResult from what the environment saw (pure)."""
    platform = seen.answer.platform
    if platform_class and platform != platform_class:
        why = (
            f"vLLM resolved {platform}, not the plugin's platform {platform_class}: nothing "
            "was asked of the plugin (see the environment check)"
        )
        return CheckResult(NAME, "deferred", why, [Evidence(note=why, source="env")])
    judged = {p.name: judge_plan(p, seen) for p in all_plans}
    base = judged[None]
    stop = base_stop(seen.base)
    warning, cov_evidence = coverage_finding(cov)
    warns = base.warns + ([stop[0]] if stop else []) + ([warning] if warning else [])
    status = base.status if base.status in ("fail", "deferred") else ("warn" if warns else "pass")
    evidence = _evidence(base, judged)
    evidence += [Evidence(note=stop[1], source="env")] if stop else []
    evidence.append(cov_evidence)
    details = {
        "platform": platform,
        "vllm_version": seen.answer.vllm_version,
        "hooks": seen.answer.hooks,
        "predicates": seen.answer.predicates,
        "features": base.rows,
        "paths": base.paths,
        "blockers": base.blockers,
        "failures": base.fails,
        "warnings": warns,
        "deferred": base.deferred + ([stop[1]] if stop else []),
        "plans": {
            p.name: {
                "description": p.description,
                "status": judged[p.name].status,
                "summary": judged[p.name].summary(),
                "blockers": judged[p.name].blockers,
                "features": judged[p.name].rows,
                "paths": judged[p.name].paths,
            }
            for p in all_plans
            if p.name is not None
        },
        "models": cov,
    }
    summary = _summary(platform, base, judged, warns)
    return CheckResult(NAME, status, summary, evidence, dict(THRESHOLD), details)  # type: ignore[arg-type]


def _summary(
    platform: str | None, base: PlanResult, judged: dict[str | None, PlanResult], warns: list[str]
) -> str:
    head = base.fails or base.deferred
    text = "; ".join(head) + ("; " if head else "")
    text += f"{len(base.rows)} features asked of {platform}: {tally(base.rows)}"
    if warns:
        text += "; " + "; ".join(warns)
    for name, r in judged.items():
        if name is not None:
            text += f"; plan {name}: {r.summary()}"
    return text


ORDER = {o: i for i, o in enumerate(("changed", "refused", "deferred", "slow_path", "supported"))}


def _evidence(base: PlanResult, judged: dict[str | None, PlanResult]) -> list[Evidence]:
    out = [
        Evidence(note=f"plan {name}: {b}", source="plugin")
        for name, r in judged.items()
        if name is not None
        for b in r.blockers
    ]
    for row in sorted(base.rows, key=lambda r: (ORDER[r["outcome"]], not r["needed"])):
        file, _, line = (row["where"] or "").rpartition(":")
        need = f"needed: {pct(row['share'])} of requests" if row["needed"] else "not needed"
        note = f"{row['label']}: {row['outcome'].replace('_', ' ')}: {row['message']} [{need}]"
        if row.get("notes"):
            note += "; " + "; ".join(row["notes"])
        out.append(
            Evidence(
                note=note,
                file=file or None,
                line=int(line) if line.isdigit() else None,
                source=row["by"] or "plugin",
            )
        )
    return out
