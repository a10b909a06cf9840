"""`vpr conform` / `vpr check NAME`: run the checks against one pairing, write the scorecard.

Every check gets the same context (the spec, the verified sources, the pairing
environment) and returns a CheckResult. A check that cannot run because of an
outside failure (network, engine) is `deferred` with the reason, never `pass`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache, atomic_write_text, write_json
from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.spec.model import Spec

CHECK_NAMES = (
    "cadence",
    "isolation",
    "pinning",
    "scheduler",
    "api",
    "environment",
    "plugin_tests",
)


@dataclass
class Context:
    spec: Spec
    runner: str
    cache: Cache
    dist: Path
    plugin_source: Path | None = None
    _memo: dict[str, Any] = field(default_factory=dict)

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @property
    def plugin_root(self) -> Path:
        from vllm_plugin_release.edges.plugin_source import resolve

        return self._once("plugin", lambda: resolve(self.spec, self.cache, self.plugin_source)).root

    @property
    def core_tree(self) -> Path:
        from vllm_plugin_release.edges.fetch import Fetcher
        from vllm_plugin_release.stages.build_core import source_tree

        return self._once("tree", lambda: source_tree(self.spec, Fetcher(self.cache)))

    def record(self, name: str, producer: str) -> dict[str, Any]:
        from vllm_plugin_release.stages.pairing_env import load_record

        return self._once(f"rec:{name}", lambda: load_record(self.dist, name, producer))

    @property
    def env(self) -> dict[str, Any]:
        env = self.record("env.json", f"vpr env --spec {self.spec.path} --runner {self.runner}")
        if env.get("runner") != self.runner:
            raise BadInput(
                f"{self.dist / 'env.json'}: built for runner {env.get('runner')!r}, "
                f"not {self.runner!r}",
                hint=f"run `vpr env --spec {self.spec.path} --runner {self.runner}`",
            )
        return env

    @property
    def python(self) -> Path:
        return Path(self.env["python"])

    @property
    def core_wheel(self) -> Path:
        rec = self.record("build-core.json", f"vpr build-core --spec {self.spec.path}")
        return self.dist / rec["wheel"]["filename"]

    @property
    def platform_class(self) -> str | None:
        """The plugin's Platform class path when its runtime (or stand-in) imports."""
        return self.env.get("platform_class")

    def replay(self) -> dict[str, Any] | None:
        return self._once("replay", lambda: _run_replay(self))


def _run_replay(ctx: Context) -> dict[str, Any] | None:
    """The scheduler replay of the spec's request mix (None when the spec has none)."""
    if not ctx.spec.conformance.get("replay"):
        return None
    from vllm_plugin_release.replay import config, mix, runner

    outcome = runner.replay(
        ctx.python,
        mix.from_spec(ctx.spec),
        config.from_spec(ctx.spec),
        name=ctx.spec.name,
        out_dir=ctx.dist,
    )
    return outcome.report


# -- the checks ------------------------------------------------------------------------


def check_cadence(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import cadence

    return cadence.check(ctx.spec, ctx.plugin_root)


def check_isolation(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import isolation

    return isolation.check(ctx.spec, ctx.core_tree, ctx.core_wheel)


def check_pinning(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import pinning

    return pinning.check(ctx.spec, ctx.plugin_root)


def check_scheduler(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import scheddocs

    report = ctx.replay()
    broken = [
        f"{side}: {report[side].get('crashed') or report[side].get('stopped')}"
        for side in ("plugin", "upstream")
        if report and (report[side].get("crashed") or report[side].get("stopped"))
    ]
    if broken:
        return CheckResult(
            "scheduler",
            "fail",
            "the replay did not complete: " + "; ".join(broken),
            [Evidence(note=b, source="replay") for b in broken],
        )
    return scheddocs.check(ctx.spec, ctx.plugin_root, replay=report)


def check_api(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import api

    # Same precedence as `vpr api-contract`: the spec's platform_class, then the env's.
    configured = ctx.spec.conformance.get("api", {}).get("platform_class")
    return api.check(ctx.spec, ctx.python, configured or ctx.platform_class)


def check_environment(ctx: Context) -> CheckResult:
    """The pairing environment's own checks (vpr env), summarised."""
    env = ctx.env
    checks = env.get("checks", [])
    failed = [c for c in checks if c["status"] == "fail"]
    deferred = [c for c in checks if c["status"] == "deferred"]
    # pass only for what was observed: a half that needs the runtime keeps it at deferred
    status = "fail" if failed else ("deferred" if deferred else "pass")
    runtime = env.get("runtime", {})
    skipped = [c for c in checks if c["status"] == "skipped"]
    passed = len(checks) - len(failed) - len(deferred) - len(skipped)
    summary = (
        f"{passed} of {len(checks)} environment checks pass"
        + (f", {len(skipped)} skipped" if skipped else "")
        + f"; runtime {runtime.get('name')}: {runtime.get('status')}"
        + (f" ({runtime.get('reason')})" if runtime.get("status") != "present" else "")
        + (f"; {len(deferred)} deferred to the hardware runner" if deferred else "")
    )
    evidence = [
        Evidence(note=f"{c['status']}: {c['name']}: {c['detail']}", source="env") for c in checks
    ]
    evidence += [
        Evidence(note=f"{m['module']}: {m['status']} ({m.get('reason', '')})", source="env")
        for m in env.get("runtime_modules", [])
    ]
    return CheckResult(
        "environment",
        status,  # type: ignore[arg-type]
        summary,
        evidence,
        details={"runtime": runtime, "lock_sha256": env.get("lock_sha256")},
    )


def check_plugin_tests(ctx: Context) -> CheckResult:
    from vllm_plugin_release.conform import plugin_tests as pt

    cfg = pt.settings(ctx.spec.conformance, str(ctx.spec.path))
    env = ctx.env
    module = (
        None
        if env.get("runtime", {}).get("status") == "present"
        else env.get("runtime", {}).get("module")
    )
    with ctx.cache.scratch("conform-tests-") as tmp:
        run = pt.run_tests(ctx.python, ctx.plugin_root, ctx.runner, cfg, tmp / "j.xml", module)
    # A baseline recorded by `vpr plugin-tests --baseline` stays, compared with this run.
    previous = ctx.dist / pt.RECORD
    base_run, base_version = None, None
    if previous.exists():
        old = json.loads(previous.read_text())
        if old.get("baseline") and old["baseline"].get("runner") == ctx.runner:
            b = old["baseline"]
            base_version = b.get("core_version")
            base_run = pt.TestRun(b["runner"], b["paths"], b["counts"], b["outcomes"])
    record = pt.write_record(ctx.dist, run, base_run, base_version, ctx.spec.core.version)
    c = run.counts
    # pass only when the whole suite ran: tests or paths left to the hardware runner
    # keep the check at deferred
    status = (
        "fail" if run.failing else ("deferred" if c.get("deferred") or run.deferred else "pass")
    )
    if c.get("total", 0) == 0:
        status = "fail"
    summary = (
        f"{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped,"
        f" {c.get('deferred', 0)} deferred (need the runtime)"
        + (f"; deferred paths: {', '.join(run.deferred)}" if run.deferred else "")
    )
    evidence = [Evidence(note=f"failing: {t}", source="pytest") for t in run.failing]
    evidence += [
        Evidence(note=f"regression vs vLLM {base_version}: {t}", source="baseline")
        for t in record.get("regressions", [])
    ]
    evidence += [
        Evidence(note=f"deferred to the hardware runner: {p}", source="spec") for p in run.deferred
    ]
    return CheckResult(
        "plugin_tests",
        status,
        summary,
        evidence,
        threshold={"paths": cfg[ctx.runner]},  # type: ignore[arg-type]
        details={"counts": c},
    )


CHECKS: dict[str, Callable[[Context], CheckResult]] = {
    "cadence": check_cadence,
    "isolation": check_isolation,
    "pinning": check_pinning,
    "scheduler": check_scheduler,
    "api": check_api,
    "environment": check_environment,
    "plugin_tests": check_plugin_tests,
}


def run_check(ctx: Context, name: str) -> CheckResult:
    if name not in CHECKS:
        raise BadInput(f"unknown check {name!r}; expected one of: {', '.join(CHECKS)}")
    try:
        return CHECKS[name](ctx)
    except OutsideFailure as exc:
        return CheckResult(
            name,
            "deferred",
            f"could not run: {exc.message}",
            [Evidence(note=str(exc), source="outside failure")],
        )


def pairing_summary(ctx: Context) -> dict[str, Any]:
    core = ctx.record("build-core.json", f"vpr build-core --spec {ctx.spec.path}")
    plugin = ctx.record("build-plugin.json", f"vpr build-plugin --spec {ctx.spec.path}")
    return {
        "name": ctx.spec.name,
        "core": f"{core['core']['name']} {core['core']['version']}",
        "core_wheel_sha256": core["wheel"]["sha256"],
        "plugin": f"{plugin['plugin']['name']} {plugin['plugin']['version']}"
        f" @ {(plugin['plugin'].get('commit') or '')[:12]}",
        "plugin_wheel_sha256": plugin["wheel"]["sha256"],
    }


# Files `conform` writes into dist/NAME; a cached run restores exactly these.
OUTPUTS = (
    "scorecard.json",
    "scorecard.md",
    "scorecard.html",
    "plugin-tests.json",
    "replay.json",
    "replay-timing.json",
    "replay-steps.png",
    "replay-itl.png",
)
CONFORM_RECIPE = 2


def conform_key(ctx: Context) -> str:
    """Everything a scorecard depends on. The UTC day is an input because cadence asks the
    index which releases exist: a cached verdict never outlives the day it was made."""
    import datetime

    from vllm_plugin_release import __version__
    from vllm_plugin_release.core.cache import key_of, sha256_file

    core = ctx.record("build-core.json", f"vpr build-core --spec {ctx.spec.path}")
    plugin = ctx.record("build-plugin.json", f"vpr build-plugin --spec {ctx.spec.path}")
    contract = ctx.spec.conformance.get("api", {}).get(
        "contract", "buildspec/contracts/vllm-0.25.1-openai.json"
    )
    contract_path = ctx.spec.resolve(contract)
    env = ctx.env
    return key_of(
        {
            "recipe": CONFORM_RECIPE,
            "pipeline": __version__,
            "spec": ctx.spec.raw,
            "runner": ctx.runner,
            "core": core["wheel"]["sha256"],
            "plugin": [plugin["wheel"]["sha256"], plugin["plugin"].get("commit")],
            "env": [env.get("lock_sha256"), env.get("runtime"), env.get("checks")],
            "contract": sha256_file(contract_path) if contract_path.exists() else None,
            "day": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        }
    )


def conform_cached(ctx: Context, *, force: bool = False) -> dict[str, Any]:
    """`conform`, reusing the stage result when none of its inputs changed."""
    import shutil

    stage = ctx.cache.stage_dir("conform", conform_key(ctx))
    if not force and (stage / "scorecard.json").exists():
        for name in OUTPUTS:
            if (stage / name).exists():
                shutil.copy2(stage / name, ctx.dist / name)
        card = json.loads((stage / "scorecard.json").read_text())
        progress.info(f"conform: cached result reused (verdict {card['verdict']})")
        return card
    card = conform(ctx)
    with ctx.cache.publish_dir(stage) as work:
        for name in OUTPUTS:
            if (ctx.dist / name).exists():
                shutil.copy2(ctx.dist / name, work / name)
    return card


def conform(ctx: Context, names: tuple[str, ...] = CHECK_NAMES) -> dict[str, Any]:
    from vllm_plugin_release.conform.scorecard import scorecard, to_html, to_markdown

    results = []
    for name in names:
        with progress.status(f"conform: {name}"):
            result = run_check(ctx, name)
        progress.info(f"conform: {result.status:>8}  {name}: {result.summary}")
        results.append(result)
    card = scorecard(results, runner=ctx.runner, pairing=pairing_summary(ctx))
    write_json(ctx.dist / "scorecard.json", card)
    atomic_write_text(ctx.dist / "scorecard.md", to_markdown(card))
    atomic_write_text(ctx.dist / "scorecard.html", to_html(card))
    return card


def dumps(result: CheckResult) -> str:
    return json.dumps(result.to_json(), indent=2, sort_keys=True)
