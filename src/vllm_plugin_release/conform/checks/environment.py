"""The `environment` check: the pairing environment's own checks (`vpr env`), summarised;
a half that needs the vendor runtime stays deferred until the hardware runner ran it."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence

TABLES: dict[str, dict[str, Any]] = {}


def run(ctx: Context) -> CheckResult:
    """The pairing environment's own checks (vpr env), summarised."""
    env = ctx.env
    checks = env.checks
    failed = [c for c in checks if c.status == "fail"]
    deferred = [c for c in checks if c.status == "deferred"]
    # pass only for what was observed: a half that needs the runtime keeps it at deferred
    status = "fail" if failed else ("deferred" if deferred else "pass")
    runtime = _deterministic(env.runtime.to_json())
    skipped = [c for c in checks if c.status == "skipped"]
    passed = len(checks) - len(failed) - len(deferred) - len(skipped)
    summary = (
        f"{passed} of {len(checks)} environment checks pass"
        + (f", {len(skipped)} skipped" if skipped else "")
        + f"; runtime {runtime.get('name')}: {runtime.get('status')}"
        + (f" ({runtime.get('reason')})" if runtime.get("status") != "present" else "")
        + (f"; {len(deferred)} deferred to the hardware runner" if deferred else "")
    )
    evidence = [Evidence(note=f"{c.status}: {c.name}: {c.detail}", source="env") for c in checks]
    evidence += [
        Evidence(note=f"{m.module}: {m.status} ({m.reason or ''})", source="env")
        for m in env.runtime_modules
    ]
    return CheckResult(
        "environment",
        status,  # type: ignore[arg-type]
        summary,
        evidence,
        details={"runtime": runtime, "lock_sha256": env.lock_sha256},
    )


def _deterministic(runtime: dict[str, Any]) -> dict[str, Any]:
    """The runtime facts a scorecard keeps: without where this run put its environments
    (the stand-in overlay's interpreter path), which env.json records."""
    stand_in = runtime.get("stand_in")
    if not isinstance(stand_in, dict):
        return runtime
    return {**runtime, "stand_in": {k: v for k, v in stand_in.items() if k != "python"}}


CHECK = CheckDef(
    "environment",
    "the pairing environment's own checks (vpr env), summarised",
    run,
    TABLES,
    ("env",),
    needs=("env", "runtime"),
)
